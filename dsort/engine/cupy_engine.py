"""The CuPy engine: one array on one CUDA device, sorted by dsort's own merge-path kernels.

Same functions and the same order as :mod:`dsort.engine.numpy_engine` (see
:mod:`dsort.engine.keys`): stable in both directions, NaN last (or first), ``-0.0 == 0.0``, byte
keys as unsigned bytes (spelled as 2-D ``uint8`` rows: CuPy has no ``S``/``V`` dtypes).

How the kernels see the keys: 4- and 8-byte integers and floats as they are; 1- and 2-byte
integers and ``bool`` widened to ``int32``; byte rows packed big-endian into ``uint64`` (width
<= 8) or 16-byte words (width <= 16); wider byte keys sorted by stable passes over 16-byte slices,
last slice first. The order (direction, NaN policy) is a comparator template, never a transform
of the data, so every bit of every key (NaN payloads, -0.0) comes back as it went in.

Sorting is a mergesort (MGPU's design, :mod:`._mergesort`). Input that is already sorted, or
strictly sorted in reverse (whose reversal is its stable sort), is detected in one read and
copied. Values of 4 or 8 bytes ride along with the keys; any other values (other itemsizes, rows)
are gathered once through the sorting permutation.

This module is the engine's API (argument checks, the choice of path); the host drivers are
:mod:`._mergesort`, :mod:`._merge` and :mod:`._search`, the key coding :mod:`._codes`, and every
kernel they launch is named, with its tile and shared memory, by the plans of :mod:`._kernels`.
"""

from __future__ import annotations

import cupy
import numpy as np

from . import _codes, _merge, _search
from . import _cuda as C
from . import _kernels as P
from . import keys as K
from ._mergesort import mergesort, sorting_permutation

name = "cupy"
xp = cupy


_CHECK_FROM = 1 << 13  # below this a sort is one or two blocksort launches: no check first


def _presorted(keys, descending, na_first, copy=False):
    """('sorted' | 'reversed' | None, a copy of keys when sorted and asked for).

    Small inputs are not checked (the check would cost as much as the sort)."""
    if len(keys) < _CHECK_FROM:
        return None, None
    is_sorted_, is_reversed, dup = _search.check_flags(keys, descending, na_first, copy)
    return ("sorted" if is_sorted_ else "reversed" if is_reversed else None), dup


def _take(x, how):
    return x.copy() if how == "sorted" else cupy.ascontiguousarray(x[::-1])


def sort(keys, values=None, descending=False, na_position="last"):
    """Stable sort of ``keys`` (and of ``values`` alongside, returned as ``(keys, values)``)."""
    na_first = K.check_sort(keys, values, na_position)
    how, dup = _presorted(keys, descending, na_first, copy=True)
    if how:
        k = dup if dup is not None and how == "sorted" else _take(keys, how)
        return k if values is None else (k, _take(values, how))
    if _codes.wide_rows(keys):
        perm, _ = sorting_permutation(keys, descending, na_first)
        return keys[perm] if values is None else (keys[perm], values[perm])
    coded = _codes.encode(keys)
    order = coded.order(descending, na_first)
    if values is None:
        sk, _ = mergesort(coded, order)
        return coded.decode(sk)
    words = _codes.value_words(values)
    if words is not None:
        sk, sv = mergesort(coded, order, values=words)
        return coded.decode(sk), sv.view(values.dtype)
    sk, perm = mergesort(coded, order, iota=True)
    return coded.decode(sk), values[perm]


def argsort(keys, descending=False, na_position="last", runs=None):
    """Positions (int64) that sort ``keys`` stably (``runs``, the NumPy engine's hint, unused:
    sorted input is found by :func:`_presorted`)."""
    na_first = K.check_one(keys, na_position)
    n = len(keys)
    how, _ = _presorted(keys, descending, na_first)
    if how == "sorted":
        return arange(0, n)
    if how == "reversed":
        return arange(n - 1, -1, -1)
    perm, _ = sorting_permutation(keys, descending, na_first, int64_out=True)
    return perm.astype(cupy.int64, copy=False)


def merge(a, b, a_values=None, b_values=None, descending=False, na_position="last"):
    """Stable merge of two sorted arrays: on equal keys every element of ``a`` comes first.

    With values, returns ``(keys, values)``. One Merge Path partition plus one merge kernel: each
    key is read once and written once.
    """
    na_first = K.check_merge(a, b, a_values, b_values, na_position)
    if len(a) and len(b) and not _codes.wide_rows(a):
        return _merge.merge(a, b, a_values, b_values, descending, na_first)
    keys = concatenate([a, b])
    values = concatenate([a_values, b_values]) if a_values is not None else None
    if len(a) and len(b):  # wide byte keys: a stable sort of the concatenation is the merge
        perm, _ = sorting_permutation(keys, descending, na_first)
        keys, values = (
            take_rows(keys, perm),
            (take_rows(values, perm) if values is not None else None),
        )
    return keys if values is None else (keys, values)


def merge_path(a, b, diagonals, descending=False, na_position="last"):
    """Co-ranks: for each output position ``k`` of the stable merge of sorted ``a`` and ``b``, the
    number of elements taken from ``a`` among the first ``k`` outputs (int64, one per diagonal).

    The co-rank ``i`` (``j = k - i``) is the one with ``a[i-1] <= b[j]`` and ``b[j-1] < a[i]``:
    ties go to ``a``. One thread per diagonal searches along its cross-diagonal.
    """
    d = cupy.asarray(diagonals, dtype=cupy.int64).reshape(-1)
    na_first = K.check_path(a, b, d, na_position)
    return _search.merge_path(a, b, d, descending, na_first)


def searchsorted(sorted_keys, probes, side="left", descending=False, na_position="last"):
    """Rank probes over a sorted run: for each probe ``v``, how many elements come before ``v`` in
    the order (``side="left"``: strictly before, i.e. "< v") or before or equal to it
    (``side="right"``: "<= v"). int64, one per probe.
    """
    na_first = K.check_search(sorted_keys, side, na_position)
    probes = cupy.asarray(probes, dtype=sorted_keys.dtype)
    probes = cupy.ascontiguousarray(probes.reshape(-1, *sorted_keys.shape[1:]))
    return _search.searchsorted(sorted_keys, probes, side == "right", descending, na_first)


def is_sorted(keys, descending=False, na_position="last") -> bool:
    """True when ``keys`` is already in the wanted order (ties in any order)."""
    na_first = K.check_one(keys, na_position)
    if len(keys) < 2:
        return True
    return _search.check_flags(keys, descending, na_first)[0]


def contiguous(x):
    """``x`` C-contiguous (itself where it is), copied by dsort's gather kernel."""
    return _codes.contiguous(x)


def concatenate(arrays):
    """Arrays joined along axis 0: device-to-device copies, no CuPy kernel."""
    return _codes.concatenate(arrays)


def arange(start: int, stop: int, step: int = 1):
    """int64 positions as ``numpy.arange``, by dsort's kernel."""
    return _codes.iota(max(0, -(-(stop - start) // step)), start, step)


def take_rows(values, positions):
    """``values[positions]`` along axis 0 (non-negative positions), by dsort's gather kernel."""
    return _codes.gather_rows(values, positions)


def to_numpy(x) -> np.ndarray:
    from .device import to_host

    return to_host(x)


def compile_all(jobs: int | None = None) -> int:
    """Build every kernel instantiation this engine can use into CuPy's on-disk kernel cache,
    in parallel processes; a fresh machine (or worker) calls this once instead of compiling on
    first use, one module at a time. Returns the number of kernels built."""
    return C.compile_all(P.modules(C.target()), jobs)
