"""The pandas frame backend: what :mod:`dsort.core.frame_chunk`'s functions do to pandas
partitions (as :mod:`dsort.core.frame_cudf` is the cudf backend, with the same functions):
:func:`concat`, :func:`gather`, :func:`with_positions`, :func:`like`, and the frame the keys are
encoded from (:func:`key_frame`). :mod:`dsort.core.frame_backend` picks one of the two.
"""

from __future__ import annotations

import numpy as np
from .lazy import pd

from ..engine import host
from .frame_wire import joinable, restore

ON_HOST = True  # the rows are in host memory (a cudf frame's on its GPU)


def key_frame(frame, by):
    """The frame the keys of ``by`` are encoded from: ``frame`` itself."""
    return frame


def to_pandas(s):
    """``s`` (a series or index) as pandas: itself."""
    return s


def pandas_meta(meta):
    """The meta as pandas: itself."""
    return meta


def check_keys(meta, by) -> None:
    """pandas takes every key column dsort encodes (:mod:`dsort.core.frame_keys` refuses the
    others)."""


def concat(frames):
    """Frames end to end (one: itself)."""
    frames = list(frames)
    return frames[0] if len(frames) == 1 else pd.concat(joinable(frames))


def with_positions(frame, start: int):
    """``frame`` indexed by its rows' positions ``start, start + 1, ...`` in the whole result."""
    return frame.set_axis(pd.RangeIndex(start, start + len(frame)))


def like(frame, meta):
    """``frame`` with its columns as ``meta`` has them (object columns carried as Arrow: back)."""
    return restore(frame, meta)


def gather(frames, order, index=True) -> pd.DataFrame:
    """``pd.concat(frames).iloc[order]`` (of one frame: ``frame.iloc[order]``), the big arrays in
    :mod:`~dsort.engine.host` memory: columns and an index of NumPy dtypes taken as arrays; Arrow
    string and binary columns whose values all have one byte length, none missing, as fixed-width
    rows (Arrow's take copies value by value, much slower: BENCHMARKS.md); other
    columns and indexes, and columns whose dtype differs between the frames, through pandas.
    ``index=False``: the result's index is a plain range (the caller sets its own)."""
    order = np.asarray(order, dtype=np.intp)
    first = frames[0]
    if any(not f.columns.equals(first.columns) for f in frames[1:]):  # pandas aligns them by label
        whole = pd.concat(frames).iloc[order]
        return whole if index else whole.set_axis(pd.RangeIndex(len(order)))
    # columns carried as Arrow, of other Arrow types in some: objects again
    frames = joinable(frames)
    first = frames[0]
    columns, slow = {}, []
    for j in range(first.shape[1]):
        got = _take_column([f.iloc[:, j] for f in frames], order)
        if got is None:
            slow.append(j)
        else:
            columns[j] = got
    if slow:
        rest = (
            first.iloc[order, slow]
            if len(frames) == 1
            else pd.concat([f.iloc[:, slow] for f in frames]).iloc[order]
        )
    if not index:
        labels = pd.RangeIndex(len(order))
    elif (labels := _take_index([f.index for f in frames], order)) is None:
        labels = (
            rest.index if slow else first.index.append([f.index for f in frames[1:]]).take(order)
        )
    # the arrays as they are (NumPy's, Arrow's), under names of their own until the frame's are set
    out = pd.DataFrame({f"c{j}": a for j, a in columns.items()}, index=labels, copy=False)
    if slow:  # as Series: an object column stays one (as an array, pandas would infer strings)
        rest = rest.set_axis(labels)
        for i, j in enumerate(slow):  # in column order, each to its own place
            out.insert(j, f"c{j}", rest.iloc[:, i])
    out.columns = first.columns
    if all(f.attrs == first.attrs for f in frames[1:]):  # as pd.concat keeps them
        out.attrs = dict(first.attrs)
    if not all(f.flags.allows_duplicate_labels for f in frames):
        out = out.set_flags(allows_duplicate_labels=False)
    return out


def _take_column(pieces, order):
    """One column of the frames (its pieces) at rows ``order`` of their concatenation, as an array
    in host memory; None where pandas must take it."""
    dtype = pieces[0].dtype
    if any(c.dtype != dtype for c in pieces[1:]):
        return None
    if isinstance(dtype, np.dtype) and dtype.kind in "biufcmM":
        arrays = [c.to_numpy() for c in pieces]
        return host.take(arrays[0] if len(arrays) == 1 else host.concatenate(arrays), order)
    rows = _fixed_width(pieces)
    if rows is None:
        return None
    kind = pieces[0].array.__arrow_array__().type
    import pyarrow as pa

    small = not (pa.types.is_large_string(kind) or pa.types.is_large_binary(kind))
    # more than its offsets count (repeats)
    if small and len(order) * rows.dtype.itemsize > np.iinfo(np.int32).max:
        return None
    values = _from_rows(host.take(rows, order), kind, dtype)
    return values if values.dtype == dtype else None


def _take_index(indexes, order):
    """The indexes end to end at ``order``, where each is a range or a plain index of NumPy
    integers, floats or booleans, all of one dtype and name; else None (pandas takes it)."""
    first = indexes[0]
    numbers = [
        type(ix) is pd.Index and isinstance(ix.dtype, np.dtype) and ix.dtype.kind in "biuf"
        for ix in indexes
    ]
    plain = all(type(ix) is pd.RangeIndex or number for ix, number in zip(indexes, numbers))
    if not plain or any(ix.name != first.name or ix.dtype != first.dtype for ix in indexes):
        return None
    # start + step * position: no values made
    if len(indexes) == 1 and isinstance(first, pd.RangeIndex):
        values = np.multiply(order, first.step, out=host.empty(len(order), np.int64))
        values += first.start
        return pd.Index(values, name=first.name, copy=False)
    whole = host.empty(sum(len(ix) for ix in indexes), first.dtype)
    at = 0
    for ix in indexes:
        part = whole[at : at + len(ix)]
        if isinstance(ix, pd.RangeIndex) and len(ix):  # a running sum of the step from the start
            part.fill(ix.step)
            part[0] = ix.start
            np.cumsum(part, out=part)
        else:
            part[...] = ix.to_numpy()
        at += len(ix)
    return pd.Index(host.take(whole, order), name=first.name, copy=False)


def _arrow_strings(dtype) -> bool:
    """Whether a column of ``dtype`` holds Arrow strings or binary (pandas' string dtype stored in
    Arrow, or ``pd.ArrowDtype``)."""
    import pyarrow as pa

    if isinstance(dtype, pd.StringDtype):
        return dtype.storage != "python"
    t = dtype.pyarrow_dtype if isinstance(dtype, pd.ArrowDtype) else None
    return t is not None and (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )


def _fixed_width(pieces):
    """An Arrow string or binary column's values (the ``pieces`` of it, end to end) as one NumPy
    array of ``V<width>`` rows (no copy for a column of one chunk), where all have one non-zero
    byte length and none is missing; else None."""
    if not _arrow_strings(pieces[0].dtype):
        return None
    import pyarrow as pa

    arrays = [c.array.__arrow_array__() for c in pieces]
    kind = arrays[0].type
    if any(a.type != kind or a.null_count for a in arrays) or not sum(len(a) for a in arrays):
        return None
    large = pa.types.is_large_string(kind) or pa.types.is_large_binary(kind)
    rows, width = [], None
    for c in (c for a in arrays for c in a.chunks):
        if not len(c):
            continue
        _, offsets, data = c.buffers()
        offsets = np.frombuffer(offsets, np.int64 if large else np.int32)[
            c.offset : c.offset + len(c) + 1
        ]
        size = int(offsets[-1]) - int(offsets[0])
        width = size // len(c) if width is None else width
        if not width or size != width * len(c):
            return None
        lengths = np.subtract(offsets[1:], offsets[:-1], out=host.empty(len(c), offsets.dtype))
        if not np.equal(lengths, width, out=host.empty(len(c), bool)).all():
            return None
        rows.append(
            np.frombuffer(data, np.uint8)[int(offsets[0]) : int(offsets[-1])].view(f"V{width}")
        )
    # more than its offsets can count
    if not large and sum(len(r) for r in rows) * width > np.iinfo(np.int32).max:
        return None
    return rows[0] if len(rows) == 1 else host.concatenate(rows)


def _from_rows(rows: np.ndarray, arrow_type, dtype):
    """Fixed-width rows (:func:`_fixed_width`) back as a pandas array of ``dtype``, through an
    Arrow array of ``arrow_type`` built on their bytes."""
    import pyarrow as pa

    n, width = len(rows), rows.dtype.itemsize
    large = pa.types.is_large_string(arrow_type) or pa.types.is_large_binary(arrow_type)
    offsets = host.arange(n + 1, np.int64 if large else np.int32)
    offsets *= width
    arr = pa.Array.from_buffers(
        arrow_type, n, [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(rows))]
    )
    return pd.array(pa.chunked_array([arr], type=arrow_type), dtype=dtype)
