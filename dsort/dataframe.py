"""Sorting dask dataframes by columns, with pandas' semantics, on top of :mod:`dsort.array`.

``sort_values(df, by, ascending=True, na_position="last")`` equals pandas'
``df.sort_values(by, ascending=..., na_position=..., kind="stable")`` on the concatenated
partitions: stable (ties keep their input order), missing values (NaN, None, NaT, pd.NA) last (or
first), index labels kept; the result has the input's partition lengths.

How: the ``by`` columns of each row are encoded as one fixed-width byte key whose ``memcmp`` order
is the wanted order (:func:`encode_keys`), :func:`dsort.array.argsort` sorts those byte rows
globally, and each output partition gathers its rows from the input partitions: one small task per
(input partition, output partition) pair, so no task holds more than one input partition.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api import types as pdt

__all__ = ["sort_values", "encode_keys", "max_string_widths"]


def _column_key(s: pd.Series, width: int | None, descending: bool, na_first: bool) -> np.ndarray:
    """One column as byte rows: a missing-value byte, then the value's order-preserving bytes
    (big-endian, sign bit flipped; all bits flipped for negative floats; inverted when
    descending, the missing-value byte never, so missing values stay last/first both ways)."""
    n = len(s)
    if isinstance(s.dtype, pd.ArrowDtype):
        s = _from_arrow(s)
    na = s.isna().to_numpy(dtype=bool, copy=True)
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):  # in category order, as pandas sorts them (ordered or not)
        s = pd.Series(np.where(na, 0, s.cat.codes.to_numpy()).astype(np.int32), index=s.index)
        dtype = s.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        s, dtype = s.dt.tz_convert("UTC").dt.tz_localize(None), np.dtype("datetime64[ns]")
    if pdt.is_bool_dtype(dtype):
        v = s.to_numpy(dtype=bool, na_value=False).astype(np.uint8).reshape(n, 1)
    elif pdt.is_integer_dtype(dtype) or pdt.is_datetime64_dtype(dtype) or pdt.is_timedelta64_dtype(dtype):
        if pdt.is_integer_dtype(dtype):
            np_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
            x = s.to_numpy(dtype=np_dtype, na_value=0)
        else:
            x = s.to_numpy().view(np.int64).copy()  # a copy: pandas may hand out read-only views
            x[na] = 0
            np_dtype = np.dtype(np.int64)
        u = x.view(f"u{np_dtype.itemsize}")
        if np_dtype.kind == "i":
            u = u ^ np.array(1 << (8 * np_dtype.itemsize - 1), dtype=u.dtype)
        v = u.astype(f">u{np_dtype.itemsize}").view(np.uint8).reshape(n, np_dtype.itemsize)
    elif pdt.is_float_dtype(dtype):
        np_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        if np_dtype.itemsize not in (4, 8):
            np_dtype = np.dtype(np.float64)
        x = s.to_numpy(dtype=np_dtype, na_value=np.nan)
        na |= np.isnan(x)
        bits = np.where(na, 0, x + np_dtype.type(0.0)).astype(np_dtype).view(f"u{np_dtype.itemsize}")  # -0.0 → +0.0
        top = np.array(1 << (8 * np_dtype.itemsize - 1), dtype=bits.dtype)
        u = np.where(bits & top, ~bits, bits | top)
        v = u.astype(f">u{np_dtype.itemsize}").view(np.uint8).reshape(n, np_dtype.itemsize)
    elif pdt.is_string_dtype(dtype) or pdt.is_object_dtype(dtype):
        data, offsets = _utf8_buffers(s)
        width = max(int(width or 0), 1)
        # UTF-8 bytes compare like the code points that Python and pandas compare; NUL pads. The
        # byte length follows (big-endian), so "a" sorts before "a\0": padding alone would tie them.
        # Built with array operations: each row's bytes gathered from Arrow's buffers at once.
        size = np.diff(offsets)
        if len(size) and int(size.max()) > width:
            raise ValueError(f"column {s.name!r} holds a value of {int(size.max())} UTF-8 bytes, wider than the {width} given")
        cols = np.arange(width)
        inside = cols[None, :] < size[:, None]
        at = np.where(inside, offsets[:-1, None] + cols[None, :], 0)
        v = np.where(inside, data[at] if len(data) else 0, 0).astype(np.uint8)
        lengths = size.astype(">u4").view(np.uint8).reshape(n, 4)
        v = np.concatenate([v, lengths], axis=1)
    else:
        raise _unordered(s)
    if descending:
        v = ~v
    flag = (na if not na_first else ~na).astype(np.uint8).reshape(n, 1)
    v = np.where(na[:, None], 0, v).astype(np.uint8)
    return np.concatenate([flag, v], axis=1)


def _unordered(s: pd.Series) -> TypeError:
    dtype = getattr(s.dtype, "pyarrow_dtype", s.dtype)
    return TypeError(f"cannot sort by column {s.name!r} of type {dtype}; dsort sorts by numbers, booleans, strings, dates and times")


def _from_arrow(s: pd.Series) -> pd.Series:
    """An Arrow-backed column (``pd.ArrowDtype``) in a form :func:`_column_key` orders: numbers,
    booleans and strings as they are; timestamps, dates, times and durations as their integers
    (one unit per column, timestamps in UTC); any other type a :class:`TypeError`."""
    import pyarrow as pa

    t = s.dtype.pyarrow_dtype
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or pa.types.is_string(t) or pa.types.is_large_string(t):
        return s
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return s.astype(pd.ArrowDtype(pa.int32() if t.bit_width == 32 else pa.int64()))
    raise _unordered(s)


def _utf8_buffers(s: pd.Series):
    """A string column's UTF-8 bytes as Arrow holds them: ``(data uint8, offsets int64)``, row
    ``i`` being ``data[offsets[i]:offsets[i + 1]]``; missing values empty."""
    import pyarrow as pa

    try:
        arr = pa.array(s.astype(object).where(s.notna(), None), type=pa.large_string(), from_pandas=True)
    except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError):
        odd = next((x for x in s.dropna() if not isinstance(x, str)), None)
        raise TypeError(f"cannot sort a column that mixes strings with {type(odd).__name__} values") from None
    arr = arr.fill_null("")
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, np.int64)[arr.offset : arr.offset + len(arr) + 1]
    data = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    return data, offsets


def string_widths(df, by) -> dict:
    """The widest UTF-8 value of each string ``by`` column of a pandas partition."""
    out = {}
    for c in by:
        s = df[c]
        if pdt.is_string_dtype(s.dtype) or pdt.is_object_dtype(s.dtype):
            _, offsets = _utf8_buffers(s)
            out[c] = int(np.diff(offsets).max()) if len(offsets) > 1 else 0
    return out


def string_columns(meta: pd.DataFrame, by) -> list:
    """The ``by`` columns that hold strings (their byte width depends on the data)."""
    return [c for c in by if pdt.is_string_dtype(meta[c].dtype) or pdt.is_object_dtype(meta[c].dtype)]


def max_string_widths(parts, columns) -> dict:
    """The widest UTF-8 value of each of ``columns`` over the partitions ``parts`` (delayed): one pass."""
    import dask
    from dask.delayed import delayed

    if not columns:
        return {}
    found = dask.compute(*[delayed(string_widths)(p, columns) for p in parts])
    return {c: max([w[c] for w in found], default=0) for c in columns}


def encode_keys(df: pd.DataFrame, by, ascending=True, na_position="last", widths=None) -> np.ndarray:
    """The ``by`` columns of a pandas dataframe as byte rows ``(len(df), width)`` whose unsigned
    byte order is pandas' order for ``sort_values(by, ascending, na_position)``. ``widths``: the
    byte width of each string column (equal across partitions; :func:`string_widths`)."""
    by, ascending = _normalize(by, ascending)
    if na_position not in ("last", "first"):
        raise ValueError(f"na_position must be 'last' or 'first', got {na_position!r}")
    widths = widths or string_widths(df, by)
    cols = [_column_key(df[c], widths.get(c), not a, na_position == "first") for c, a in zip(by, ascending)]
    return np.ascontiguousarray(np.concatenate(cols, axis=1))


def _normalize(by, ascending):
    """``by`` as a list of column labels (one label: any hashable, an integer too) and
    ``ascending`` as one bool per column (a bool, NumPy's too, or a list)."""
    by = list(by) if isinstance(by, (list, tuple)) else [by]
    if not by:
        raise ValueError("sort_values needs at least one column in by")
    ascending = [bool(ascending)] * len(by) if isinstance(ascending, (bool, np.bool_)) else [bool(a) for a in ascending]
    if len(ascending) != len(by):
        raise ValueError(f"ascending has {len(ascending)} entries for {len(by)} by columns")
    return by, ascending


def _split(perm, offsets):
    """For one output partition's global row numbers: per input partition, (local rows, places)."""
    src = np.searchsorted(offsets, perm, side="right") - 1
    order = np.argsort(src, kind="stable")
    bounds = np.searchsorted(src[order], np.arange(len(offsets)))
    return [(perm[order[a:b]] - offsets[i], order[a:b]) for i, (a, b) in enumerate(zip(bounds, list(bounds[1:]) + [len(order)]))]


def _take(part, pieces, i):
    rows, places = pieces[i]
    return part.iloc[rows], places


def _assemble(meta, n, *taken):
    frames = [f for f, _ in taken if len(f)]
    if not frames:
        return meta.iloc[:0]
    places = np.concatenate([p for f, p in taken if len(f)])
    out = pd.concat(frames)
    inverse = np.empty(n, dtype=np.int64)
    inverse[places] = np.arange(n)
    return out.iloc[inverse]


def sort_values(
    df,
    by,
    *,
    ascending=True,
    na_position="last",
    lengths=None,
    widths=None,
    strategy="auto",
    local_directory=None,
    memory_limit="auto",
    npartitions=None,
):
    """Sort a dask dataframe by ``by`` (a column name or a list), like pandas' stable
    ``sort_values``: see the module docstring. ``lengths``: the partitions' row counts if known
    (else computed, one pass); ``widths``: :func:`max_string_widths` of the string ``by`` columns
    if known (else computed, one pass). Returns a lazy dask dataframe partitioned like ``df``.

    ``strategy="external"``: for frames bigger than memory (:func:`sort_values_external`); the
    output partitions are then balanced to within one row (``npartitions`` of them, default the
    input's), and ``lengths`` is not needed. Options after ``by`` are keywords, as in pandas
    (in dask the third positional argument would be ``npartitions``)."""
    import dask
    import dask.array as da
    import dask.dataframe as dd
    from dask.base import tokenize
    from dask.delayed import delayed

    from .array import argsort

    by, ascending = _normalize(by, ascending)
    missing = [c for c in by if c not in df.columns]
    if missing:
        raise KeyError(f"no column {', '.join(map(repr, missing))}; the columns are {', '.join(map(str, df.columns))}")
    _check_categories(df, by)
    if strategy == "external":
        return sort_values_external(
            df,
            by,
            ascending=ascending,
            na_position=na_position,
            widths=widths,
            npartitions=npartitions,
            local_directory=local_directory,
            memory_limit=memory_limit,
        )
    if npartitions not in (None, df.npartitions):
        raise ValueError("npartitions other than the input's needs strategy='external' (the in-memory sort keeps the input's partitions)")
    parts = df.to_delayed(optimize_graph=False)
    if lengths is None:
        lengths = dask.compute(*[delayed(len)(p) for p in parts])
    lengths = [int(n) for n in lengths]
    meta = df._meta
    if sum(lengths) == 0:
        return df
    if widths is None:
        widths = max_string_widths(parts, string_columns(meta, by))
    probe = encode_keys(meta.iloc[:0], by, ascending, na_position, widths)
    width = probe.shape[1]
    tok = tokenize(df, by, ascending, na_position, widths)
    enc = [
        delayed(encode_keys, pure=True)(p, by, ascending, na_position, widths, dask_key_name=(f"dsort-encode-{tok}", i))
        for i, p in enumerate(parts)
    ]
    # The keys' chunks are the non-empty partitions (da.concatenate drops empty arrays); output
    # partition j, of the input's length, takes the next chunk of the order, an empty one nothing.
    nonempty = [j for j, n in enumerate(lengths) if n]
    keys = da.concatenate([da.from_delayed(enc[j], (lengths[j], width), dtype=np.uint8) for j in nonempty])
    perm = argsort(keys, strategy=strategy)
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    out = [delayed(meta.iloc[:0]) for _ in lengths]
    for j, pj in zip(nonempty, perm.to_delayed(optimize_graph=False).ravel()):
        pieces = delayed(_split, pure=True)(pj, offsets, dask_key_name=(f"dsort-df-split-{tok}", j))
        taken = [delayed(_take, pure=True)(p, pieces, i, dask_key_name=(f"dsort-df-gather-{tok}", i, j)) for i, p in enumerate(parts)]
        out[j] = delayed(_assemble, pure=True)(meta, lengths[j], *taken, dask_key_name=(f"dsort-df-assemble-{tok}", j))
    return dd.from_delayed(out, meta=meta, verify_meta=False)


def _check_categories(df, by) -> None:
    """Categorical sort columns sort by their codes, so every partition must share one list of
    categories, known up front (dask's ``.cat.as_known()``)."""
    from dask.dataframe.utils import has_known_categories

    for c in by:
        if isinstance(df._meta[c].dtype, pd.CategoricalDtype) and not has_known_categories(df[c]):
            raise ValueError(f"column {c!r}: its categories are not known; sort by df[{c!r}].cat.as_known() (dask) instead")


def sort_values_external(
    df, by, *, ascending=True, na_position="last", widths=None, npartitions=None, local_directory=None, memory_limit="auto"
):
    """:func:`sort_values` in memory bounded by the partition size, not the frame's: each partition
    is sorted by its encoded keys into a run (its rows an Arrow IPC file under ``local_directory``,
    its keys in the run store, in memory up to ``memory_limit``), the exact cuts of every output
    partition come from the keys alone, and each output partition reads its slices of the runs and
    merges them (:mod:`dsort.external`), so ``sort_values_external(df, ...).to_parquet(path)`` never
    holds the frame. ``npartitions`` output partitions (default: the input's), balanced to within
    one row; the runs are removed once every output partition is made. String sort columns need one
    pass first for their widths (unless ``widths`` gives them)."""
    import functools

    import dask.dataframe as dd
    from dask.base import tokenize
    from dask.delayed import delayed

    from . import external
    from . import runs as R

    by, ascending = _normalize(by, ascending)
    _check_categories(df, by)
    meta = df._meta
    parts = df.to_delayed(optimize_graph=False)
    if widths is None:
        widths = max_string_widths(parts, string_columns(meta, by))
    encode = functools.partial(encode_keys, by=by, ascending=ascending, na_position=na_position, widths=widths)
    width = encode(meta.iloc[:0]).shape[1]  # also checks the columns' types, before any work
    from .array import run_memory

    budget = run_memory(memory_limit)
    tok = tokenize(df, by, ascending, na_position, widths, npartitions, "external")
    job = external.FrameJob(
        R.Layout(width, width), encode, int(npartitions or df.npartitions), 256, external.store_config(tok, width, local_directory, budget)
    )
    runs = [delayed(external.frame_run, pure=True)(job, i, p, dask_key_name=(f"dsort-run-{tok}", i)) for i, p in enumerate(parts)]
    cut = delayed(external.frame_cuts, pure=True)(job, *runs, dask_key_name=f"dsort-cuts-{tok}")
    out = [
        delayed(external.frame_merge, pure=True)(job, cut, t, meta, dask_key_name=(f"dsort-merge-{tok}", t)) for t in range(job.partitions)
    ]
    return dd.from_delayed(out, meta=meta, verify_meta=False)
