"""Frames on the wire: a pandas frame's slice that may travel between processes (a dask transfer,
a spill, a run's rows in a file), its object columns of arrays carried as Arrow arrays.

pickle writes an object column one Python object at a time: a column of many small NumPy arrays
(a Parquet list column as pandas reads it) pickles and loads many times slower than through Arrow
(BENCHMARKS.md section 5). :class:`Wired` holds the frame as it is (no work
while it stays in its process) and converts only when it is pickled: every object column whose
values are all 1-d NumPy arrays of one dtype (or None) goes as one Arrow list array, and comes
back as the same arrays (same dtype, same values, None where None). Other columns pickle as
pandas pickles them. :func:`unwire` gives the frame back.

Where a sort's rows travel more than once (a cluster of several worker processes: the input to
its runs, the slices to their merges), converting at every move costs more than converting
twice: :func:`carry` turns those object columns into Arrow list columns as the input is read
(Arrow's take, slices and concatenation move them from there on, and they pickle as Arrow), and
:func:`restore` gives the output partitions their object columns back, as the input's meta has
them.
"""

from __future__ import annotations

import numpy as np
from .lazy import pd


SAMPLE = 20  # values of an object column whose sizes stand for all of its values (Wired.__sizeof__)


class Wired:
    """A pandas frame (``.frame``) that pickles its object columns of arrays through Arrow."""

    __slots__ = ("frame",)

    def __init__(self, frame):
        self.frame = frame

    def __len__(self):
        return len(self.frame)

    def __sizeof__(self) -> int:
        """The frame's bytes, object columns estimated from a sample of their values (as dask's
        sizeof of a frame does): what dask's memory accounting counts for it."""
        import sys

        frame = self.frame
        total = int(frame.memory_usage(index=True, deep=False).sum())
        for i, dtype in enumerate(frame.dtypes):
            if dtype == np.dtype(object) and len(frame):
                sample = frame.iloc[:: max(1, len(frame) // SAMPLE), i].to_numpy()[:SAMPLE]
                each = sum(sys.getsizeof(v) for v in sample) / max(len(sample), 1)
                total += int(each * len(frame))
        return total

    def __reduce__(self):
        frame = self.frame
        arrays = {}
        for i, dtype in enumerate(frame.dtypes):
            if dtype == np.dtype(object):
                got = _as_arrow(frame.iloc[:, i].to_numpy())
                if got is not None:
                    arrays[i] = got
        if not arrays:
            return (Wired, (frame,))
        rest = frame.iloc[:, [i for i in range(frame.shape[1]) if i not in arrays]]
        return (_rebuild, (rest, frame.columns, arrays))


def wire(frame):
    """``frame`` ready to travel (:class:`Wired`): pandas frames with object columns; others as they
    are."""
    if isinstance(frame, pd.DataFrame) and any(d == np.dtype(object) for d in frame.dtypes):
        return Wired(frame)
    return frame


def unwire(x):
    """The frame of :func:`wire`'s result (anything else: itself)."""
    return x.frame if isinstance(x, Wired) else x


def _as_arrow(values: np.ndarray):
    """An Arrow list array of object array ``values`` when each is a 1-d NumPy array of one dtype
    (or None) that Arrow holds as it is, else None."""
    import pyarrow as pa

    dtype = None
    for v in values:
        if v is None:
            continue
        if type(v) is not np.ndarray or v.ndim != 1 or (dtype is not None and v.dtype != dtype):
            return None
        dtype = v.dtype
    # numbers and booleans: Arrow's own types, exactly
    if dtype is None or dtype.kind not in "biuf":
        return None
    try:
        arr = pa.array(values, type=pa.list_(pa.from_numpy_dtype(dtype)), from_pandas=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError):
        return None
    return arr


def _rebuild(rest: pd.DataFrame, columns: pd.Index, arrays: dict) -> Wired:
    data, k = {}, 0
    for i in range(len(columns)):
        if i in arrays:
            # an object array of NumPy arrays, None for nulls
            values = arrays[i].to_numpy(zero_copy_only=False)
            data[i] = pd.Series(values, index=rest.index, dtype=object, copy=False)
        else:
            data[i] = rest.iloc[:, k]
            k += 1
    frame = pd.DataFrame(data, index=rest.index, copy=False).set_axis(columns, axis=1)
    frame.attrs = rest.attrs
    return Wired(frame)


def carry(frame):
    """``frame`` with each object column whose values are all 1-d NumPy arrays of one number dtype
    (or None) held as an Arrow list column (``pd.ArrowDtype``); other frames and columns as they
    are. :func:`restore` undoes it. (Object columns of dicts stay objects: Arrow's struct types
    them anew (an int beside floats becomes a float, a missing key a None), and checking that
    they come back exactly cost more than the pickling it saved: BENCHMARKS.md section 5.)"""
    if not isinstance(frame, pd.DataFrame) or not any(d == np.dtype(object) for d in frame.dtypes):
        return frame
    columns = {}
    for i, dtype in enumerate(frame.dtypes):
        if dtype == np.dtype(object):
            got = _as_arrow(frame.iloc[:, i].to_numpy())
            if got is not None:
                columns[i] = pd.Series(
                    pd.arrays.ArrowExtensionArray(got), index=frame.index, copy=False
                )
    if not columns:
        return frame
    out = frame.copy(deep=False)
    for i, column in columns.items():
        out.isetitem(i, column)
    return out


def _carried(dtype) -> bool:
    """An Arrow list column's dtype: what :func:`carry` makes of object columns."""
    if not isinstance(dtype, pd.ArrowDtype):
        return False
    import pyarrow as pa

    return pa.types.is_list(dtype.pyarrow_dtype)


def _as_objects(column: pd.Series) -> pd.Series:
    """An Arrow list column as the object column :func:`carry` made it from: NumPy arrays, None
    where null."""
    import pyarrow as pa

    arrow = pa.array(column.array)
    arrow = arrow.combine_chunks() if isinstance(arrow, pa.ChunkedArray) else arrow
    return pd.Series(
        arrow.to_numpy(zero_copy_only=False), index=column.index, dtype=object, copy=False
    )


def joinable(frames) -> list:
    """``frames`` (pandas, with equal columns) ready for pandas to join: a column carried as Arrow
    lists (:func:`carry`) whose Arrow types differ between the frames (each partition's own:
    arrays of ints in one, of floats in another) is made an object column again in each, as
    :func:`restore` makes it; pandas would join such columns into objects of its own making
    (``<NA>`` for None)."""
    if len(frames) < 2:
        return frames
    first = frames[0].dtypes
    # a carried column is an object column or an Arrow list in every frame: the others need no look
    if not any(d == np.dtype(object) or _carried(d) for d in first):
        return frames
    dtypes = [first, *(f.dtypes for f in frames[1:])]
    fix = [
        j
        for j, dtype in enumerate(first)
        if any(_carried(d.iloc[j]) for d in dtypes) and any(d.iloc[j] != dtype for d in dtypes[1:])
    ]
    if not fix:
        return frames
    out = []
    for f, d in zip(frames, dtypes):
        f = f.copy(deep=False)
        for j in fix:
            if _carried(d.iloc[j]):
                f.isetitem(j, _as_objects(f.iloc[:, j]))
        out.append(f)
    return out


def restore(frame, meta):
    """``frame`` with its Arrow list columns that are object columns in ``meta`` (made so by
    :func:`carry`) as object columns of NumPy arrays again, None where null; others as they are."""
    if (
        not isinstance(frame, pd.DataFrame)
        or not isinstance(meta, pd.DataFrame)
        or frame.shape[1] != meta.shape[1]
    ):
        return frame
    back = [
        i
        for i, (have, want) in enumerate(zip(frame.dtypes, meta.dtypes))
        if want == np.dtype(object) and _carried(have)
    ]
    if not back:
        return frame
    out = frame.copy(deep=False)
    for i in back:
        out.isetitem(i, _as_objects(frame.iloc[:, i]))
    return out
