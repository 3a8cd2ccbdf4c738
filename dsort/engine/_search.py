"""Search drivers over sorted (or maybe sorted) keys in global memory: the sortedness check,
co-ranks and rank probes (``kernels/kernel_search.cu``, and ``kernel_rows.cu`` for byte rows,
compared in place at any width). Kernels from the search and rows plans."""

from __future__ import annotations

import cupy
import numpy as np

from . import _codes
from . import _cuda as C
from . import _kernels as P
from . import keys as K


def _search_plan(dtype, descending: bool, na_first: bool) -> P.SearchPlan:
    return P.search_plan(P.Order(P.ctype_of(dtype), descending, na_first))


def check_flags(keys, descending: bool, na_first: bool, copy: bool = False):
    """(sorted, strictly reverse-sorted, copy) in the wanted order, from one read of the keys.

    With copy (1-D keys only), the kernel also writes a copy of the keys, which is the sort's
    result when they turn out sorted (else None: the kernel stops early and the copy is partial).
    The kernel publishes one flag update per CTA, so even a sorted input costs one pass.
    """
    n = len(keys)
    flags = cupy.zeros(2, dtype=cupy.int32)
    dup = None
    if K.is_byte_rows(keys):
        kern = P.rows_plan().check[bool(descending)]
        args = (_codes.contiguous(keys), np.int64(n), np.int32(keys.shape[1]), flags)
        C.launch(kern, kern.grid(n, C.sm_count()), args)
    else:
        keys = cupy.ascontiguousarray(keys)
        dup = cupy.empty_like(keys) if copy else None
        kern = _search_plan(keys.dtype, descending, na_first).check_sorted
        with C.phase("check"):
            C.launch(
                kern,
                kern.grid(n, C.sm_count()),
                (keys, np.int64(n), flags, C.NULL if dup is None else dup),
            )
    unsorted, not_reversed = (bool(f) for f in flags.get())
    return not unsorted, not not_reversed, (dup if not unsorted else None)


def merge_path(a, b, d, descending: bool, na_first: bool):
    """Co-ranks of the stable merge of sorted a and b at the diagonals d (int64 device array)."""
    m, n = len(a), len(b)
    out = cupy.empty(d.size, dtype=cupy.int64)
    a, b = cupy.ascontiguousarray(a), cupy.ascontiguousarray(b)
    if K.is_byte_rows(a):
        kern = P.rows_plan().merge_path[bool(descending)]
        args = (a, np.int64(m), b, np.int64(n), np.int32(a.shape[1]), d, np.int64(d.size), out)
    else:
        kern = _search_plan(a.dtype, descending, na_first).merge_path
        args = (a, np.int64(m), b, np.int64(n), d, np.int64(0), np.int64(d.size), out)
    C.launch(kern, kern.grid(d.size), args)
    return out


def searchsorted(s, probes, right: bool, descending: bool, na_first: bool):
    """Ranks of the probes (contiguous, the keys' dtype) over the sorted keys s."""
    n, m = len(s), len(probes)
    out = cupy.empty(m, dtype=cupy.int64)
    s = cupy.ascontiguousarray(s)
    if K.is_byte_rows(s):
        kern = P.rows_plan().searchsorted[bool(descending), right]
        args = (s, np.int64(n), probes, np.int64(m), np.int32(s.shape[1]), out)
    else:
        kern = _search_plan(s.dtype, descending, na_first).searchsorted(right)
        args = (s, np.int64(n), probes, np.int64(m), out)
    C.launch(kern, kern.grid(m), args)
    return out
