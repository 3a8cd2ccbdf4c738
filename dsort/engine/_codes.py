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


def pack(rows, offset: int, length: int, perm=None) -> Coded:
    """Bytes [offset, offset + length) of each row (of row perm[i]) as one word per key."""
    n, width = rows.shape
    word = 16 if length > 8 else 8
    out = cupy.empty((n, 2) if word == 16 else n, dtype=cupy.uint64)
    plan = P.rows_plan()
    kern = plan.pack[word, perm.dtype.itemsize if perm is not None else 4]
    args = (rows, np.int64(n), np.int32(width), np.int32(offset), np.int32(length), C.NULL if perm is None else perm, out)
    C.launch(kern, kern.grid(n), args)

    def decode(codes):
        if length != width:
            raise AssertionError("only whole keys decode")
        res = cupy.empty((len(codes), width), dtype=cupy.uint8)
        unpack = plan.unpack[word]
        C.launch(unpack, unpack.grid(len(codes)), (codes, np.int64(len(codes)), np.int32(width), res))
        return res

    return Coded(out, P.ROW_WORDS[word], decode)


def encode(keys) -> Coded:
    """Keys as sort/merge kernel keys (byte rows of width <= 16 only)."""
    if K.is_byte_rows(keys):
        return pack(cupy.ascontiguousarray(keys), 0, keys.shape[1])
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
