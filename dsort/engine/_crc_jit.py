"""The compiled loop of :mod:`dsort.engine.crc` (imported only for inputs worth compiling for).

Four records advance together, four bytes a step: ``c ^= next four bytes`` (little-endian), then
``c = T3[c & 255] ^ T2[(c >> 8) & 255] ^ T1[(c >> 16) & 255] ^ T0[c >> 24]``; the tail (width mod 4
bytes, and the last n mod 4 records) a byte at a time. Compiled once per machine into numba's cache.
"""

from __future__ import annotations

import numba
import numpy as np


@numba.njit(nogil=True, cache=True, boundscheck=False)
def _word(rows, i, j):
    return np.uint32(rows[i, j]) | (np.uint32(rows[i, j + 1]) << 8) | (np.uint32(rows[i, j + 2]) << 16) | (np.uint32(rows[i, j + 3]) << 24)


@numba.njit(nogil=True, cache=True, boundscheck=False)
def _step(t, a):
    return t[3, a & 0xFF] ^ t[2, (a >> 8) & 0xFF] ^ t[1, (a >> 16) & 0xFF] ^ t[0, a >> 24]


@numba.njit(nogil=True, cache=True, boundscheck=False)
def _byte(t, c, b):
    return (c >> 8) ^ t[0, (c ^ b) & 0xFF]


@numba.njit(nogil=True, cache=True, boundscheck=False)
def crc32_rows_into(rows, t, out):
    """``out[i] = zlib.crc32(rows[i])`` for a C-contiguous 2-D uint8 ``rows``."""
    n, w = rows.shape
    ones = np.uint32(0xFFFFFFFF)
    words = w - w % 4
    i = 0
    while i + 4 <= n:
        c0 = c1 = c2 = c3 = ones
        for j in range(0, words, 4):
            c0 = _step(t, c0 ^ _word(rows, i, j))
            c1 = _step(t, c1 ^ _word(rows, i + 1, j))
            c2 = _step(t, c2 ^ _word(rows, i + 2, j))
            c3 = _step(t, c3 ^ _word(rows, i + 3, j))
        for j in range(words, w):
            c0 = _byte(t, c0, rows[i, j])
            c1 = _byte(t, c1, rows[i + 1, j])
            c2 = _byte(t, c2, rows[i + 2, j])
            c3 = _byte(t, c3, rows[i + 3, j])
        out[i], out[i + 1], out[i + 2], out[i + 3] = c0 ^ ones, c1 ^ ones, c2 ^ ones, c3 ^ ones
        i += 4
    for k in range(i, n):
        c = ones
        for j in range(w):
            c = _byte(t, c, rows[k, j])
        out[k] = c ^ ones
