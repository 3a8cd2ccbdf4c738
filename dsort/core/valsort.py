"""Verification of sorted data, as the Sort Benchmark's ``valsort`` does it, one chunk at a time.

A *summary* of a sequence of records holds its record count, its checksum, how many records are out
of order, how many keys equal the previous key, and its first and last key. Summaries of consecutive
chunks combine exactly (:func:`combine`), so a file larger than memory is checked chunk by chunk,
in parallel, and the result equals the summary of the whole file.

* **checksum** (``valsort``'s): the sum over records of the CRC-32 (zlib's) of each record's bytes.
  A sum does not depend on the order, so a sort leaves it unchanged, and a lost, duplicated or
  changed record changes it (barring a CRC collision). For Parquet rows, whose width varies, the
  record hash is pandas' ``hash_pandas_object`` of the row instead (see :mod:`dsort.io.parquet`).
* **order**: byte keys compare as unsigned bytes (``memcmp``); numbers by value with NaN last (both
  directions), as :mod:`dsort.engine.keys` defines. Written here on purpose rather than taken from
  the engines: the check must not trust the code whose output it verifies.
* **duplicates**: records whose key equals the previous record's key (in a sorted file: the number
  of records minus the number of distinct keys).

Every function here takes NumPy or CuPy arrays (the array module is taken from the input), so the
sort computes its checksums on the device that holds the data: on a GPU one pass of dsort's
check kernels (``kernels/kernel_check.cu``, apart from the sort's code) computes the checksum and
the order counts at once, with the element-wise path below for what they do not take.
"""

from __future__ import annotations

import functools
import zlib
from dataclasses import dataclass, field

import numpy as np

from ..engine import crc
from ..engine.device import from_host, is_device_array, to_host, xp_of


@functools.lru_cache(maxsize=8)
def _crc_tables(width: int):
    """Tables that make the CRC-32 of a ``width``-byte message an XOR of table entries (for the
    GPU).

    CRC-32 is affine over GF(2) for a fixed length: ``crc(m) = crc(0) ^ XOR_i L_i[m_i]`` with
    ``L_i[b] = crc(b at position i, zeros elsewhere) ^ crc(0)``. Pairs of bytes share one
    65536-entry table (half the lookups); an odd last byte gets its own 256-entry table. Built with
    zlib itself.
    """
    zero = zlib.crc32(bytes(width))
    single = np.empty((width, 256), np.uint32)
    msg = bytearray(width)
    for i in range(width):
        for b in range(256):
            msg[i] = b
            single[i, b] = zlib.crc32(msg) ^ zero
        msg[i] = 0
    pairs = width // 2
    # a little-endian uint16 holds byte 2i in its low and byte 2i+1 in its high half
    double = (
        single[0 : 2 * pairs : 2][:, None, :] ^ single[1 : 2 * pairs : 2][:, :, None]
    ).reshape(pairs, 65536)
    last = single[width - 1] if width % 2 else None
    return np.uint32(zero), double, last


@functools.lru_cache(maxsize=8)
def _device_tables(width: int, device: int):
    zero, double, last = _crc_tables(width)
    return zero, from_host(double), None if last is None else from_host(last)


def crc32_rows(rows):
    """CRC-32 of each row of a 2-D ``uint8`` array (one record per row), as ``zlib.crc32`` gives it.

    On the CPU the compiled loop of :mod:`dsort.engine.crc`; on a GPU ``width / 2`` vectorized
    table lookups (one gather a pair of byte columns over all records).
    """
    xp = xp_of(rows)
    if rows.ndim != 2 or rows.dtype != np.uint8:
        raise ValueError(
            f"records must be a 2-D uint8 array, got {rows.dtype} of shape {rows.shape}"
        )
    if xp is np:
        return crc.crc32_rows(rows)
    n, width = rows.shape
    zero, double, last = _device_tables(width, xp.cuda.Device().id)
    out = xp.full(n, zero, dtype=xp.uint32)
    if width == 0 or n == 0:
        return out
    pairs = width // 2
    t = xp.empty(n, xp.uint32)
    if pairs:
        cols = xp.ascontiguousarray(xp.ascontiguousarray(rows[:, : 2 * pairs]).view(xp.uint16).T)
        for i in range(pairs):
            xp.take(double[i], cols[i], out=t)
            out ^= t
    if last is not None:
        xp.take(last, xp.ascontiguousarray(rows[:, width - 1]), out=t)
        out ^= t
    return out


def as_rows(x):
    """Any C-contiguous array as 2-D ``uint8`` rows: one row of bytes per element along axis 0."""
    xp = xp_of(x)
    x = xp.ascontiguousarray(x)
    n = x.shape[0] if x.ndim else 1
    return x.reshape(n, -1).view(xp.uint8) if x.size else xp.zeros((n, 0), xp.uint8)


# -- order ---------------------------------------------------------------------------------------


def _pair_order(a, b, descending: bool):
    """For consecutive keys ``a[i], b[i]`` (b follows a): boolean arrays (out of order, equal)."""
    xp = xp_of(a)
    if a.ndim == 2 and xp is np:  # byte rows: NumPy compares equal-width S items as memcmp
        sa = np.ascontiguousarray(a).view(f"S{a.shape[1]}").reshape(-1)
        sb = np.ascontiguousarray(b).view(f"S{b.shape[1]}").reshape(-1)
        return ((sb > sa) if descending else (sb < sa)), sa == sb
    if a.ndim == 2:  # byte rows on a GPU: compared as memcmp, eight bytes at a time
        wrong = xp.zeros(len(a), dtype=bool)
        equal = xp.ones(len(a), dtype=bool)
        for wa, wb in zip(_words(a), _words(b)):
            wrong |= equal & ((wb > wa) if descending else (wb < wa))
            equal &= wa == wb
        return wrong, equal
    if a.dtype.kind == "f":
        na, nb = xp.isnan(a), xp.isnan(b)
        wrong = ((b > a) if descending else (b < a)) | (na & ~nb)  # NaN last in both directions
        return wrong, (a == b) | (na & nb)
    if a.dtype == np.bool_:
        a, b = a.astype(xp.uint8), b.astype(xp.uint8)
    return ((b > a) if descending else (b < a)), a == b


def _words(rows):
    """Byte rows ``(n, w)`` as ``ceil(w / 8)`` uint64 arrays, most significant first, whose
    lexicographic order is the rows' ``memcmp`` order (big-endian words, zero padded). Plain
    element-wise arithmetic: the same on NumPy and CuPy, no gathers."""
    xp = xp_of(rows)
    n, w = rows.shape
    padded = xp.zeros((n, -(-w // 8) * 8), dtype=xp.uint8)
    padded[:, :w] = rows
    x = padded.view(xp.uint64)  # little-endian words: swap their bytes
    for shift, mask in ((8, 0x00FF00FF00FF00FF), (16, 0x0000FFFF0000FFFF)):
        m, sh = xp.uint64(mask), xp.uint64(shift)
        x = ((x & m) << sh) | ((x >> sh) & m)
    x = (x << xp.uint64(32)) | (x >> xp.uint64(32))
    return [x[:, j] for j in range(x.shape[1])]


@dataclass
class Summary:
    """What ``valsort`` reports about a sequence of records (see the module docstring)."""

    records: int = 0
    checksum: int = 0
    unordered: int = 0  # records that come before their predecessor's key
    duplicates: int = 0  # records whose key equals their predecessor's
    first_unordered: int | None = None  # index of the first such record
    first_key: object = field(default=None, repr=False)
    last_key: object = field(default=None, repr=False)
    bytes: int = 0
    # what else a check found wrong, a line each (a dsort output against its manifest: parts or
    # records missing): a failure as records out of order are
    problems: list = field(default_factory=list, repr=False)

    @property
    def sorted(self) -> bool:
        return self.unordered == 0

    def describe(self) -> str:
        return f"{self.records:,} records, checksum {self.checksum:x}"


def summarize(
    keys,
    rows=None,
    *,
    descending: bool = False,
    checksums=None,
    nbytes: int | None = None,
    with_checksum: bool = True,
) -> Summary:
    """Summary of one chunk: ``keys`` (1-D numbers or 2-D byte rows) and the records' bytes
    ``rows``.

    ``rows`` defaults to the keys' own bytes (a ``.npy`` array: the record is the element). Pass
    ``checksums`` (one uint32/uint64 hash per record) instead of ``rows`` for records that are not
    fixed-width bytes. ``with_checksum`` False: no checksum (0; the caller sums it elsewhere), the
    order only. Returns host values only, whatever device ``keys`` is on.
    """
    xp = xp_of(keys)
    n = len(keys)
    if not with_checksum:
        rows = as_rows(keys) if rows is None else rows
        nbytes = rows.size if nbytes is None else nbytes
        checksums = np.zeros(0, np.uint32)
    if checksums is None:
        rows = as_rows(keys) if rows is None else rows
        nbytes = rows.size if nbytes is None else nbytes
        if xp is not np and is_device_array(rows):
            from ..engine import _checks

            done = _checks.summary(keys, rows, descending)
            if done is not None:
                total, wrong, equal, first = done
                s = Summary(n, total, wrong, equal, first, bytes=int(nbytes or 0))
                if n:
                    s.first_key, s.last_key = _host(keys[:1]), _host(keys[-1:])
                return s
        checksums = crc32_rows(rows)
    s = Summary(records=n, checksum=exact_sum(checksums), bytes=int(nbytes or 0))
    if n:
        wrong, equal = _pair_order(keys[:-1], keys[1:], descending)
        s.unordered = int(wrong.sum())
        s.duplicates = int(equal.sum())
        if s.unordered:
            s.first_unordered = int(xp.argmax(wrong)) + 1
        s.first_key, s.last_key = _host(keys[:1]), _host(keys[-1:])
    return s


def checksum(rows) -> int:
    """valsort's checksum of 2-D ``uint8`` records: the exact sum of their CRC-32s (one pass of a
    kernel on a GPU)."""
    if is_device_array(rows) and len(rows):
        from ..engine import _checks

        done = _checks.crc32_sum(rows)
        if done is not None:
            return done
    return exact_sum(crc32_rows(rows))


def exact_sum(h) -> int:
    """The exact sum of unsigned 32- or 64-bit hashes, as a Python int (no wrap-around)."""
    xp = xp_of(h)
    if not len(h):
        return 0
    if h.dtype.itemsize <= 4:
        return int(h.astype(xp.uint64).sum())
    h = h.astype(xp.uint64)
    return (int((h >> xp.uint64(32)).sum()) << 32) + int((h & xp.uint64(0xFFFFFFFF)).sum())


def _host(a):
    return to_host(a) if is_device_array(a) else np.asarray(a)


def combine(parts, *, descending: bool = False) -> Summary:
    """The summary of consecutive chunks, given their summaries in order (empty chunks allowed)."""
    total = Summary()
    for p in parts:
        if not p.records:
            continue
        if total.records and total.last_key is not None and p.first_key is not None:
            wrong, equal = _pair_order(total.last_key, p.first_key, descending)
            if bool(wrong[0]):
                total.unordered += 1
                if total.first_unordered is None:
                    total.first_unordered = total.records
            total.duplicates += int(equal[0])
        else:
            total.first_key = p.first_key
        if p.first_unordered is not None and total.first_unordered is None:
            total.first_unordered = total.records + p.first_unordered
        total.unordered += p.unordered
        total.duplicates += p.duplicates
        total.records += p.records
        total.checksum += p.checksum
        total.bytes += p.bytes
        total.last_key = p.last_key
    return total
