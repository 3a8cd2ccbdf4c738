"""Per-partition functions of cudf frames (a dask-cudf frame's partitions, in GPU memory): what
:mod:`dsort.core.frame_chunk`'s functions do to a pandas frame, for a cudf one, which they hand
here. cudf is imported only when a cudf frame arrives.

The keys of a frame of any column types (strings, categoricals, decimals, datetimes, numbers with
nulls) are encoded on the host from its key columns alone, by
:class:`~dsort.core.frame_keys.KeySpec` as a pandas frame's are; the rows never leave the GPU:
cudf's own concat and gather move them. (A frame whose columns are all numbers, booleans,
datetimes or durations takes the faster path of :mod:`dsort.collections.external`: its keys and
rows made on the GPU.)
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def is_cudf(frame) -> bool:
    """Whether ``frame`` is a cudf object (a frame, series or index), told by its type alone."""
    return type(frame).__module__.split(".")[0] == "cudf"


def _decimal(dtype) -> bool:
    return type(dtype).__name__ in ("Decimal32Dtype", "Decimal64Dtype", "Decimal128Dtype")


def _series(s) -> pd.Series:
    """One cudf column as the pandas column whose keys order as cudf's values: decimals as Arrow
    decimals (pandas has no decimal dtype of its own), numbers and booleans with nulls as pandas'
    nullable ones (an integer stays an integer, its nulls missing), the rest as cudf gives them."""
    if _decimal(s.dtype):
        return s.to_pandas(arrow_type=True)
    if getattr(s.dtype, "kind", "O") in "biuf" and s.has_nulls:
        return s.to_pandas(nullable=True)
    return s.to_pandas()


def pandas_meta(meta) -> pd.DataFrame:
    """A cudf frame's (or series') meta as pandas: its columns' dtypes as :func:`key_frame` gives
    them (decimals as Arrow decimals)."""
    if hasattr(meta, "columns"):
        out = meta.to_pandas()
        for c in meta.columns:
            if _decimal(meta[c].dtype):
                out[c] = _series(meta[c]).set_axis(out.index)
        return out
    return _series(meta)


def to_pandas(s):
    """A cudf series or index as pandas (a series: as :func:`_series` gives it)."""
    return _series(s) if type(s).__name__ == "Series" else s.to_pandas()


def check_keys(meta, by) -> None:
    """Refuse, before any work, key columns of a cudf frame's meta that no key orders (lists,
    structs, intervals), naming them and their type."""
    from .errors import UnsupportedType

    for c in by:
        if c in meta.columns and type(meta[c].dtype).__name__ in ("ListDtype", "StructDtype", "IntervalDtype"):
            raise UnsupportedType(
                f"cannot sort by column {c!r} of type {meta[c].dtype}; dsort sorts by numbers, decimals, booleans, "
                "strings, categoricals, dates and times"
            )


def key_frame(frame, by) -> pd.DataFrame:
    """The columns ``by`` of a cudf frame as a pandas frame (:func:`_series` each), its index
    copied too where ``by`` names one of its levels: what :meth:`KeySpec.encode` reads."""
    names = [n for n in frame.index.names if n is not None]
    index = frame.index.to_pandas() if any(c in names and c not in frame.columns for c in by) else pd.RangeIndex(len(frame))
    columns = {c: _series(frame[c].reset_index(drop=True)).set_axis(index) for c in by if c in frame.columns}  # no index copied per column
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
    """``frame`` with its columns' dtypes as ``meta``'s where cudf's concat, gather or pickling
    gave others (a string column's pandas flavour, say)."""
    changed = {c: meta[c].dtype for c in meta.columns if c in frame.columns and frame[c].dtype != meta[c].dtype}
    return frame.astype(changed) if changed else frame


def with_positions(frame, start: int):
    """``frame`` indexed by its rows' positions ``start, start + 1, ...`` in the whole result."""
    import cudf

    out = frame.copy(deep=False)
    out.index = cudf.RangeIndex(start, start + len(frame))
    return out
