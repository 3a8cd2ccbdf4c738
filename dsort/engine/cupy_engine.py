"""The CuPy engine: one array on one CUDA device, sorted by dsort's own merge-path kernels.

Same functions and the same order as :mod:`dsort.engine.numpy_engine` (see
:mod:`dsort.engine.keys`): stable in both directions, NaN last (or first), ``-0.0 == 0.0``, byte
keys as unsigned bytes (spelled as 2-D ``uint8`` rows: CuPy has no ``S``/``V`` dtypes).

How the kernels see the keys: 4- and 8-byte integers and floats as they are; 1- and 2-byte
integers and ``bool`` widened to ``int32``; byte rows packed big-endian into ``uint64`` (width
<= 8) or 16-byte words (width <= 16); wider byte keys sorted by stable passes over 16-byte slices,
last slice first. The order (direction, NaN policy) is a comparator template, never a transform
of the data, so every bit of every key (NaN payloads, -0.0) comes back as it went in.

Sorting is a mergesort (MGPU's design): a CTA blocksort of each tile, then global passes that
double the run length, each a Merge Path partition plus a merge kernel, ping-ponging between two
buffers so that the last pass lands in the output. Input that is already sorted, or strictly
sorted in reverse (whose reversal is its stable sort), is detected in one read and copied.
Values of 4 or 8 bytes ride along with the keys; any other values (other itemsizes, rows) are
gathered once through the sorting permutation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import cupy
import numpy as np

from . import _cuda as C
from . import keys as K

name = "cupy"
xp = cupy

_SORT_SOURCES = ("kernel_mergesort.cu", "kernel_merge.cu")
_SEARCH_SOURCES = ("kernel_search.cu",)
_ROWS_SOURCES = ("kernel_rows.cu",)
_NO_VALUES, _CARRY, _IOTA = 0, 1, 2
_VTYPE = {4: "unsigned int", 8: "unsigned long long"}
_VDTYPE = {4: cupy.uint32, 8: cupy.uint64}
_CTYPE = {
    "b1": "unsigned char",
    "i1": "signed char",
    "u1": "unsigned char",
    "i2": "short",
    "u2": "unsigned short",
    "i4": "int",
    "u4": "unsigned int",
    "f4": "float",
    "i8": "long long",
    "u8": "unsigned long long",
    "f8": "double",
}
_BYTES16 = "dsort::Bytes16"
_NP_OF = {c: k[0].replace("b", "u") + k[1] for k, c in _CTYPE.items()}  # C type -> a NumPy dtype of its size


def _cbool(flag: bool) -> str:
    return "true" if flag else "false"


def _order(ctype: str, descending: bool, na_first: bool) -> str:
    floating = ctype in ("float", "double")
    return f"dsort::Order<{ctype}, {_cbool(descending)}, {_cbool(na_first and floating)}>"


def _ctype(dtype) -> str:
    dtype = np.dtype(dtype)
    return _CTYPE[f"{dtype.kind}{dtype.itemsize}"]


# ---------------------------------------------------------------------------------------------
# Keys as the sort and merge kernels see them.


@dataclass
class _Coded:
    data: cupy.ndarray  # 1-D, or (n, 2) uint64 for 16-byte words
    ctype: str
    size: int  # bytes per key
    decode: Callable[[cupy.ndarray], cupy.ndarray]  # sorted codes -> keys spelled like the input


def _pack(rows, offset: int, length: int, perm=None) -> _Coded:
    """Bytes [offset, offset + length) of each row (of row perm[i]) as one word per key."""
    n, width = rows.shape
    wide = length > 8
    out = cupy.empty((n, 2) if wide else n, dtype=cupy.uint64)
    ctype = _BYTES16 if wide else "unsigned long long"
    ptype = _VTYPE[perm.dtype.itemsize] if perm is not None else "unsigned int"
    kern = C.function(_ROWS_SOURCES, _rows_names(), f"dsort::k_pack_rows<{ctype}, {ptype}>")
    args = (rows, np.int64(n), np.int32(width), np.int32(offset), np.int32(length), C.NULL if perm is None else perm, out)
    C.launch(kern, C.search_grid(n), C.SEARCH_THREADS, args)

    def decode(codes):
        if length != width:
            raise AssertionError("only whole keys decode")
        res = cupy.empty((len(codes), width), dtype=cupy.uint8)
        kern = C.function(_ROWS_SOURCES, _rows_names(), f"dsort::k_unpack_rows<{ctype}>")
        C.launch(kern, C.search_grid(len(codes)), C.SEARCH_THREADS, (codes, np.int64(len(codes)), np.int32(width), res))
        return res

    return _Coded(out, ctype, 16 if wide else 8, decode)


def _encode(keys) -> _Coded:
    """Keys as sort/merge kernel keys (byte rows of width <= 16 only)."""
    if K.is_byte_rows(keys):
        return _pack(cupy.ascontiguousarray(keys), 0, keys.shape[1])
    dtype = keys.dtype
    if dtype.itemsize < 4:  # bool, 8- and 16-bit integers: int32 holds them all, order kept
        return _Coded(keys.astype(cupy.int32), "int", 4, lambda s: s.astype(dtype))
    keys = cupy.ascontiguousarray(keys)
    return _Coded(keys, _ctype(dtype), dtype.itemsize, lambda s: s)


def _wide_rows(keys) -> bool:
    return K.is_byte_rows(keys) and keys.shape[1] > 16


# ---------------------------------------------------------------------------------------------
# Kernel names per instantiation.


def _sort_names(order: str, size: int, vtype: str | None) -> tuple[str, ...]:
    nt_b, nt_m, vt = C.tuning(size, 8 if vtype == "unsigned long long" else 4 if vtype else 0)
    if vtype is None:
        return (
            f"dsort::k_blocksort<{order}, {nt_b}, {vt}, 0, dsort::NoValue>",
            f"dsort::k_merge_runs<{order}, {nt_m}, {vt}, 0, dsort::NoValue>",
            f"dsort::k_merge_pair<{order}, {nt_m}, {vt}, 0, dsort::NoValue>",
        )
    names = (
        f"dsort::k_blocksort<{order}, {nt_b}, {vt}, 1, {vtype}, {vtype}>",
        f"dsort::k_blocksort<{order}, {nt_b}, {vt}, 2, {vtype}, {vtype}>",
        f"dsort::k_merge_runs<{order}, {nt_m}, {vt}, 1, {vtype}, {vtype}>",
        f"dsort::k_merge_pair<{order}, {nt_m}, {vt}, 1, {vtype}>",
        f"dsort::k_merge_pair<{order}, {nt_m}, {vt}, 2, {vtype}>",
    )
    if vtype == "unsigned int":  # argsort: the last pass writes int64 positions
        names += (
            f"dsort::k_blocksort<{order}, {nt_b}, {vt}, 2, {vtype}, long long>",
            f"dsort::k_merge_runs<{order}, {nt_m}, {vt}, 1, {vtype}, long long>",
        )
    return names


def _search_names(order: str) -> tuple[str, ...]:
    return (
        f"dsort::k_partition_runs<{order}>",
        f"dsort::k_merge_path<{order}>",
        f"dsort::k_searchsorted<{order}, false>",
        f"dsort::k_searchsorted<{order}, true>",
        f"dsort::k_check_sorted<{order}>",
    )


def _rows_names() -> tuple[str, ...]:
    names = []
    for ktype in ("unsigned long long", _BYTES16):
        names += [f"dsort::k_pack_rows<{ktype}, {p}>" for p in _VTYPE.values()]
        names.append(f"dsort::k_unpack_rows<{ktype}>")
    for d in ("false", "true"):
        names += [f"dsort::k_rows_merge_path<{d}>", f"dsort::k_rows_check<{d}>"]
        names += [f"dsort::k_rows_searchsorted<{d}, {r}>" for r in ("false", "true")]
    return tuple(names)


def _sort_kernel(order, size, vtype, which):
    names = _sort_names(order, size, vtype)
    return C.function(_SORT_SOURCES, names, next(n for n in names if n.startswith(which)))


def _search_kernel(order, which):
    names = _search_names(order)
    return C.function(_SEARCH_SOURCES, names, next(n for n in names if n.startswith(which)))


# ---------------------------------------------------------------------------------------------
# The mergesort driver.


# Measurement hook (benchmarks only): when a list, _mergesort appends (phase, start, end) events.
_TRACE = None


def _mark(label):
    if _TRACE is None:
        return None
    ev = cupy.cuda.Event()
    ev.record()
    return label, ev


def _close(mark):
    if mark is not None:
        ev = cupy.cuda.Event()
        ev.record()
        _TRACE.append((mark[0], mark[1], ev))


def _index_dtype(n: int):
    return cupy.uint32 if n < 2**32 else cupy.uint64


def _mergesort(coded: _Coded, order: str, values=None, iota: bool = False, int64_out: bool = False):
    """Stable sort of coded keys; values (1-D uint32/uint64) carried, or positions generated
    (iota) in the index dtype for n. int64_out (with iota): positions come back as int64, written
    so by the last pass. Returns (keys, values or None)."""
    k = coded.data
    n = k.shape[0]
    if iota:
        values = cupy.empty(0, dtype=_index_dtype(n))  # only its dtype matters below
    int64_out = int64_out and iota and values.dtype == cupy.uint32
    vtype = _VTYPE[values.dtype.itemsize] if values is not None else None
    vbytes = values.dtype.itemsize if values is not None else 0
    nt_b, nt_m, vt = C.tuning(coded.size, vbytes)
    tile_b, tile_m = nt_b * vt, nt_m * vt
    blocks = -(-n // tile_b)
    passes = (blocks - 1).bit_length() if blocks > 1 else 0

    # Ping-pong buffers; the blocksort writes where an even number of passes later lands in keys[0].
    keys = [cupy.empty_like(k), cupy.empty_like(k) if passes else None]
    vals = [None, None]
    if vtype is not None:
        vals = [cupy.empty(n, values.dtype), cupy.empty(n, values.dtype) if passes else None]
    if int64_out:  # the last write of the values goes to its own int64 buffer
        final = cupy.empty(n, dtype=cupy.int64)
        if passes == 0:
            vals[0] = final
    cur = passes % 2

    mode = _NO_VALUES if vtype is None else _IOTA if iota else _CARRY
    if vtype is None:
        bs_name = f"dsort::k_blocksort<{order}, {nt_b}, {vt}, 0, dsort::NoValue>"
    else:
        vo = "long long" if int64_out and passes == 0 else vtype
        bs_name = f"dsort::k_blocksort<{order}, {nt_b}, {vt}, {mode}, {vtype}, {vo}>"
    bs = _sort_kernel(order, coded.size, vtype, bs_name)
    smem = C.align16(tile_b * coded.size) + (tile_b * 4 if vtype else 0)
    vin = values if mode == _CARRY else C.NULL
    mark = _mark("blocksort")
    C.launch(bs, blocks, nt_b, (k, vin, keys[cur], vals[cur] if vtype else C.NULL, np.int64(n)), smem)
    _close(mark)

    if passes:
        part = _search_kernel(order, "dsort::k_partition_runs")
        tiles = -(-n // tile_m)
        parts = cupy.empty(tiles + 1, dtype=cupy.int64)
        smem = C.align16(tile_m * coded.size) + tile_m * vbytes
        run = tile_b
        while run < n:
            src, dst = cur, 1 - cur
            last = run * 2 >= n
            if vtype is None:
                mr_name = f"dsort::k_merge_runs<{order}, {nt_m}, {vt}, 0, dsort::NoValue>"
            else:
                mr_name = f"dsort::k_merge_runs<{order}, {nt_m}, {vt}, 1, {vtype}, {'long long' if int64_out and last else vtype}>"
            mr = _sort_kernel(order, coded.size, vtype, mr_name)
            vout = (final if int64_out and last else vals[dst]) if vtype else C.NULL
            mark = _mark(f"pass run={run}")
            C.launch(
                part,
                C.search_grid(tiles + 1),
                C.SEARCH_THREADS,
                (keys[src], np.int64(n), np.int64(run), np.int64(tile_m), np.int64(tiles + 1), parts),
            )
            args = (keys[src], vals[src] if vtype else C.NULL, keys[dst], vout, np.int64(n), np.int64(run), parts)
            C.launch(mr, tiles, nt_m, args, smem)
            _close(mark)
            cur, run = dst, run * 2
    assert cur == 0
    return keys[0], (final if int64_out else vals[0])


_CHECK_TILE = 2048  # keys per CTA of k_check_sorted (kCheckThreads * kCheckItems)


def _check_flags(keys, descending: bool, na_first: bool, copy: bool = False):
    """(sorted, strictly reverse-sorted, copy) in the wanted order, from one read of the keys.

    With copy (1-D keys only), the kernel also writes a copy of the keys, which is the sort's
    result when they turn out sorted (else None: the kernel stops early and the copy is partial).
    The kernel publishes one flag update per CTA, so even a sorted input costs one pass.
    """
    n = len(keys)
    flags = cupy.zeros(2, dtype=cupy.int32)
    dup = None
    if K.is_byte_rows(keys):
        grid = max(1, min(C.search_grid(n), C.sm_count() * 16))
        kern = C.function(_ROWS_SOURCES, _rows_names(), f"dsort::k_rows_check<{_cbool(descending)}>")
        C.launch(kern, grid, C.SEARCH_THREADS, (cupy.ascontiguousarray(keys), np.int64(n), np.int32(keys.shape[1]), flags))
    else:
        keys = cupy.ascontiguousarray(keys)
        dup = cupy.empty_like(keys) if copy else None
        kern = _search_kernel(_order(_ctype(keys.dtype), descending, na_first), "dsort::k_check_sorted")
        mark = _mark("check")
        grid = max(1, min(-(-n // _CHECK_TILE), C.sm_count() * 8))  # persistent: CTAs stop early
        C.launch(kern, grid, 256, (keys, np.int64(n), flags, C.NULL if dup is None else dup))
        _close(mark)
    unsorted, not_reversed = (bool(f) for f in flags.get())
    return not unsorted, not not_reversed, (dup if not unsorted else None)


def _sorting_permutation(keys, descending: bool, na_first: bool, int64_out: bool = False):
    """Stable sorting permutation (index dtype for n, or int64) and, when cheap, the sorted keys
    (else None)."""
    if _wide_rows(keys):
        rows = cupy.ascontiguousarray(keys)
        perm = None
        for offset in reversed(range(0, rows.shape[1], 16)):  # least significant slice first
            coded = _pack(rows, offset, min(16, rows.shape[1] - offset), perm)
            order = _order(coded.ctype, descending, False)
            _, perm = _mergesort(coded, order, values=perm, iota=perm is None)
        return perm, None
    coded = _encode(keys)
    sk, perm = _mergesort(coded, _order(coded.ctype, descending, na_first), iota=True, int64_out=int64_out)
    return perm, coded.decode(sk)


_CHECK_FROM = 1 << 13  # below this a sort is one or two blocksort launches: no check first


def _presorted(keys, descending, na_first, copy=False):
    """('sorted' | 'reversed' | None, a copy of keys when sorted and asked for).

    Small inputs are not checked (the check would cost as much as the sort)."""
    if len(keys) < _CHECK_FROM:
        return None, None
    is_sorted_, is_reversed, dup = _check_flags(keys, descending, na_first, copy)
    return ("sorted" if is_sorted_ else "reversed" if is_reversed else None), dup


def _take(x, how):
    return x.copy() if how == "sorted" else cupy.ascontiguousarray(x[::-1])


def sort(keys, values=None, descending=False, na_position="last"):
    """Stable sort of ``keys`` (and of ``values`` alongside, returned as ``(keys, values)``)."""
    K.check_keys(keys)
    K.check_values(keys, values)
    na_first = K.check_na_position(na_position)
    how, dup = _presorted(keys, descending, na_first, copy=True)
    if how:
        k = dup if dup is not None and how == "sorted" else _take(keys, how)
        return k if values is None else (k, _take(values, how))
    if _wide_rows(keys):
        perm, _ = _sorting_permutation(keys, descending, na_first)
        return keys[perm] if values is None else (keys[perm], values[perm])
    coded = _encode(keys)
    order = _order(coded.ctype, descending, na_first)
    if values is None:
        sk, _ = _mergesort(coded, order)
        return coded.decode(sk)
    if values.ndim == 1 and values.dtype.itemsize in _VTYPE:
        v = cupy.ascontiguousarray(values).view(_VDTYPE[values.dtype.itemsize])
        sk, sv = _mergesort(coded, order, values=v)
        return coded.decode(sk), sv.view(values.dtype)
    sk, perm = _mergesort(coded, order, iota=True)
    return coded.decode(sk), values[perm]


def argsort(keys, descending=False, na_position="last"):
    """Positions (int64) that sort ``keys`` stably."""
    K.check_keys(keys)
    na_first = K.check_na_position(na_position)
    n = len(keys)
    how, _ = _presorted(keys, descending, na_first)
    if how == "sorted":
        return cupy.arange(n, dtype=cupy.int64)
    if how == "reversed":
        return cupy.arange(n - 1, -1, -1, dtype=cupy.int64)
    perm, _ = _sorting_permutation(keys, descending, na_first, int64_out=True)
    return perm.astype(cupy.int64, copy=False)


def merge(a, b, a_values=None, b_values=None, descending=False, na_position="last"):
    """Stable merge of two sorted arrays: on equal keys every element of ``a`` comes first.

    With values, returns ``(keys, values)``. One Merge Path partition plus one merge kernel: each
    key is read once and written once.
    """
    na_first = K.check_merge(a, b, a_values, b_values, na_position)
    with_values = a_values is not None
    if len(a) == 0 or len(b) == 0 or _wide_rows(a):
        keys = cupy.concatenate([a, b])
        if len(a) and len(b):  # wide byte keys: a stable sort of the concatenation is the merge
            perm, _ = _sorting_permutation(keys, descending, na_first)
            keys = keys[perm]
            return (keys, cupy.concatenate([a_values, b_values])[perm]) if with_values else keys
        return (keys, cupy.concatenate([a_values, b_values])) if with_values else keys

    ca, cb = _encode(a), _encode(b)
    order = _order(ca.ctype, descending, na_first)
    na, nb = len(a), len(b)
    n = na + nb
    carry = with_values and a_values.ndim == 1 and a_values.dtype == b_values.dtype and a_values.dtype.itemsize in _VTYPE
    if carry:
        va = cupy.ascontiguousarray(a_values).view(_VDTYPE[a_values.dtype.itemsize])
        vb = cupy.ascontiguousarray(b_values).view(_VDTYPE[a_values.dtype.itemsize])
        mode = _CARRY
    elif with_values:
        va = vb = cupy.empty(0, dtype=_index_dtype(n))
        mode = _IOTA
    else:
        va = vb = None
        mode = _NO_VALUES
    vtype = _VTYPE[va.dtype.itemsize] if va is not None else None
    vbytes = va.dtype.itemsize if va is not None else 0
    _, nt_m, vt = C.tuning(ca.size, vbytes)
    tile = nt_m * vt
    tiles = -(-n // tile)
    parts = cupy.empty(tiles + 1, dtype=cupy.int64)
    mp = _search_kernel(order, "dsort::k_merge_path")
    C.launch(
        mp,
        C.search_grid(tiles + 1),
        C.SEARCH_THREADS,
        (ca.data, np.int64(na), cb.data, np.int64(nb), C.NULL, np.int64(tile), np.int64(tiles + 1), parts),
    )
    out = cupy.empty((n, 2) if ca.size == 16 else n, dtype=ca.data.dtype)
    vout = cupy.empty(n, dtype=va.dtype) if va is not None else None
    kern = _sort_kernel(order, ca.size, vtype, f"dsort::k_merge_pair<{order}, {nt_m}, {vt}, {mode},")
    smem = C.align16(tile * ca.size) + tile * vbytes
    args = (
        ca.data,
        va if mode == _CARRY else C.NULL,
        np.int64(na),
        cb.data,
        vb if mode == _CARRY else C.NULL,
        np.int64(nb),
        out,
        vout if vout is not None else C.NULL,
        parts,
    )
    C.launch(kern, tiles, nt_m, args, smem)
    keys = ca.decode(out)
    if mode == _NO_VALUES:
        return keys
    if mode == _CARRY:
        return keys, vout.view(a_values.dtype)
    return keys, cupy.concatenate([a_values, b_values])[vout]


def merge_path(a, b, diagonals, descending=False, na_position="last"):
    """Co-ranks: for each output position ``k`` of the stable merge of sorted ``a`` and ``b``, the
    number of elements taken from ``a`` among the first ``k`` outputs (int64, one per diagonal).

    The co-rank ``i`` (``j = k - i``) is the one with ``a[i-1] <= b[j]`` and ``b[j-1] < a[i]``:
    ties go to ``a``. One thread per diagonal searches along its cross-diagonal.
    """
    K.check_pair(a, b)
    na_first = K.check_na_position(na_position)
    d = cupy.asarray(diagonals, dtype=cupy.int64).reshape(-1)
    m, n = len(a), len(b)
    if d.size and (int(d.min()) < 0 or int(d.max()) > m + n):
        raise ValueError(f"diagonals must lie in [0, {m + n}]")
    out = cupy.empty(d.size, dtype=cupy.int64)
    if K.is_byte_rows(a):
        kern = C.function(_ROWS_SOURCES, _rows_names(), f"dsort::k_rows_merge_path<{_cbool(descending)}>")
        args = (
            cupy.ascontiguousarray(a),
            np.int64(m),
            cupy.ascontiguousarray(b),
            np.int64(n),
            np.int32(a.shape[1]),
            d,
            np.int64(d.size),
            out,
        )
    else:
        kern = _search_kernel(_order(_ctype(a.dtype), descending, na_first), "dsort::k_merge_path")
        args = (cupy.ascontiguousarray(a), np.int64(m), cupy.ascontiguousarray(b), np.int64(n), d, np.int64(0), np.int64(d.size), out)
    C.launch(kern, C.search_grid(d.size), C.SEARCH_THREADS, args)
    return out


def searchsorted(sorted_keys, probes, side="left", descending=False, na_position="last"):
    """Rank probes over a sorted run: for each probe ``v``, how many elements come before ``v`` in
    the order (``side="left"``: strictly before, i.e. "< v") or before or equal to it
    (``side="right"``: "<= v"). int64, one per probe.
    """
    K.check_keys(sorted_keys, "sorted_keys")
    probes = cupy.asarray(probes, dtype=sorted_keys.dtype)
    probes = cupy.ascontiguousarray(probes.reshape(-1, *sorted_keys.shape[1:]))
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    na_first = K.check_na_position(na_position)
    right = _cbool(side == "right")
    n, m = len(sorted_keys), len(probes)
    out = cupy.empty(m, dtype=cupy.int64)
    s = cupy.ascontiguousarray(sorted_keys)
    if K.is_byte_rows(sorted_keys):
        kern = C.function(_ROWS_SOURCES, _rows_names(), f"dsort::k_rows_searchsorted<{_cbool(descending)}, {right}>")
        args = (s, np.int64(n), probes, np.int64(m), np.int32(s.shape[1]), out)
    else:
        order = _order(_ctype(s.dtype), descending, na_first)
        kern = _search_kernel(order, f"dsort::k_searchsorted<{order}, {right}>")
        args = (s, np.int64(n), probes, np.int64(m), out)
    C.launch(kern, C.search_grid(m), C.SEARCH_THREADS, args)
    return out


def is_sorted(keys, descending=False, na_position="last") -> bool:
    """True when ``keys`` is already in the wanted order (ties in any order)."""
    K.check_keys(keys)
    na_first = K.check_na_position(na_position)
    if len(keys) < 2:
        return True
    return _check_flags(keys, descending, na_first)[0]


def to_numpy(x) -> np.ndarray:
    from .device import to_host

    return to_host(x)


def compile_all(jobs: int | None = None) -> int:
    """Build every kernel instantiation this engine can use into CuPy's on-disk kernel cache,
    in parallel processes; a fresh machine (or worker) calls this once instead of compiling on
    first use, one module at a time. Returns the number of kernels built."""
    orders = []
    for ctype in sorted(set(_CTYPE.values())) + [_BYTES16]:
        for descending in (False, True):
            for na_first in (False, True) if ctype in ("float", "double") else (False,):
                orders.append((ctype, _order(ctype, descending, na_first)))
    specs = [(_ROWS_SOURCES, _rows_names())]
    for ctype, order in orders:
        specs.append((_SEARCH_SOURCES, _search_names(order)))
        size = 16 if ctype == _BYTES16 else np.dtype(_NP_OF[ctype]).itemsize
        if size >= 4:
            specs += [(_SORT_SOURCES, _sort_names(order, size, vtype)) for vtype in (None, *_VTYPE.values())]
    return C.compile_all(specs, jobs)
