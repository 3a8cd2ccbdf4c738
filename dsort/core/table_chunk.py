"""Per-task functions of the columnar sort of Arrow tables (Parquet row groups): what one task does,
as :mod:`dsort.core.frame_chunk` is for pandas frames. No dask, no files.

Only the key columns are encoded (:class:`~dsort.core.frame_keys.KeySpec`: columns of numbers
from their Arrow buffers, others over a zero-copy pandas view of them) and sorted by the engine;
every column, of any Arrow type (lists, structs, maps, decimals, dictionaries, strings), moves by
Arrow's vectorized ``take``, never row by row.
A sorted part (:class:`Sorted`) holds its rows in key order and their keys; the plan, samples,
windows and exact cuts are the dataframe sort's (:mod:`dsort.core.frame_chunk`), which read a
part's keys alone. Each output then takes its slice of every part (zero-copy) and merges them by
their keys: stable, ties in part order.

The sort's own check that no row is lost or doubled: each row's hash (:func:`row_hashes`) is made
once, from the input's values as the row is sorted, and carried with the row through the slices
and merges; an input's checksum sums the hashes of its rows, an output's the hashes its rows
carry, so a row that the cuts or merges drop or repeat changes the sum; a sample of each output's
rows is hashed again from its values (:func:`_sampled`), so values taken apart from their rows
change it too. Hashing every output again cost as much as hashing the input, and the hashes' many
short NumPy calls held 16 threads waiting for the GIL (BENCHMARKS.md section 10). The files written
are checked value by value against the same checksum by ``dsort check`` (:func:`summarize` without
carried hashes hashes the values read).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import engine as engines
from . import arrow_hash, frame_chunk as FC, valsort
from .frame_keys import KeySpec, nan_high, write_number_keys


@dataclass
class Sorted:
    """One table sorted by its keys: its rows (an Arrow table) and their keys, in the same order;
    the keys' string widths and kinds (:meth:`~dsort.core.frame_keys.KeySpec.encode_part`); the
    rows' hashes where the sort made them (:func:`sort_part`)."""

    table: object
    keys: np.ndarray
    widths: tuple
    kinds: tuple
    hashes: np.ndarray | None = None  # the rows' hashes (:func:`row_hashes`), in the same order


def key_frame(table, by):
    """The columns ``by`` of an Arrow table as a pandas frame of Arrow-backed columns (no copy),
    as :class:`~dsort.core.frame_keys.KeySpec` reads them."""
    import pandas as pd

    return pd.DataFrame(
        {c: pd.Series(pd.arrays.ArrowExtensionArray(table[c]), copy=False) for c in by}, copy=False
    )


def spec_of(schema, by, ascending, na_position, no_nulls: bool = False) -> KeySpec:
    """The key of sorting tables of ``schema`` by ``by``; raises ``TypeError`` on a column whose
    type it does not order, before any data is read. Columns of integers, floats or booleans
    alone: made without pandas (:meth:`KeySpec.of_numbers`), their keys written from Arrow's
    buffers (:func:`number_keys`). ``no_nulls``: the tables hold no null in the key columns, so
    one such column is keyed by words (:meth:`KeySpec.words`), which sort as numbers."""
    if all(numbers(schema.field(c).type) for c in by):
        dtypes = [number_dtype(schema.field(c).type) for c in by]
        return KeySpec.of_numbers(
            by, dtypes, list(ascending), na_position, word=no_nulls and len(by) == 1
        )
    return KeySpec.of(key_frame(schema.empty_table(), by), list(by), list(ascending), na_position)


def number_keys(table, spec: KeySpec) -> np.ndarray:
    """The byte-row keys of a table whose ``spec.by`` columns are all numbers (:func:`numbers`),
    written from their Arrow buffers (:func:`~dsort.core.frame_keys.write_number_keys`): the bytes
    :meth:`KeySpec.encode` gives the same columns through pandas (nulls missing, a float's NaN a
    value beside them, as pyarrow orders it), without pandas or a copy of the columns."""
    out = np.empty((len(table), spec.width(())), np.uint8)
    na_first = spec.na_position == "first"
    columns = [_values(table, c) for c in spec.by]
    missing = [_nulls(table.column(c)) for c in spec.by]
    high = [nan_high(not a, na_first) for a in spec.ascending]
    write_number_keys(spec, columns, out, np, missing=missing, nan_high=high)
    return out


def of_numbers(table, spec: KeySpec) -> bool:
    """Whether ``table``'s key columns are all numbers (:func:`numbers`): their keys are written
    from Arrow (:func:`number_keys`)."""
    return all(numbers(table.schema.field(c).type) for c in spec.by)


def number_dtype(typ) -> np.dtype:
    """The NumPy dtype of an Arrow type of numbers (:func:`numbers`), read from the type: pyarrow's
    ``to_pandas_dtype`` imports pandas in some versions (the device machine's)."""
    import pyarrow.types as t

    if t.is_boolean(typ):
        return np.dtype(bool)
    kind = "f" if t.is_floating(typ) else "i" if t.is_signed_integer(typ) else "u"
    return np.dtype(f"{kind}{typ.bit_width // 8}")


def numbers(typ) -> bool:
    """Whether an Arrow type is of integers, floats (32 or 64 bits) or booleans: ordered, and
    keyed by words where no value is missing."""
    import pyarrow.types as t

    return t.is_integer(typ) or t.is_boolean(typ) or t.is_float32(typ) or t.is_float64(typ)


def take(table, order):
    """``table``'s rows at ``order`` (positions), one column at a time by Arrow's ``take`` (a
    column of several chunks joined first: Arrow's take of chunked columns joins them once per
    call anyway)."""
    import pyarrow as pa

    order = np.ascontiguousarray(order, np.int64)
    # no copy (pa.array of NumPy imports pandas)
    idx = pa.Array.from_buffers(pa.int64(), len(order), [None, pa.py_buffer(order)])
    cols = [c.combine_chunks() if c.num_chunks != 1 else c.chunk(0) for c in table.columns]
    return pa.Table.from_arrays([_take_column(c, idx) for c in cols], schema=table.schema)


def _take_column(col, idx):
    """Arrow's ``take`` of one column; string and binary views, which it takes no rows of, as
    large strings and binaries and back; any other type it lacks a kernel for, value by value."""
    import pyarrow as pa

    try:
        return col.take(idx)
    except pa.ArrowNotImplementedError:
        wide = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}.get(
            col.type
        )
        if wide is not None:
            return col.cast(wide).take(idx).cast(col.type)
        values = col.to_pylist()
        return pa.array([values[i] for i in idx.to_pylist()], col.type)


def sort_part(table, spec: KeySpec, device=None, hashed: bool = False, block=None) -> Sorted:
    """A table sorted stably by its keys (their order on the worker's GPU with ``device="gpu"``:
    the keys go there, the order comes back; the rows stay on the host). Keyed by words where the
    spec says so (:attr:`KeySpec.word`: the caller knows the one key column holds no nulls) and
    the sort is on the host, else by byte rows. ``hashed``: with its rows' hashes, made from the
    table's values ``block`` rows at a time (:func:`row_hashes`) and put in the same order
    (:func:`tally_sorted`, the module docstring)."""
    keys, widths, kinds = table_keys(table, spec, words=device is None)
    order = FC._argsort(keys, device)
    hashes = row_hashes(table, block)[order] if hashed else None
    return Sorted(take(table, order), engines.take_rows(keys, order), widths, kinds, hashes)


def tally_sorted(part: Sorted) -> valsort.Summary:
    """A sorted table's count, checksum (the sum of the hashes its rows carry) and bytes: its
    input's summary (:func:`tally`), without hashing its values again."""
    return valsort.Summary(
        records=len(part.table),
        checksum=valsort.exact_sum(part.hashes),
        bytes=int(part.table.nbytes),
    )


def table_keys(table, spec: KeySpec, words: bool = True) -> tuple:
    """``(keys, widths, kinds)`` of a table, as :meth:`KeySpec.encode_part` gives them: words
    where the spec keys by words and ``words`` (a sort on the host), byte rows written from Arrow
    where every key column holds numbers (:func:`number_keys`), else byte rows encoded through a
    pandas view of the key columns."""
    if spec.word and words:
        return spec.words_of(_values(table, spec.by[0])), (0,), ()
    if of_numbers(table, spec):
        return number_keys(table, spec), (0,) * len(spec.by), ((),) * len(spec.by)
    return spec.encode_part(key_frame(table, spec.by))


def _nulls(col) -> np.ndarray | None:
    """Where an Arrow column (chunked) holds nulls, from its validity bitmaps; None where it holds
    none."""
    if not col.null_count:
        return None
    parts = []
    for a in col.chunks:
        n, at = len(a), a.offset
        valid = a.buffers()[0]
        parts.append(np.zeros(n, bool) if valid is None else ~_bits(valid, at, n))
    return np.concatenate(parts) if len(parts) != 1 else parts[0]


def _bits(buffer, at: int, n: int) -> np.ndarray:
    """Bits ``at .. at + n`` of an Arrow bitmap (least significant bit first) as booleans; only
    the bytes that hold them unpacked."""
    b = np.frombuffer(buffer, np.uint8)[at // 8 : (at + n + 7) // 8]
    return np.unpackbits(b, bitorder="little")[at % 8 : at % 8 + n].view(bool)


def _values(table, name) -> np.ndarray:
    """Column ``name`` of a table (integers, floats or booleans, no null: :func:`numbers`) as NumPy
    values, read from its buffers (Arrow's ``to_numpy`` imports pandas); no copy where the column
    is one chunk of numbers."""
    col = table.column(name)
    dtype = number_dtype(col.type)
    parts = []
    for a in col.chunks:
        n, at = len(a), a.offset
        if not n:
            continue
        if dtype.kind == "b":  # one bit a value
            parts.append(_bits(a.buffers()[1], at, n))
        else:
            parts.append(np.frombuffer(a.buffers()[1], dtype, count=n, offset=at * dtype.itemsize))
    return parts[0] if len(parts) == 1 else np.concatenate(parts) if parts else np.empty(0, dtype)


def piece(spec: KeySpec, part: Sorted, p: FC.Plan, cut, t: int, q: int):
    """Output ``t``'s slice of part ``q``: ``(rows, keys at the common widths, the hashes the
    rows carry or None)``, the rows a view."""
    a, b = int(cut[t, q]), int(cut[t + 1, q])
    hashes = None if part.hashes is None else part.hashes[a:b]
    return part.table.slice(a, b - a), FC.part_keys(spec, part, p, a, b), hashes


def merge(device, *pieces) -> tuple:
    """One output: its slices of every part (:func:`piece`'s, in part order) merged by their
    keys; ``(table, the hashes its rows carry or None)``."""
    import pyarrow as pa

    full = [x for x in pieces if len(x[0])]
    if not full:
        return pieces[0][0], pieces[0][2]
    if len(full) == 1:
        return full[0][0], full[0][2]
    order = FC.merge_order([k for _, k, _ in full], device)
    hashes = [h for _, _, h in full]
    hashes = None if any(h is None for h in hashes) else np.concatenate(hashes)[order]
    return take(pa.concat_tables([t for t, _, _ in full]), order), hashes


def tally(table) -> valsort.Summary:
    """A table's count, checksum (:func:`row_hashes`) and bytes."""
    return valsort.Summary(
        records=len(table), checksum=valsort.exact_sum(row_hashes(table)), bytes=int(table.nbytes)
    )


def row_hashes(table, block=None) -> np.ndarray:
    """One 64-bit hash a row of ``table``, of its values alone (:mod:`dsort.core.arrow_hash`),
    ``block`` rows at a time (:func:`~dsort.core.arrow_hash.block_rows`)."""
    return arrow_hash.row_hashes(table.columns, len(table), block)


def summarize(table, spec: KeySpec, hashes=None) -> valsort.Summary:
    """A sorted table's summary: its order checked on keys made again from its own columns (byte
    rows at its own string widths, whatever the sort keyed by; words where the spec keys by
    words: :func:`table_keys`), its checksum (of the ``hashes`` its rows carry where given, the
    module docstring; else of its values) and bytes, and its first and last rows' keys: words
    or byte rows of numbers, which compare across tables as they are, else its key columns (small
    pandas frames, which :func:`ends_comparable` encodes at one width for the checks across
    tables)."""
    keys, _, _ = table_keys(table, spec)
    hashes = row_hashes(table) if hashes is None else _sampled(table, hashes)
    s = valsort.summarize(keys, checksums=hashes, nbytes=int(table.nbytes))
    if spec.word or of_numbers(table, spec):
        return s
    if len(table):
        s.first_key, s.last_key = (
            key_frame(table.slice(0, 1), spec.by),
            key_frame(table.slice(len(table) - 1, 1), spec.by),
        )
    return s


SAMPLE_ROWS = 1024  # rows of an output whose values are hashed again beside their carried hashes


def _sampled(table, hashes) -> np.ndarray:
    """The hashes ``table``'s rows carry, those of about :data:`SAMPLE_ROWS` of its rows (every
    k-th and the last) made again from their values: values that went astray from their rows' hashes
    (a column taken in another order) change the output's checksum. A value changed in a row that
    is not sampled is found by ``dsort check`` alone, which hashes every value read back."""
    n = len(table)
    if not n:
        return hashes
    at = np.arange(0, n, max(1, n // SAMPLE_ROWS), dtype=np.int64)
    if at[-1] != n - 1:
        at = np.append(at, n - 1)
    out = np.array(hashes, np.uint64)  # a copy: the carried ones may be a piece's, shared
    out[at] = row_hashes(take(table, at))
    return out


def ends_comparable(summaries, spec: KeySpec) -> list:
    """``summaries`` of consecutive tables (:func:`summarize`) with their first and last rows
    encoded as keys at one string width (the widest of those rows), so
    :func:`dsort.core.valsort.combine` can compare each table's last key with the next one's
    first."""
    import pandas as pd

    ends = [s for s in summaries if s.records and s.first_key is not None]
    if not ends:
        return list(summaries)
    keys, _ = spec.encode(
        pd.concat([x for s in ends for x in (s.first_key, s.last_key)], ignore_index=True)
    )
    for i, s in enumerate(ends):
        s.first_key, s.last_key = keys[2 * i : 2 * i + 1], keys[2 * i + 1 : 2 * i + 2]
    return list(summaries)
