"""What a dataframe sort is asked, checked against the frame's meta before any task is built: the
key spec (:class:`~dsort.core.frame_keys.KeySpec`), the number of output partitions, the
strategies and devices, categoricals whose categories are known."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core import frame_backend
from ..core.errors import UnsupportedType, UnsupportedValue
from ..core.frame_keys import KeySpec, column, normalize

STRATEGIES = ("auto", "memory", "external")
DEVICES = (None, "gpu")


def backend(df):
    """The backend of ``df``'s partitions (:func:`dsort.core.frame_backend.of`), told by its
    meta's type alone: cudf is never imported for a pandas frame."""
    return frame_backend.of(getattr(df, "_meta", None))


def on_gpu_frame(df) -> bool:
    """Whether ``df`` is a dask-cudf frame (cudf partitions, in GPU memory)."""
    return not backend(df).ON_HOST


def pandas_meta(df):
    """``df``'s meta as pandas (a dask-cudf frame's converted: the same columns, the dtypes its
    keys are encoded at: :func:`dsort.core.frame_cudf.pandas_meta`)."""
    return backend(df).pandas_meta(df._meta)


def key_spec(df, by, ascending, na_position, strategy, device) -> KeySpec:
    """The sort's key spec, every argument checked against the frame's meta (no data read); a
    dask-cudf frame's as its pandas equivalent."""
    meta = pandas_meta(df) if hasattr(df, "_meta") else None
    if not isinstance(meta, pd.DataFrame):
        kind = f"{type(df).__module__.split('.')[0]} {type(df).__name__}"
        # a dask-cudf one too
        what = "a dask Series: use sort_series" if isinstance(meta, pd.Series) else f"a {kind}"
        raise UnsupportedType(f"dsort.dataframe sorts dask DataFrames; this is {what}")
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be one of {DEVICES}, got {device!r}")
    by, ascending = normalize(by, ascending)
    for c in by:
        column(meta, c)  # a KeyError naming the columns, or ambiguous
    backend(df).check_keys(df._meta, by)
    check_categories(df, by, meta)
    return KeySpec.of(meta, by, ascending, na_position)


def output_partitions(df, npartitions) -> int:
    """The output partitions: ``npartitions`` (a whole number, at least 1) or the input's."""
    # dask's "auto" (dask 2026.8's own sorts fail on it): the input's
    if npartitions is None or npartitions == "auto":
        return df.npartitions
    if (
        isinstance(npartitions, bool)
        or not isinstance(npartitions, (int, np.integer))
        or npartitions < 1
    ):
        raise ValueError(f"npartitions must be a whole number of at least 1, got {npartitions!r}")
    return int(npartitions)


def check_categories(df, by, meta) -> None:
    """Categorical sort columns sort by their codes, so every partition must share one list of
    categories, known up front (dask's ``.cat.as_known()``). ``meta``: df's, as pandas."""
    from dask.dataframe.utils import has_known_categories

    for c in by:
        if (
            c in df.columns
            and isinstance(meta[c].dtype, pd.CategoricalDtype)
            and not has_known_categories(df[c])
        ):
            raise UnsupportedValue(
                f"column {c!r}: its categories are not known; sort by df[{c!r}].cat.as_known() "
                "(dask) instead"
            )
