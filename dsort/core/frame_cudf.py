"""Per-partition functions of cudf frames (a dask-cudf frame's partitions, in GPU memory): what
:mod:`dsort.core.frame_pandas` does to a pandas frame, for a cudf one, with the same functions
(:mod:`dsort.core.frame_backend` picks one of the two). cudf is imported only when a cudf frame
arrives.

The keys of a frame of any column types (strings, categoricals, decimals, datetimes, numbers with
nulls) are encoded on the host from its key columns alone, by
:class:`~dsort.core.frame_keys.KeySpec` as a pandas frame's are; the rows never leave the GPU:
cudf's own concat and gather move them. (A frame whose columns are all numbers, booleans,
datetimes or durations takes the faster path of :mod:`dsort.collections.fixed_frames`: its keys
and rows made on the GPU.)
"""

from __future__ import annotations

import numpy as np
from .lazy import pd


ON_HOST = False  # the rows are on the GPU (a pandas frame's in host memory)


def is_cudf(frame) -> bool:
    """Whether ``frame`` is a cudf object (a frame, series or index), told by its type alone."""
    return type(frame).__module__.split(".")[0] == "cudf"


def _decimal(dtype) -> bool:
    return type(dtype).__name__ in ("Decimal32Dtype", "Decimal64Dtype", "Decimal128Dtype")


def _series(s) -> pd.Series:
    """One cudf column (a series, its index dropped: never copied) as the pandas column whose keys
    order as cudf's values, whatever nulls a partition holds: decimals as Arrow decimals (pandas
    has no decimal dtype of its own), integers and booleans with nulls as pandas' nullable ones (an
    integer stays an integer; as floats they would encode in another order than a partition's
    without nulls), floats with nulls as NaN (missing to the key either way), the rest as cudf
    gives them."""
    s = s.reset_index(drop=True)
    if _decimal(s.dtype):
        return s.to_pandas(arrow_type=True)
    if getattr(s.dtype, "kind", "O") in "biu" and s.has_nulls:
        return s.to_pandas(nullable=True)
    return s.to_pandas()


def _index(ix) -> pd.Index:
    """A cudf index as pandas, one level's values as :func:`_series` gives a column's (several
    levels: as cudf gives them)."""
    if ix.nlevels > 1:
        return ix.to_pandas()
    return pd.Index(_series(ix.to_series()), name=ix.name)


def pandas_meta(meta) -> pd.DataFrame:
    """A cudf frame's (or series') meta as pandas: its columns' and index's dtypes as
    :func:`key_frame` gives them (decimals as Arrow decimals)."""
    if not hasattr(meta, "columns"):
        return _series(meta).set_axis(_index(meta.index))
    out = meta.to_pandas()
    for c in meta.columns:
        if _decimal(meta[c].dtype):
            out[c] = _series(meta[c]).set_axis(out.index)
    if _decimal(meta.index.dtype):
        out.index = _index(meta.index)
    return out


def to_pandas(s):
    """A cudf series (its values, no index) or index as pandas, as :func:`_series` gives them."""
    return _series(s) if type(s).__name__ == "Series" else _index(s)


def check_keys(meta, by) -> None:
    """Refuse, before any work, key columns of a cudf frame's meta that no key orders (lists,
    structs, intervals), naming them and their type."""
    from .errors import UnsupportedType

    for c in by:
        if c in meta.columns and type(meta[c].dtype).__name__ in (
            "ListDtype",
            "StructDtype",
            "IntervalDtype",
        ):
            raise UnsupportedType(
                f"cannot sort by column {c!r} of type {meta[c].dtype}; dsort sorts by numbers, "
                "decimals, booleans, "
                "strings, categoricals, dates and times"
            )


def key_frame(frame, by) -> pd.DataFrame:
    """The columns ``by`` of a cudf frame as a pandas frame (:func:`_series` each), its index
    copied too where ``by`` names one of its levels: what :meth:`KeySpec.encode` reads."""
    names = [n for n in frame.index.names if n is not None]
    index = (
        _index(frame.index)
        if any(c in names and c not in frame.columns for c in by)
        else pd.RangeIndex(len(frame))
    )
    columns = {c: _series(frame[c]).set_axis(index) for c in by if c in frame.columns}
    return pd.DataFrame(columns, index=index)


def concat(frames):
    """cudf frames end to end (one: itself)."""
    import cudf

    return frames[0] if len(frames) == 1 else cudf.concat(frames)


def gather(frames, order, index: bool = True):
    """``concat(frames).take(order)`` on the GPU; ``index=False``: the result's index a plain
    range (the caller sets its own)."""
    out = concat(list(frames)).take(np.asarray(order, dtype=np.int64))
    return out if index else out.reset_index(drop=True)


def like(frame, meta):
    """``frame`` with its string columns' dtypes as ``meta``'s where they differ (pandas' ``str``
    or ``string`` flavour, which cudf's own operations do not keep alike). No other column is
    cast: a categorical's meta may hold dask's placeholder categories, which a cast would make
    every value null of."""
    strings = [
        c
        for c in meta.columns
        if c in frame.columns and _strings(frame[c].dtype) and _strings(meta[c].dtype)
    ]
    changed = {c: meta[c].dtype for c in strings if frame[c].dtype != meta[c].dtype}
    return frame.astype(changed) if changed else frame


def _strings(dtype) -> bool:
    return isinstance(dtype, pd.StringDtype) or dtype == np.dtype(object)


def with_positions(frame, start: int):
    """``frame`` indexed by its rows' positions ``start, start + 1, ...`` in the whole result."""
    import cudf

    out = frame.copy(deep=False)
    out.index = cudf.RangeIndex(start, start + len(frame))
    return out
