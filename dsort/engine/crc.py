"""CRC-32 (zlib's) of every fixed-width record, on the CPU, at memory speed.

``valsort``'s checksum sums one CRC-32 per record, so a sort's checksum stage reads every byte once
and must not cost more than reading it. A vectorized NumPy formulation needs one table lookup per
byte or two in tables no cache holds, far below memory speed; the loop here is compiled by numba
(:mod:`._crc_jit`): the table-driven CRC four bytes at a time (slicing by 4, 4 KiB of tables, in
L1), four records at a time so their lookups overlap, without the GIL so that threads scale. It is
many times faster per core than the NumPy formulation (BENCHMARKS.md section 2).

Small inputs take a Python loop of ``zlib.crc32`` instead: no numba import, no compiled function to
load, a fraction of a microsecond per record; inputs up to :data:`LOAD_BYTES` take byte tables
(:func:`byte_tables`: NumPy gathers, slower per core than the loop but with threads scaling;
BENCHMARKS.md section 3) while the loop is not loaded. The embedded CPU sort of a large input has
its records' checksums summed in a process of its own (:mod:`dsort.core.checksums`), from the files.
The GPU's checksum is in :mod:`dsort.core.valsort` (table lookups there are cheap).
"""

from __future__ import annotations

import functools
import sys
import zlib

import numpy as np

SMALL_BYTES = 1 << 16  # inputs up to this many bytes take the zlib loop, always
# and up to this many the byte tables while the compiled loop is not loaded: loading
LOAD_BYTES = 32 << 20
# it (numba's import and cache, BENCHMARKS.md section 3) costs more than their slower pass


@functools.lru_cache(maxsize=1)
def tables() -> np.ndarray:
    """``(4, 256)`` uint32: ``T[0]`` the byte-at-a-time table of the reflected polynomial
    0xEDB88320 (zlib's CRC-32), ``T[k][b]`` the CRC of byte ``b`` followed by ``k`` zero bytes."""
    t = np.zeros((4, 256), np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        t[0, b] = c
    for k in range(1, 4):
        t[k] = (t[k - 1] >> 8) ^ t[0, t[k - 1] & 0xFF]
    return t


@functools.lru_cache(maxsize=8)
def byte_tables(width: int) -> np.ndarray:
    """``(width, 256)`` uint32: ``B[j][b]``, what byte ``b`` at position ``j`` of a ``width``-byte
    record adds (XOR) to its CRC-32: the CRC register after ``b`` then ``width - 1 - j`` zero
    bytes, from a zero register. CRC-32 is affine in the record's bits: ``zlib.crc32(r)`` is
    ``zlib.crc32(bytes(width))`` XOR every ``B[j][r[j]]``."""
    t0 = tables()[0]
    b = np.empty((width, 256), np.uint32)
    if width:
        b[width - 1] = t0
    for j in range(width - 2, -1, -1):
        b[j] = (b[j + 1] >> 8) ^ t0[b[j + 1] & 0xFF]
    return b


TABLE_BLOCK = 8192  # records a step of the table path (their columns and lookups stay in the cache)


def _crc32_by_tables(rows: np.ndarray) -> np.ndarray:
    """:func:`crc32_rows` by :func:`byte_tables`, no compiled loop to load: for each block of
    :data:`TABLE_BLOCK` records one NumPy gather of every byte's table entry and one XOR reduction,
    each a long call that releases the GIL, so that threads scale (a gather and an XOR per byte
    column instead was fast on one thread but collapsed on 16 threads, every short call a fight for
    the GIL; BENCHMARKS.md section 3)."""
    n, w = rows.shape
    b = byte_tables(w)
    out = np.full(n, zlib.crc32(bytes(w)), np.uint32)
    at = np.arange(w)[:, None]
    for a in range(0, n if w else 0, TABLE_BLOCK):
        m = min(TABLE_BLOCK, n - a)
        out[a : a + m] ^= np.bitwise_xor.reduce(
            b[at, np.ascontiguousarray(rows[a : a + m].T)], axis=0
        )
    return out


def crc32_rows(rows: np.ndarray) -> np.ndarray:
    """uint32 CRC-32 of each row of a 2-D ``uint8`` NumPy array, equal to ``zlib.crc32(row)``:
    zlib's loop up to :data:`SMALL_BYTES`, byte tables (:func:`_crc32_by_tables`) up to
    :data:`LOAD_BYTES` while the compiled loop is not loaded, else the compiled loop."""
    n = rows.shape[0]
    if rows.size <= SMALL_BYTES:
        rows = np.ascontiguousarray(rows)
        return np.fromiter((zlib.crc32(r) for r in rows), np.uint32, n)
    if rows.size <= LOAD_BYTES and not loaded():
        return _crc32_by_tables(rows)
    from ._crc_jit import crc32_rows_into

    out = np.empty(n, np.uint32)
    crc32_rows_into(np.ascontiguousarray(rows), tables(), out)
    return out


def loaded() -> bool:
    """Whether the compiled loop is loaded in this process."""
    return "dsort.engine._crc_jit" in sys.modules


def warm() -> None:
    """Compile (or load from numba's cache) the loop now, not in the first large checksum."""
    from ._crc_jit import crc32_rows_into

    crc32_rows_into(np.zeros((4, 8), np.uint8), tables(), np.empty(4, np.uint32))
