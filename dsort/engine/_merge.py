"""The standalone merge driver: one Merge Path partition at every output tile, then one CTA per
tile merges its exact ranges (``kernels/kernel_merge.cu``); kernels from the sort plan."""

from __future__ import annotations

import cupy
import numpy as np

from . import _codes
from . import _cuda as C
from . import _kernels as P
from ._mergesort import index_dtype


def merge(a, b, a_values, b_values, descending: bool, na_first: bool):
    """Stable merge of non-empty sorted a and b (keys of up to 16 bytes), ties from a first.
    4- and 8-byte 1-D values of one dtype ride along; other values are gathered through the
    merge's source positions. Returns keys, or (keys, values)."""
    with C.phase("encode"):
        ca, cb = _codes.encode(a), _codes.encode(b)
    na, nb = len(a), len(b)
    n = na + nb
    va = vb = None
    if a_values is not None and a_values.dtype == b_values.dtype:
        va, vb = _codes.value_words(a_values), _codes.value_words(b_values)
    if va is not None and vb is not None:
        mode = P.Mode.CARRY
    elif a_values is not None:
        va = vb = cupy.empty(0, dtype=index_dtype(n))
        mode = P.Mode.IOTA
    else:
        mode = P.Mode.KEYS
    plan = P.sort_plan(
        ca.order(descending, na_first), va.dtype.itemsize if va is not None else 0, mode, C.target()
    )
    mp, kern = plan.merge_path, plan.merge_pair
    tiles = kern.grid(n)
    parts = cupy.empty(tiles + 1, dtype=cupy.int64)
    args = (
        ca.data,
        np.int64(na),
        cb.data,
        np.int64(nb),
        C.NULL,
        np.int64(kern.tile),
        np.int64(tiles + 1),
        parts,
    )
    with C.phase("merge path"):
        C.launch(mp, mp.grid(tiles + 1), args)
    out = cupy.empty((n, *ca.data.shape[1:]), dtype=ca.data.dtype)
    vout = cupy.empty(n, dtype=va.dtype) if va is not None else None
    args = (
        ca.data,
        va if mode is P.Mode.CARRY else C.NULL,
        np.int64(na),
        cb.data,
        vb if mode is P.Mode.CARRY else C.NULL,
        np.int64(nb),
        out,
        vout if vout is not None else C.NULL,
        parts,
    )
    with C.phase("merge"):
        C.launch(kern, tiles, args)
    with C.phase("decode"):
        keys = ca.decode(out)
    if mode is P.Mode.KEYS:
        return keys
    if mode is P.Mode.CARRY:
        return keys, vout.view(a_values.dtype)
    return keys, _codes.gather_rows(_codes.concatenate([a_values, b_values]), vout)
