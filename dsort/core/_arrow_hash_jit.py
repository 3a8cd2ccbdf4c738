"""The compiled loops of :mod:`dsort.core.arrow_hash` (imported only for inputs worth compiling
for): the same hashes as its NumPy passes, each a single pass over a column's buffers compiled by
numba, run without the GIL. On 16 threads of one process the NumPy passes (a hundred short calls a
block of rows) waited for the GIL six times their CPU time (BENCHMARKS.md section 10); these give
it up once a column.

Every value is uint64 and wraps; the constants are :mod:`._hash_constants`'.
"""

from __future__ import annotations

import numba
import numpy as np

from ._hash_constants import BYTES as _BYTES, K as _K, LIST as _LIST, MIX1 as _M1, MIX2 as _M2, NULL

_S30, _S27, _S31, _S8 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(8)
_ONE, _ZERO = np.uint64(1), np.uint64(0)

_jit = numba.njit(nogil=True, cache=True, boundscheck=False)


@numba.njit(nogil=True, cache=True, inline="always")
def _mix(x):
    x ^= x >> _S30
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


@_jit
def mix_into(x):
    """SplitMix64's finalizer of every value of ``x``, in place."""
    for i in range(x.shape[0]):
        x[i] = _mix(x[i])


@numba.njit(nogil=True, cache=True, inline="always")
def _valid(bits, at):
    return (bits[at >> 3] >> (at & 7)) & 1


@_jit
def fold_into(acc, values, bits, at):
    """``acc[i] = acc[i] * K + values[i]`` (unsigned, widened), :data:`NULL` for ``values[i]``
    where bit ``at + i`` of the validity bitmap ``bits`` is clear (``bits`` empty: no nulls)."""
    nulls = bits.shape[0] > 0
    for i in range(acc.shape[0]):
        v = np.uint64(values[i])
        if nulls and not _valid(bits, at + i):
            v = NULL
        acc[i] = acc[i] * _K + v


@_jit
def nulls_into(h, bits, at):
    """:data:`NULL` for ``h[i]`` where bit ``at + i`` of ``bits`` is clear."""
    for i in range(h.shape[0]):
        if not _valid(bits, at + i):
            h[i] = NULL


@_jit
def booleans(bits, at, n):
    """A boolean array's hashes: its bit plus K."""
    out = np.empty(n, np.uint64)
    for i in range(n):
        out[i] = np.uint64(_valid(bits, at + i)) + _K
    return out


@numba.njit(nogil=True, cache=True, inline="always")
def _word(data, start, stop):
    """The bytes ``data[start:stop]`` (at most 8) as a little-endian word, zero-padded: eight
    written out (the compiler makes them one load), fewer a byte at a time."""
    if stop - start == 8:
        return (
            np.uint64(data[start])
            | np.uint64(data[start + 1]) << np.uint64(8)
            | np.uint64(data[start + 2]) << np.uint64(16)
            | np.uint64(data[start + 3]) << np.uint64(24)
            | np.uint64(data[start + 4]) << np.uint64(32)
            | np.uint64(data[start + 5]) << np.uint64(40)
            | np.uint64(data[start + 6]) << np.uint64(48)
            | np.uint64(data[start + 7]) << np.uint64(56)
        )
    w = _ZERO
    for b in range(stop - start):
        w |= np.uint64(data[start + b]) << (_S8 * np.uint64(b))
    return w


@_jit
def words(raw):
    """Hashes of ``(n, width)`` uint8 rows (width not 1, 2, 4 or 8): their 8-byte words (the last
    zero-padded), the first mixed with a constant, each next one folded in and mixed."""
    n, width = raw.shape
    out = np.empty(n, np.uint64)
    for i in range(n):
        row = raw[i]
        h = _mix(_word(row, 0, min(8, width)) ^ _BYTES)
        for j in range(8, width, 8):
            h = _mix(h * _K + _word(row, j, min(j + 8, width)))
        out[i] = h
    return out


@_jit
def strings(data, offsets):
    """Hashes of string or binary values (bytes ``data``, bounds ``offsets``): the length plus a
    constant; values of up to 16 bytes then fold two zero-padded words, longer ones a polynomial
    over their words (each word plus one, mixed, times K to the power of its place, summed); then
    mixed."""
    n = offsets.shape[0] - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        a, b = offsets[i], offsets[i + 1]
        length = b - a
        h = np.uint64(length) + _BYTES
        if length <= 16:
            h = h * _K + _word(data, a, min(a + 8, b))
            h = h * _K + _word(data, min(a + 8, b), b)
        else:
            s, p = _ZERO, _ONE
            for at in range(a, b, 8):
                s += _mix(_word(data, at, min(at + 8, b)) + _ONE) * p
                p *= _K
            h = h * _K + s
        out[i] = _mix(h)
    return out


@_jit
def lists(child, bits, at, offsets):
    """Hashes of lists whose elements' hashes are ``child`` (numbers of up to 8 bytes: their
    values, widened; :data:`NULL` where bit ``at + e`` of ``bits`` is clear, ``bits`` empty: no
    nulls), bounded by ``offsets`` (from 0): the elements times K to the power of their place plus
    one, summed, times K, plus the length and a constant."""
    n = offsets.shape[0] - 1
    nulls = bits.shape[0] > 0
    out = np.empty(n, np.uint64)
    for i in range(n):
        s, p = _ZERO, _K
        for e in range(offsets[i], offsets[i + 1]):
            v = np.uint64(child[e])
            if nulls and not _valid(bits, at + e):
                v = NULL
            s += p * v
            p *= _K
        out[i] = s * _K + (np.uint64(offsets[i + 1] - offsets[i]) + _LIST)
    return out
