"""The compiled loop of :mod:`dsort.engine.crc` (imported only for inputs worth compiling for).

Four records advance together, four bytes a step: ``c ^= next four bytes`` (little-endian), then
``c = T3[c & 255] ^ T2[(c >> 8) & 255] ^ T1[(c >> 16) & 255] ^ T0[c >> 24]``; the tail (width mod 4
bytes, and the last n mod 4 records) a byte at a time. One function written out, no helpers: a
first call loads one entry of numba's cache, not one per helper.
"""

from __future__ import annotations

import numba
import numpy as np


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
            a0 = c0 ^ (
                np.uint32(rows[i, j])
                | (np.uint32(rows[i, j + 1]) << 8)
                | (np.uint32(rows[i, j + 2]) << 16)
                | (np.uint32(rows[i, j + 3]) << 24)
            )
            a1 = c1 ^ (
                np.uint32(rows[i + 1, j])
                | (np.uint32(rows[i + 1, j + 1]) << 8)
                | (np.uint32(rows[i + 1, j + 2]) << 16)
                | (np.uint32(rows[i + 1, j + 3]) << 24)
            )
            a2 = c2 ^ (
                np.uint32(rows[i + 2, j])
                | (np.uint32(rows[i + 2, j + 1]) << 8)
                | (np.uint32(rows[i + 2, j + 2]) << 16)
                | (np.uint32(rows[i + 2, j + 3]) << 24)
            )
            a3 = c3 ^ (
                np.uint32(rows[i + 3, j])
                | (np.uint32(rows[i + 3, j + 1]) << 8)
                | (np.uint32(rows[i + 3, j + 2]) << 16)
                | (np.uint32(rows[i + 3, j + 3]) << 24)
            )
            c0 = t[3, a0 & 0xFF] ^ t[2, (a0 >> 8) & 0xFF] ^ t[1, (a0 >> 16) & 0xFF] ^ t[0, a0 >> 24]
            c1 = t[3, a1 & 0xFF] ^ t[2, (a1 >> 8) & 0xFF] ^ t[1, (a1 >> 16) & 0xFF] ^ t[0, a1 >> 24]
            c2 = t[3, a2 & 0xFF] ^ t[2, (a2 >> 8) & 0xFF] ^ t[1, (a2 >> 16) & 0xFF] ^ t[0, a2 >> 24]
            c3 = t[3, a3 & 0xFF] ^ t[2, (a3 >> 8) & 0xFF] ^ t[1, (a3 >> 16) & 0xFF] ^ t[0, a3 >> 24]
        for j in range(words, w):
            c0 = (c0 >> 8) ^ t[0, (c0 ^ rows[i, j]) & 0xFF]
            c1 = (c1 >> 8) ^ t[0, (c1 ^ rows[i + 1, j]) & 0xFF]
            c2 = (c2 >> 8) ^ t[0, (c2 ^ rows[i + 2, j]) & 0xFF]
            c3 = (c3 >> 8) ^ t[0, (c3 ^ rows[i + 3, j]) & 0xFF]
        out[i], out[i + 1], out[i + 2], out[i + 3] = c0 ^ ones, c1 ^ ones, c2 ^ ones, c3 ^ ones
        i += 4
    for k in range(i, n):
        c = ones
        for j in range(w):
            c = (c >> 8) ^ t[0, (c ^ rows[k, j]) & 0xFF]
        out[k] = c ^ ones
