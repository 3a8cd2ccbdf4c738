"""Per-chunk functions of the distributed sort: what one task does to the chunks it is given.

Like ``dask/array/chunk.py``: plain functions, called by name from :mod:`dsort.collections.graph`,
testable without a cluster. Numerics on chunks go through the chunk's engine (NumPy or CuPy, chosen
from the array type), so one graph runs on CPU and GPU workers alike. A *part* is one sorted chunk
of a run, held as ``(keys, values)`` with ``values`` None when only keys are sorted. What goes to
the coordinator (samples, windows) is small and travels as NumPy.
"""

from __future__ import annotations

import math

import numpy as np

from .. import engine as engines
from . import plan


def local_sort(keys, values, offset, positions, descending, na_position, device=None):
    """Sort consecutive input chunks (``keys``: a list of them; ``values``: theirs, or None) into
    one part. With ``positions``, the values are the elements' global positions (int64, from
    ``offset``, where the first chunk starts), which is how ``argsort`` is carried through the
    merges. With ``device="gpu"``, host (NumPy) chunks are first copied to the worker's GPU,
    where the part then stays for the merges."""
    if device == "gpu":
        keys, values = (
            [on_gpu(k) for k in keys],
            None if values is None else [on_gpu(v) for v in values],
        )
    keys, values = joined(keys), None if values is None else joined(values)
    e = engines.get(keys)
    if positions:
        values = e.arange(offset, offset + len(keys))
    if values is None:
        return e.sort(keys, descending=descending, na_position=na_position), None
    return e.sort(keys, values, descending=descending, na_position=na_position)


def joined(chunks):
    """One array of consecutive chunks (the chunk itself where there is one)."""
    if len(chunks) == 1:
        return chunks[0]
    return engines.get(chunks[0]).concatenate(chunks)


def sample(part, offset, spacing):
    """The run's regular sample that falls in this part: keys at run positions ``0, s, 2s, ...``."""
    keys = part[0]
    start, step = plan.sample_positions(offset, spacing)
    return _own(engines.get(keys).to_numpy(keys[start::step]))


def bounds(samples_by_run, run_sizes, spacing, targets, descending, na_position):
    """Windows ``(lo, hi)`` of every run around every cut, from all runs' samples."""
    samples = [_concat_numpy(parts) for parts in samples_by_run]
    return plan.windows(samples, run_sizes, spacing, targets, descending, na_position)


def window(part, offset, windows, run):
    """This part's share of run ``run``'s window around every cut (NumPy keys, one per cut)."""
    keys = part[0]
    e = engines.get(keys)
    lo, hi = windows
    n = len(keys)
    return [
        _own(e.to_numpy(keys[_clip(a - offset, n) : _clip(b - offset, n)]))
        for a, b in zip(lo[:, run], hi[:, run])
    ]


def splitters(windows_by_run, windows, run_sizes, targets, descending, na_position):
    """Exact cut rows of a merge (see :func:`dsort.core.plan.boundaries`) from the runs' windows."""
    lo, _ = windows
    keys = [
        [_concat_numpy([w[i] for w in parts]) for parts in windows_by_run]
        for i in range(len(targets))
    ]
    cuts = plan.exact_cuts(keys, lo, targets, descending, na_position)
    return plan.boundaries(run_sizes, cuts)


def take(part, offset, rows, out, run):
    """The slice of this part (of run ``run``) that output chunk ``out`` takes."""
    keys, values = part
    a = _clip(rows[out, run] - offset, len(keys))
    b = _clip(rows[out + 1, run] - offset, len(keys))
    return _own(keys[a:b]), None if values is None else _own(values[a:b])


def merge_order(keys_list, descending, na_position):
    """Stable merge of sorted key arrays, ties in list order: ``(merged keys, int64 positions
    into their concatenation)``. Two arrays: one merge-path merge carrying positions (on a GPU).
    More: one stable sort of the concatenation, whose ties keep list order, told the arrays'
    lengths: on the CPU NumPy's timsort merges a few runs (one pass per merge level, in C, no
    gathers between), its SIMD sort takes many; on a GPU it is a few dozen launches where
    pairwise merges take several per pair, faster for many small runs and still for larger ones
    (BENCHMARKS.md)."""
    e = engines.get(keys_list[0])
    if len(keys_list) == 1:
        return keys_list[0], e.arange(0, len(keys_list[0]))
    if e.name == "numpy" or len(keys_list) > 2:
        cat = e.concatenate(keys_list)
        runs = [len(k) for k in keys_list]
        perm = e.argsort(cat, descending=descending, na_position=na_position, runs=runs)
        return engines.take_rows(cat, perm), perm
    starts = plan.offsets([len(k) for k in keys_list]).tolist()
    runs = [(k, e.arange(s, s + len(k))) for k, s in zip(keys_list, starts)]
    while len(runs) > 1:
        merged = [
            e.merge(ka, kb, va, vb, descending=descending, na_position=na_position)
            for (ka, va), (kb, vb) in zip(runs[::2], runs[1::2])
        ]
        if len(runs) % 2:
            merged.append(runs[-1])
        runs = merged
    return runs[0]


# keys a slice on average from which a GPU merges keys alone pairwise (merge_keys)
PAIRWISE_KEYS = 1 << 20


def merge_keys(keys_list, descending, na_position):
    """The stable merge of sorted key arrays, ties in list order: the merged keys alone (no
    positions). On a GPU, slices of :data:`PAIRWISE_KEYS` keys or more on average merge pairwise,
    neighbours first (:func:`merge_runs`: a merge-path merge per pair, each pass reading and
    writing the keys once), where :func:`merge_order`'s stable sort of the concatenation carries a
    position per key; fewer, and on the CPU, :func:`merge_order`'s keys. One array: itself."""
    e = engines.get(keys_list[0])
    if len(keys_list) < 2:
        return keys_list[0]
    if e.name == "numpy" or sum(len(k) for k in keys_list) < PAIRWISE_KEYS * len(keys_list):
        return merge_order(keys_list, descending, na_position)[0]
    return merge_runs([[(k, None)] for k in keys_list], descending, na_position)[0]


def merge_runs(parts_by_run, descending, na_position):
    """Merge slices of several runs into one part: each run's slices are concatenated (they are
    consecutive pieces of one sorted run), then runs merge pairwise, neighbours first, so ties keep
    run order (the stable order).

    Values wider than 8 bytes a row (a record's payload, say) do not ride through the
    ceil(log2 P) pairwise merges: the merges carry int64 positions (:func:`merge_order`), and the
    values are gathered once at the end."""
    runs = [_concat_parts(parts) for parts in parts_by_run]
    nonempty = [r for r in runs if len(r[0])] or runs[:1]
    e = engines.get(nonempty[0][0])
    values = [v for _, v in nonempty]
    wide = (
        len(nonempty) > 1
        and values[0] is not None
        and values[0].itemsize * math.prod(values[0].shape[1:]) > 8
    )
    if wide:
        keys, positions = merge_order([k for k, _ in nonempty], descending, na_position)
        return keys, engines.take_rows(e.concatenate(values), positions)
    while len(nonempty) > 1:
        merged = []
        for (ka, va), (kb, vb) in zip(nonempty[::2], nonempty[1::2]):
            if va is None:
                merged.append(
                    (e.merge(ka, kb, descending=descending, na_position=na_position), None)
                )
            else:
                merged.append(
                    e.merge(ka, kb, va, vb, descending=descending, na_position=na_position)
                )
        if len(nonempty) % 2:
            merged.append(nonempty[-1])
        nonempty = merged
    if any(nonempty[0] is parts[0] for parts in parts_by_run):
        keys, values = nonempty[0]  # nothing was merged or joined: don't alias an input task's data
        return _own(keys), None if values is None else _own(values)
    return nonempty[0]


def keys_of(part, host=False, lo=0, hi=None):
    """An output chunk's keys: rows ``[lo, hi)`` of a merged part (in host memory with ``host``)."""
    return _to_host(part[0][lo:hi]) if host else _own(part[0][lo:hi])


def values_of(part, host=False, lo=0, hi=None):
    """An output chunk's values: rows ``[lo, hi)`` of a merged part (see :func:`keys_of`)."""
    return _to_host(part[1][lo:hi]) if host else _own(part[1][lo:hi])


def on_gpu(array):
    """``array`` on the worker's current GPU (a CuPy array): host arrays are copied there."""
    if isinstance(array, np.ndarray):
        from ..engine import device

        if not device.has_gpu():
            raise RuntimeError("device='gpu' needs CuPy and a GPU on the workers")
        return device.from_host(array)
    return array


def joined_on_gpu(arrays):
    """Host arrays (one dtype) joined into one array on the worker's current GPU, copied once
    (device arrays are joined there)."""
    if not all(isinstance(a, np.ndarray) for a in arrays):
        import cupy

        return cupy.concatenate([on_gpu(a) for a in arrays])
    from ..engine import device

    if not device.has_gpu():
        raise RuntimeError("device='gpu' needs CuPy and a GPU on the workers")
    return device.from_host_joined(arrays)


def _to_host(array):
    """A new NumPy array of a part's data (the sort ran on a GPU for host chunks)."""
    if isinstance(array, np.ndarray):
        return _own(array)
    from ..engine import device

    return device.to_host(array)


def _own(array):
    """A copy, so no two task results share a buffer. Dask counts, spills and frees each result on
    its own: a slice or alias would pin its whole chunk in (device) memory after the chunk spilled,
    unseen by the memory accounting, and spilling would free nothing."""
    return array.copy()


def _clip(i, n):
    return int(min(max(i, 0), n))


def _concat_parts(parts):
    if len(parts) == 1:
        return parts[0]
    e = engines.get(parts[0][0])
    keys = e.concatenate([p[0] for p in parts])
    values = None if parts[0][1] is None else e.concatenate([p[1] for p in parts])
    return keys, values


def _concat_numpy(arrays):
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)
