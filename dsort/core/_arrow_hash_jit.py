"""The compiled loops of :mod:`dsort.core.arrow_hash` (imported only where it loads them: numba's
import and cache take about a second, BENCHMARKS.md section 10).

Each loop makes exactly the hashes of the NumPy formulation it stands in for, one pass over the
values, without the GIL: the NumPy passes over blocks of 65,536 rows held the GIL for half of a
16-thread Parquet sort's time, and it kept 5 of 16 cores busy. The one helper, a word read from
bytes, is inlined where it is called (no entry of numba's cache of its own to load); SplitMix64's
finalizer is written out where a value is mixed.
"""

from __future__ import annotations

import numba
import numpy as np

_OPTIONS = dict(nogil=True, cache=True, boundscheck=False)


@numba.njit(inline="always")
def _word(data, at):
    """The little-endian uint64 of ``data[at : at + 8]`` (inlined where it is called: one load)."""
    w = np.uint64(data[at])
    for b in range(1, 8):
        w |= np.uint64(data[at + b]) << np.uint64(8 * b)
    return w


@numba.njit(**_OPTIONS)
def bytes_into(data, offsets, out):
    """``out[i]``: the hash of value ``i`` of a string or binary array (``data`` its bytes,
    ``offsets`` int64 into them, one more than ``out``), as :func:`arrow_hash._bytes` makes it."""
    k = np.uint64(0xFF51AFD7ED558CCD)
    seed = np.uint64(0x165667B19E3779F9)
    m1, m2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    for i in range(out.shape[0]):
        start = offsets[i]
        end = offsets[i + 1]
        h = np.uint64(end - start) + seed
        if end - start <= 16:  # two words, zero-padded
            lo = np.uint64(0)
            hi = np.uint64(0)
            if start + 16 <= data.shape[0]:  # 16 bytes read at once, those past the value cleared
                lo = _word(data, start)
                hi = _word(data, start + 8)
                if end - start < 8:
                    lo &= (np.uint64(1) << np.uint64(8 * (end - start))) - np.uint64(1)
                    hi = np.uint64(0)
                elif end - start < 16:
                    hi &= (np.uint64(1) << np.uint64(8 * (end - start - 8))) - np.uint64(1)
            else:
                for b in range(min(end - start, 8)):
                    lo |= np.uint64(data[start + b]) << np.uint64(8 * b)
                for b in range(8, end - start):
                    hi |= np.uint64(data[start + b]) << np.uint64(8 * (b - 8))
            h = (h * k + lo) * k + hi
        else:  # each 8-byte word plus one, mixed, times k ** its place, summed
            acc = np.uint64(0)
            power = np.uint64(1)
            at = start
            while at < end:
                w = np.uint64(0)
                if at + 8 <= end:
                    w = _word(data, at)
                else:
                    for b in range(end - at):
                        w |= np.uint64(data[at + b]) << np.uint64(8 * b)
                d = w + np.uint64(1)
                d ^= d >> s30
                d *= m1
                d ^= d >> s27
                d *= m2
                d ^= d >> s31
                acc += d * power
                power *= k
                at += 8
            h = h * k + acc
        h ^= h >> s30
        h *= m1
        h ^= h >> s27
        h *= m2
        h ^= h >> s31
        out[i] = h


@numba.njit(**_OPTIONS)
def lists_into(child, offsets, out):
    """``out[i]``: the hash of list ``i`` (its elements' hashes ``child[offsets[i]:offsets[i +
    1]]``), as :func:`arrow_hash._lists` makes it."""
    k = np.uint64(0xFF51AFD7ED558CCD)
    tag = np.uint64(0xC2B2AE3D27D4EB4F)
    for i in range(out.shape[0]):
        acc = np.uint64(0)
        power = k
        for j in range(offsets[i], offsets[i + 1]):
            acc += power * child[j]
            power *= k
        out[i] = acc * k + (np.uint64(offsets[i + 1] - offsets[i]) + tag)


@numba.njit(**_OPTIONS)
def words_into(raw, out):
    """``out[i]``: the hash of the fixed-width value ``raw[i]`` (C-contiguous uint8 rows of any
    width but 1, 2, 4 and 8), as :func:`arrow_hash._words` makes it: its little-endian words,
    zero-padded, folded and mixed."""
    k = np.uint64(0xFF51AFD7ED558CCD)
    seed = np.uint64(0x165667B19E3779F9)
    m1, m2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    n, width = raw.shape
    flat = raw.reshape(n * width)
    for i in range(n):
        acc = np.uint64(0)
        for j in range((width + 7) // 8):
            w = np.uint64(0)
            at = i * width + 8 * j
            if 8 * j + 8 <= width:
                w = _word(flat, at)
            else:
                for b in range(width - 8 * j):
                    w |= np.uint64(flat[at + b]) << np.uint64(8 * b)
            acc = (w ^ seed) if j == 0 else acc * k + w
            acc ^= acc >> s30
            acc *= m1
            acc ^= acc >> s27
            acc *= m2
            acc ^= acc >> s31
        out[i] = acc


@numba.njit(**_OPTIONS)
def fold_into(acc, h, mixed):
    """``acc = acc * k + h`` for every row, then mixed where ``mixed`` (a row's last column)."""
    k = np.uint64(0xFF51AFD7ED558CCD)
    m1, m2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
    s30, s27, s31 = np.uint64(30), np.uint64(27), np.uint64(31)
    for i in range(acc.shape[0]):
        x = acc[i] * k + h[i]
        if mixed:
            x ^= x >> s30
            x *= m1
            x ^= x >> s27
            x *= m2
            x ^= x >> s31
        acc[i] = x
