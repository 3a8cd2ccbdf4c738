"""Keys as the sort and merge kernels see them (CuPy arrays in, CuPy arrays out).

4- and 8-byte integers and floats as they are; 1- and 2-byte integers and ``bool`` widened to
``int32``; byte rows packed big-endian into ``uint64`` (width <= 8) or 16-byte words (width <= 16).
Wider byte keys are sorted by stable passes over 16-byte slices (:func:`pack` of one slice each).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import cupy
import numpy as np

from . import _cuda as C
from . import _kernels as P
from . import keys as K


@dataclass
class Coded:
    data: cupy.ndarray  # 1-D, or (n, 2) uint64 for 16-byte words
    key: str  # the C type the kernels compare
    decode: Callable[[cupy.ndarray], cupy.ndarray]  # sorted codes -> keys spelled like the input

    def order(self, descending: bool, na_first: bool) -> P.Order:
        return P.Order(self.key, descending, na_first)


def rows_pitch(x) -> int | None:
    """Bytes between the rows (items along axis 0) of ``x`` whose bytes within a row are
    C-contiguous (a view of wider records: a row of each), else None."""
    inner = x.dtype.itemsize
    for dim, stride in zip(reversed(x.shape[1:]), reversed(x.strides[1:])):
        if dim > 1 and stride != inner:
            return None
        inner *= dim
    if not x.ndim:
        return None
    return inner if len(x) <= 1 else (int(x.strides[0]) if x.strides[0] >= inner else None)


def gather_rows(values, positions=None):
    """``values[positions]`` along axis 0 (``values`` itself where positions is None: a C-contiguous
    copy), every row moved as the widest words that divide it, by dsort's kernel (no CuPy kernel
    built). ``positions``: non-negative integers of 4 or 8 bytes."""
    if positions is not None:
        positions = cupy.asarray(positions)
        if positions.dtype.kind not in "iu":
            raise TypeError(f"take_rows: positions must be integers, got {positions.dtype}")
    n = len(values) if positions is None else len(positions)
    out = cupy.empty((n,) + values.shape[1:], dtype=values.dtype)
    width = out.itemsize * int(np.prod(values.shape[1:], dtype=np.int64))
    if not n or not width:
        return out
    pitch = rows_pitch(values)
    if pitch is None:
        values, pitch = cupy.ascontiguousarray(values), width
    if positions is not None:
        if (
            positions.dtype.itemsize not in P.VALUE_TYPES
            or positions.strides[0] % positions.itemsize
        ):
            positions = cupy.ascontiguousarray(positions, dtype=cupy.int64)
    word = max(
        w for w in P.GATHER_WORDS if width % w == 0 and pitch % w == 0 and values.data.ptr % w == 0
    )
    kern = P.rows_plan().gather[word, positions.itemsize if positions is not None else 8]
    pos_args = (
        (C.NULL, np.int64(0))
        if positions is None
        else (positions, np.int64(positions.strides[0] // positions.itemsize))
    )
    words = width // word
    C.launch(
        kern,
        kern.grid(n * words),
        (values, np.int64(pitch // word), *pos_args, np.int64(n), np.int32(words), out),
    )
    return out


def iota(n: int, start: int = 0, step: int = 1):
    """int64 ``start + i * step`` for i < n, by dsort's kernel (``cupy.arange`` builds its own)."""
    out = cupy.empty(n, dtype=cupy.int64)
    kern = P.rows_plan().iota
    C.launch(kern, kern.grid(n), (np.int64(start), np.int64(step), np.int64(n), out))
    return out


def concatenate(arrays):
    """The arrays joined along axis 0 (one trailing shape; dtypes promoted as NumPy's): one
    device-to-device copy each (``cupy.concatenate`` builds a copy kernel)."""
    first = arrays[0]
    if any(a.shape[1:] != first.shape[1:] for a in arrays):
        raise ValueError("concatenate: arrays of one trailing shape")
    # promoted as NumPy's (mixed dtypes: a cast each)
    dtype = np.result_type(*(a.dtype for a in arrays))
    arrays = [contiguous(a if a.dtype == dtype else a.astype(dtype)) for a in arrays]
    out = cupy.empty((sum(len(a) for a in arrays),) + first.shape[1:], dtype=dtype)
    at = 0
    for a in arrays:
        if a.nbytes:
            (out.data + at).copy_from_device_async(a.data, a.nbytes)
        at += a.nbytes
    return out


def contiguous(x):
    """``x`` where it is C-contiguous, else a contiguous copy by :func:`gather_rows`."""
    return x if x.flags.c_contiguous else gather_rows(x)


def pack(rows, offset: int, length: int, perm=None) -> Coded:
    """Bytes [offset, offset + length) of each row (of row perm[i]) as one word per key; ``rows``
    2-D uint8 whose rows' bytes are adjacent (a view of wider records will do)."""
    n, width = rows.shape
    pitch = rows_pitch(rows)
    if pitch is None:
        rows, pitch = cupy.ascontiguousarray(rows), width
    word = 16 if length > 8 else 8
    out = cupy.empty((n, 2) if word == 16 else n, dtype=cupy.uint64)
    plan = P.rows_plan()
    kern = plan.pack[word, perm.dtype.itemsize if perm is not None else 4]
    args = (
        rows,
        np.int64(n),
        np.int64(pitch),
        np.int32(offset),
        np.int32(length),
        C.NULL if perm is None else perm,
        out,
    )
    C.launch(kern, kern.grid(n), args)

    def decode(codes):
        if length != width:
            raise AssertionError("only whole keys decode")
        res = cupy.empty((len(codes), width), dtype=cupy.uint8)
        unpack = plan.unpack[word]
        C.launch(
            unpack, unpack.grid(len(codes)), (codes, np.int64(len(codes)), np.int32(width), res)
        )
        return res

    return Coded(out, P.ROW_WORDS[word], decode)


def encode(keys) -> Coded:
    """Keys as sort/merge kernel keys (byte rows of width <= 16 only)."""
    if K.is_byte_rows(keys):
        return pack(keys, 0, keys.shape[1])
    dtype = keys.dtype
    if dtype.itemsize < 4:  # bool, 8- and 16-bit integers: int32 holds them all, order kept
        return Coded(keys.astype(cupy.int32), "int", lambda s: s.astype(dtype))
    return Coded(cupy.ascontiguousarray(keys), P.ctype_of(dtype), lambda s: s)


def value_words(values):
    """1-D values of 4 or 8 bytes as the unsigned words the kernels carry (a view when
    contiguous), else None: other values are gathered through a permutation instead."""
    if values.ndim != 1 or values.dtype.itemsize not in P.VALUE_TYPES:
        return None
    return cupy.ascontiguousarray(values).view(f"u{values.dtype.itemsize}")


def wide_rows(keys) -> bool:
    """Byte keys wider than one 16-byte word (sorted slice by slice)."""
    return K.is_byte_rows(keys) and keys.shape[1] > 16
