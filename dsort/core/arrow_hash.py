"""64-bit hashes of Arrow values, one per row, computed column by column in NumPy: no value is
made a Python object, so a list, struct, decimal or string column costs about what its bytes do.

A row's hash depends on its value alone: not on where it stands, how the array is sliced or
chunked, or what the other rows hold. Equal values hash equal; nulls hash to one constant. The
hash is a checksum's, not a cryptographic one: a sort's output must hold the input's rows, and the
sum of the rows' hashes (:func:`dsort.core.valsort.exact_sum`) differs where a row is lost,
doubled or changed.

- fixed-width values (integers, floats, booleans, temporals, decimals, fixed-size binary): their
  bits, one word as it is, several words folded and mixed (SplitMix64's finalizer);
- strings and binaries: values of up to 16 bytes as two zero-padded words, longer ones a
  polynomial over their 8-byte words (each word mixed, times a power of an odd constant by its
  place, summed), folded with the length and mixed;
- lists, large lists, maps and fixed-size lists: a polynomial over their elements' hashes, then
  the length;
- structs: their fields' hashes folded in field order; dictionaries: their values';
- any other type (unions, run-end encoded arrays): the ``repr`` of each value (row by row).

A row's hash (:func:`row_hashes`) folds its columns' in order and mixes the result once: a
column's hash need not be mixed, only tell its values apart.
"""

from __future__ import annotations

import numpy as np

# The hashes' definition: another version makes other checksums of the same values (a manifest
# written with another one is not held to its checksum). 2: strings over 16 bytes hashed by word.
VERSION = 2
NULL = np.uint64(0x9E3779B97F4A7C15)
_K = np.uint64(0xFF51AFD7ED558CCD)  # odd: the polynomial's base and the fold's multiplier
_LIST = np.uint64(0xC2B2AE3D27D4EB4F)
_BYTES = np.uint64(0x165667B19E3779F9)
_STRUCT = np.uint64(0x27D4EB2F165667C5)
_ROW = np.uint64(0x85EBCA77C2B2AE63)
BLOCK_ROWS = 1 << 16  # rows hashed at once by row_hashes: a block's words fit the CPU's cache


def block_rows(threads: int | None) -> int:
    """The rows :func:`row_hashes` hashes at once where ``threads`` threads hash beside each other
    in one process: :data:`BLOCK_ROWS`, times ``threads // 4`` up to 4 times. A block costs a
    hundred short NumPy calls, each giving the GIL up and waiting for it again; on 16 cores the
    threads waited there six times the hashes' CPU time, and blocks 4 times as big made a whole
    sort 1.25x faster (BENCHMARKS.md section 10). Alone or on a few threads the cache wins: 4
    threads were 1.08x faster with the small blocks."""
    return BLOCK_ROWS * min(4, max(1, int(threads or 1) // 4))


_CHUNK_BYTES = 1 << 17  # bytes hashed at once: their words and a few arrays of them fit the cache


def mix(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """SplitMix64's finalizer of every uint64 of ``x``: into ``out`` (``x`` itself may be given),
    else a new array."""
    x = np.asarray(x, np.uint64)
    out = x.copy() if out is None else (out if out is x else np.copyto(out, x) or out)
    t = np.empty_like(out)
    with np.errstate(over="ignore"):
        np.right_shift(out, np.uint64(30), out=t)
        out ^= t
        out *= np.uint64(0xBF58476D1CE4E5B9)
        np.right_shift(out, np.uint64(27), out=t)
        out ^= t
        out *= np.uint64(0x94D049BB133111EB)
        np.right_shift(out, np.uint64(31), out=t)
        out ^= t
    return out


def _sums(x: np.ndarray) -> np.ndarray:
    """``[0, x0, x0 + x1, ...]`` (uint64, wrapping): segment sums are differences of two."""
    out = np.empty(len(x) + 1, np.uint64)
    out[0] = 0
    with np.errstate(over="ignore"):
        np.cumsum(x, dtype=np.uint64, out=out[1:])
    return out


def _places(offsets: np.ndarray) -> np.ndarray:
    """Each element's place in its list (or byte's in its value), for lists bounded by
    ``offsets`` (from 0), as uint64: its position less its list's first, that first found by a
    running maximum of the lists' firsts set at their places. ``np.repeat`` of the firsts holds the
    GIL throughout (milliseconds a row group of lists: every other thread stood still); these
    calls give it up."""
    total = int(offsets[-1])
    # a list's first at its place, 0 elsewhere; empty lists share the next one's place and value,
    # those at the end write to the slot past the last
    first = np.zeros(total + 1, np.int64)
    first[offsets[:-1]] = offsets[:-1]
    first = np.maximum.accumulate(first[:total])
    place = np.arange(total, dtype=np.int64)
    place -= first
    return place.view(np.uint64)


def hashes(array) -> np.ndarray:
    """One uint64 a row of ``array`` (a pyarrow Array or ChunkedArray, or anything ``pa.array``
    takes)."""
    import pyarrow as pa

    if isinstance(array, pa.ChunkedArray):
        parts = [hashes(c) for c in array.chunks]
        return np.concatenate(parts) if parts else np.empty(0, np.uint64)
    if not isinstance(array, pa.Array):
        array = pa.array(array)
    h = _values(array)
    if array.null_count:
        h[~_bools(array.is_valid())] = NULL
    return h


def row_hashes(columns, rows: int, block: int | None = None) -> np.ndarray:
    """One uint64 a row of the columns ``columns`` (each as :func:`hashes` takes it, all
    ``rows`` long): their values folded in column order (each times a power of an odd constant),
    mixed once. ``block`` (:data:`BLOCK_ROWS`; :func:`block_rows`) rows at a time, so that the
    dozen passes over a block's words stay in the CPU's cache (over whole columns each pass went
    to memory: several times slower, BENCHMARKS.md section 10)."""
    import pyarrow as pa

    columns = [c if isinstance(c, (pa.Array, pa.ChunkedArray)) else pa.array(c) for c in columns]
    out = np.empty(rows, np.uint64)
    block = int(block or BLOCK_ROWS)
    for at in range(0, rows, block):
        n = min(block, rows - at)
        acc = out[at : at + n]
        acc[...] = _ROW
        with np.errstate(over="ignore"):
            for c in columns:
                acc *= _K
                acc += hashes(c.slice(at, n) if n != rows else c)
        mix(acc, out=acc)
    return out


def _values(a) -> np.ndarray:
    """Hashes of every row of ``a``, nulls included (as whatever their slots hold)."""
    import pyarrow as pa
    import pyarrow.types as t

    typ = a.type
    n = len(a)
    if n == 0:
        return np.empty(0, np.uint64)
    if t.is_null(typ):
        return np.full(n, NULL)
    if isinstance(typ, pa.ExtensionType):
        return _values(a.storage)
    if t.is_dictionary(typ):
        # a null index: the last (the dictionary may be empty)
        values = np.append(hashes(a.dictionary), NULL)
        return values[_ints(a.indices.cast(pa.int64()).fill_null(len(a.dictionary)))]
    if t.is_boolean(typ):
        bits = np.unpackbits(np.frombuffer(a.buffers()[1], np.uint8), bitorder="little")[
            a.offset : a.offset + n
        ]
        return bits.astype(np.uint64) + _K
    if t.is_string(typ) or t.is_binary(typ) or t.is_large_string(typ) or t.is_large_binary(typ):
        return _bytes(a)
    if t.is_string_view(typ) or t.is_binary_view(typ):
        return _bytes(a.cast(pa.large_string() if t.is_string_view(typ) else pa.large_binary()))
    if t.is_list(typ) or t.is_large_list(typ) or t.is_map(typ):
        offsets = _ints(a.offsets).astype(np.int64)
        child = _child(a)
        return _lists(
            hashes(child.slice(offsets[0], offsets[-1] - offsets[0])), offsets - offsets[0]
        )
    if t.is_fixed_size_list(typ):
        k = typ.list_size
        child = a.values.slice(a.offset * k, n * k)
        return _lists(hashes(child), np.arange(n + 1, dtype=np.int64) * k)
    if t.is_struct(typ):
        return _fold(np.full(n, _STRUCT), [hashes(f) for f in a.flatten()], mixed=False)
    width = _fixed_width(typ)
    if width:
        raw = np.frombuffer(a.buffers()[1], np.uint8)[
            a.offset * width : (a.offset + n) * width
        ].reshape(n, width)
        return _words(raw)
    import pandas as pd

    return pd.util.hash_array(np.array([repr(v) for v in a.to_pylist()], object)).astype(np.uint64)


def _ints(a) -> np.ndarray:
    """An integer array's values (no nulls) read from its buffer, no copy: Arrow's ``to_numpy``
    imports pandas, a tenth of a short sort's time."""
    dtype = np.dtype(f"<{'i' if a.type.id in _signed_ids() else 'u'}{a.type.bit_width // 8}")
    return np.frombuffer(a.buffers()[1], dtype, count=len(a), offset=a.offset * dtype.itemsize)


def _bools(a) -> np.ndarray:
    """A boolean array's values (no nulls) read from its bitmap, as NumPy booleans."""
    n, at = len(a), a.offset
    b = np.frombuffer(a.buffers()[1], np.uint8)[at // 8 : (at + n + 7) // 8]
    return np.unpackbits(b, bitorder="little")[at % 8 : at % 8 + n].view(bool)


def _signed_ids() -> set:
    import pyarrow as pa

    return {pa.int8().id, pa.int16().id, pa.int32().id, pa.int64().id}


def _child(a):
    """The flattened values of a list or map array (all of them: the slice is taken by offsets)."""
    import pyarrow as pa

    if isinstance(a, pa.MapArray):
        return pa.StructArray.from_arrays(
            [a.keys, a.items], fields=[a.type.key_field, a.type.item_field]
        )
    return a.values


def _fixed_width(typ) -> int:
    """Bytes a value of a fixed-width type takes (0 for any other type or a bit-packed one)."""
    try:
        bits = typ.bit_width
    except ValueError:
        return 0
    return bits // 8 if bits % 8 == 0 else 0


def _fold(acc: np.ndarray, parts, mixed: bool = True) -> np.ndarray:
    """``acc`` with each of ``parts`` (uint64 arrays) folded in, in order (times an odd constant,
    plus the part), mixed each time where ``mixed`` (the words of one value: a linear fold of
    several words would tie values whose words differ in step)."""
    with np.errstate(over="ignore"):
        for h in parts:
            acc *= _K
            acc += h
            if mixed:
                mix(acc, out=acc)
    return acc


def _words(raw: np.ndarray) -> np.ndarray:
    """Hashes of ``(n, width)`` uint8 rows: their bytes as uint64 words, folded."""
    n, width = raw.shape
    if width in (1, 2, 4, 8):  # one word: the value itself (the row's hash mixes it)
        return np.ascontiguousarray(raw).view(f"<u{width}").reshape(n).astype(np.uint64)
    padded = np.zeros((n, -(-width // 8) * 8), np.uint8)
    padded[:, :width] = raw
    words = padded.view("<u8")
    return _fold(mix(words[:, 0] ^ _BYTES), [words[:, j] for j in range(1, words.shape[1])])


def _powers(n: int) -> np.ndarray:
    """``_K ** i`` for ``i < n`` (modulo 2**64)."""
    p = np.full(max(n, 1), _K)
    p[0] = 1
    with np.errstate(over="ignore"):
        return np.cumprod(p, dtype=np.uint64)


def _bytes(a) -> np.ndarray:
    """Hashes of a string or binary array's values, each mixed with its length: values of up to
    16 bytes as two words (zero-padded), folded; longer ones a polynomial over their 8-byte words
    (:func:`_polynomial`)."""
    n = len(a)
    big = a.type.id in (_large_ids())
    offsets = np.frombuffer(a.buffers()[1], np.int64 if big else np.int32)[
        a.offset : a.offset + n + 1
    ].astype(np.int64)
    data = a.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    out = lengths.view(np.uint64) + _BYTES
    short = lengths <= 16
    if short.all():
        out = _fold(out, _padded_words(data, offsets, np.arange(n)), mixed=False)
    else:
        rows = np.flatnonzero(short)
        out[rows] = _fold(out[rows], _padded_words(data, offsets, rows), mixed=False)
        rows = np.flatnonzero(~short)
        out[rows] = _fold(out[rows], [_polynomial(data, offsets, rows)], mixed=False)
    return mix(out, out=out)


# the bytes of a word that a value of k bytes fills
_LOW = np.array([(1 << (8 * min(k, 8))) - 1 for k in range(17)], np.uint64)
_HIGH = np.array([(1 << (8 * max(k - 8, 0))) - 1 for k in range(17)], np.uint64)


def _padded_words(data, offsets, rows) -> list:
    """Values ``rows`` (each of at most 16 bytes) zero-padded to 16 bytes: two uint64 words,
    16 bytes read at each value's start (one gather), the bytes past its end cleared."""
    # the bytes of this array (a slice may hold fewer than its buffer)
    base, end = int(offsets[0]), int(offsets[-1])
    # 16 bytes past the last: a read there stays inside
    padded = np.empty(end - base + 16, np.uint8)
    padded[: end - base] = data[base:end]
    padded[end - base :] = 0
    at_any_byte = np.ndarray((end - base + 1,), dtype="V16", buffer=padded, strides=(1,))
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    words = at_any_byte[starts - base].view("<u8").reshape(-1, 2)
    low, high = words[:, 0], words[:, 1]
    low &= _LOW[lengths]
    high &= _HIGH[lengths]
    return [low, high]


def _polynomial(data, offsets, rows) -> np.ndarray:
    """A polynomial over the 8-byte words of each of values ``rows`` (little-endian, the last
    zero-padded; each word plus one, mixed, times a power of an odd constant by its place,
    summed), in blocks of about :data:`_CHUNK_BYTES` bytes (at least one value), each block's
    words read, weighed and summed while they are in the CPU's cache."""
    starts = offsets[rows]
    lengths = offsets[rows + 1] - starts
    words = (lengths + 7) // 8
    bounds = np.zeros(len(rows) + 1, np.int64)
    np.cumsum(words, out=bounds[1:])
    out = np.empty(len(rows), np.uint64)
    powers = _powers(int(words.max()) if len(rows) else 0)
    r = 0
    while r < len(rows):
        e = min(
            max(int(np.searchsorted(bounds, bounds[r] + _CHUNK_BYTES // 8, "right")) - 1, r + 1),
            len(rows),
        )
        # the block's bytes, 8 zero bytes past them: a word read at any of them stays inside
        base, end = int(starts[r]), int(offsets[rows[e - 1] + 1])
        padded = np.zeros(end - base + 8, np.uint8)
        padded[: end - base] = data[base:end]
        at_any_byte = np.ndarray((end - base + 1,), dtype="V8", buffer=padded, strides=(1,))
        local = bounds[r : e + 1] - bounds[r]
        place = _places(local).view(np.int64)
        at = np.repeat(starts[r:e] - base, words[r:e]) + 8 * place
        d = at_any_byte[at].view("<u8")
        last = local[1:] - 1  # each value's last word: its bytes past the value's end cleared
        d[last] &= _LOW[lengths[r:e] - 8 * (words[r:e] - 1)]
        d += np.uint64(1)
        # mixed first: a word's top bits times a power of the odd constant reach no other bits
        # (a top bit flipped in any word changed the sum alike: two values a bit apart in two
        # words hashed equal)
        mix(d, out=d)
        with np.errstate(over="ignore"):
            d *= powers[place]
            sums = _sums(d)
            out[r:e] = sums[local[1:]] - sums[local[:-1]]
        r = e
    return out


def _large_ids() -> tuple:
    import pyarrow as pa

    return (pa.large_string().id, pa.large_binary().id)


def _lists(child: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Hashes of lists whose elements' hashes are ``child`` and whose bounds in it are
    ``offsets`` (from 0): a polynomial over the elements (each times a power of an odd constant
    by its place), then the length."""
    lengths = np.diff(offsets)
    powers = _powers(int(lengths.max()) + 1 if len(lengths) else 1)
    with np.errstate(over="ignore"):
        each = powers[_places(offsets).view(np.int64) + 1]
        each *= child
        sums = _sums(each)
        per_row = sums[offsets[1:]] - sums[offsets[:-1]]
        per_row *= _K
        per_row += lengths.view(np.uint64) + _LIST
    return per_row
