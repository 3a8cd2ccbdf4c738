"""Per-partition functions of the dataframe sort: what one task does (as :mod:`dsort.core.chunk` is
for arrays). Plain functions on pandas frames, testable without a cluster.

A *sorted part* is one input partition sorted by its keys (:class:`Sorted`: its rows and their
keys, in order: byte rows encoded at the partition's own string widths, so no pass over the data
comes first; or, for one column of NumPy numbers sorted on the host, one uint64 word per row,
:meth:`dsort.core.frame_keys.KeySpec.words`, which NumPy sorts as numbers, with no bytes to pack).
The exact cuts come from the keys alone, as for arrays: a regular sample of every part, windows
around every cut, the keys inside them (:mod:`dsort.core.plan`); every key that travels is first
brought to the common widths (:func:`dsort.core.frame_keys.widen`). Each part's kinds (the types of
its object columns' values) travel with its widths, and the plan refuses parts whose keys do not
compare (:func:`dsort.core.frame_keys.join_kinds`). Each output partition then takes its slice of
every part and merges them by their keys: stable, ties in input order.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
from .lazy import pd

from . import chunk, frame_backend, plan
from .. import engine as engines
from ..engine import device as dev
from ..engine import pools
from ..engine import host
from .frame_keys import KeySpec, common_widths, join_kinds, widen
from .frame_wire import unwire, wire


@dataclass
class Sorted:
    """One input partition sorted: its rows, and their keys (NumPy byte rows, or words) in the same
    order; the keys' string widths and kinds (:meth:`dsort.core.frame_keys.KeySpec.encode_part`)."""

    frame: pd.DataFrame
    keys: np.ndarray
    widths: tuple
    kinds: tuple

    def __sizeof__(self) -> int:
        """Its rows' and keys' bytes, as dask measures a frame: the scheduler places the tasks
        that read a sorted part (its sample, windows and slices) by the bytes they would move; a
        size of a few bytes would let it move whole parts between workers instead."""
        return frame_bytes(self.frame) + self.keys.nbytes + object.__sizeof__(self)

    # moved or spilled: arrays in object columns as Arrow (dsort.core.frame_wire)
    def __reduce__(self):
        return (_sorted_again, (wire(self.frame), self.keys, self.widths, self.kinds))


def frame_bytes(frame) -> int:
    """About the bytes of ``frame`` (pandas or cudf), counted as dask's ``sizeof`` counts a frame:
    its columns' and index's buffers, and the Python objects of its object columns from a sample
    of 100 values each, scaled to the column."""
    import sys

    size = int(frame.memory_usage(index=True, deep=False).sum())
    for _, col in frame.items():
        n = len(col)
        if n and col.dtype == object and isinstance(col, pd.Series):
            at = np.linspace(0, n - 1, min(n, 100)).astype(np.int64)
            size += sum(sys.getsizeof(v) for v in col.iloc[at].tolist()) * n // len(at)
    return max(size, 1200)


def _sorted_again(frame, keys, widths, kinds) -> Sorted:
    return Sorted(unwire(frame), keys, widths, kinds)


@dataclass(frozen=True)
class Plan:
    """What the cuts and merges need, once the parts are sorted: their sizes, the common string
    widths, the sample spacing, the output partitions' sizes (balanced to within one row) and the
    windows ``(lo, hi)`` of every part around every cut (:func:`dsort.core.plan.windows`), from the
    samples."""

    sizes: tuple
    widths: tuple
    spacing: int
    out_sizes: tuple
    windows: tuple | None = field(default=None, compare=False)
    starts: tuple | None = None  # the first output of every merge group (None: each output its own)

    @property
    def group_sizes(self) -> tuple:
        """Rows of every merge group (consecutive outputs merged as one)."""
        return (
            tuple(self.out_sizes)
            if self.starts is None
            else plan.group_sums(self.out_sizes, self.starts)
        )

    @property
    def targets(self):
        """The ranks where the merge groups meet: the cuts."""
        return plan.interior_targets(self.group_sizes)


def _argsort(keys, device):
    if device == "gpu":
        with pools.own_pool():  # where cudf made RMM's unpooled allocator CuPy's: see own_pool
            g = chunk.on_gpu(keys)
            return dev.to_host(engines.get(g).argsort(g))
    return engines.get(keys).argsort(keys)


def sort_part(parts, spec: KeySpec, widths=None, device=None, words=False) -> Sorted:
    """Consecutive partitions ``parts`` (a list of frames, or one frame) sorted together, stably
    by their keys (on the worker's GPU with ``device="gpu"``: the keys go there and the order
    comes back; the rows stay on the host). ``words``: keyed by words, not byte rows, where the
    spec allows (:attr:`KeySpec.word`) and the sort is on the host. String keys of several
    partitions are brought to their common widths, and refused where their kinds do not compare
    (:func:`dsort.core.frame_keys.join_kinds`). cudf partitions: their keys made from their key
    columns (:func:`dsort.core.frame_cudf.key_frame`), their rows gathered on the GPU."""
    # partitions that travelled here (wired where they were made)
    frames = [unwire(f) for f in _listed(parts)]
    backend = frame_backend.of(frames[0])
    with host.pooled():
        if words and spec.word and device is None and backend.ON_HOST:
            # NumPy numbers: no kinds
            keys, widths, kinds = _joined([spec.words(f) for f in frames]), (0,), ()
        else:
            encoded = [spec.encode_part(backend.key_frame(f, spec.by), widths) for f in frames]
            kinds = join_kinds(spec, [k for _, _, k in encoded])
            widths = common_widths([w for _, w, _ in encoded])
            keys = _joined([widen(spec, k, w, widths) for k, w, _ in encoded])
        order = _argsort(keys, device)
        return Sorted(backend.gather(frames, order), engines.take_rows(keys, order), widths, kinds)


def _joined(keys):
    return keys[0] if len(keys) == 1 else host.concatenate(keys)


def gather(frames, order, index=True):
    """``concat(frames)`` at rows ``order`` (one frame: ``frame`` at them), by the frames' backend:
    :func:`dsort.core.frame_pandas.gather` (host memory) or :func:`dsort.core.frame_cudf.gather`
    (on the GPU). ``index=False``: the result's index is a plain range (the caller sets its own)."""
    frames = _listed(frames)
    return frame_backend.of(frames[0]).gather(frames, order, index)


def _listed(frames) -> list:
    """``frames`` as a list: one frame (or a wired one) alone, or several."""
    return [frames] if frame_backend.is_frame(frames) else list(frames)


def info(part: Sorted, outputs: int) -> tuple:
    """``(rows, string widths, spacing, sample, kinds)``: what the plan needs of a part. The sample
    is its keys at rows 0, s, 2s, ... (at its own widths), s its own spacing for ``outputs``
    outputs (:func:`dsort.core.plan.part_spacing`): the plan takes the windows from the samples at
    once."""
    n = len(part.keys)
    s = plan.part_spacing(n, max(outputs - 1, 1))
    return n, part.widths, s, np.ascontiguousarray(part.keys[::s]), part.kinds


def make_plan(spec: KeySpec, partitions: int, starts, *infos) -> Plan:
    """The plan of ``partitions`` outputs, merged in groups that begin at outputs ``starts`` (None:
    one group each), from the parts' :func:`info`: the common spacing is the largest of theirs (a
    multiple of each), and every sample is cut to it and brought to the common widths before the
    windows are found. Parts whose keys do not compare are refused first (their kinds:
    :func:`dsort.core.frame_keys.join_kinds`)."""
    join_kinds(spec, [k for *_, k in infos])
    sizes = tuple(int(n) for n, *_ in infos)
    widths = common_widths([w for _, w, *_ in infos])
    spacing = max((s for n, _, s, *_ in infos if n), default=1)
    p = Plan(
        sizes,
        widths,
        spacing,
        plan.balanced(sum(sizes), partitions),
        starts=None if starts is None else tuple(starts),
    )
    return replace(
        p,
        windows=bounds(p, *[widen(spec, x[:: spacing // s], w, widths) for _, w, s, x, _ in infos]),
    )


def part_keys(spec, part: Sorted, p: Plan, lo=0, hi=None, step=1):
    return widen(spec, np.ascontiguousarray(part.keys[lo:hi:step]), part.widths, p.widths)


def key_bytes(keys) -> bytes:
    """Keys (byte rows, or words) as bytes in the same order (``memcmp``): words big-endian."""
    return keys.astype(">u8").tobytes() if keys.ndim == 1 else keys.tobytes()


def from_key_bytes(blobs, like) -> np.ndarray:
    """The keys of :func:`key_bytes` ``blobs`` (one key each), of the kind of the keys ``like``."""
    joined = b"".join(blobs)
    if like.ndim == 1:
        return np.frombuffer(joined, ">u8").astype(np.uint64)
    return np.frombuffer(joined, np.uint8).reshape(len(blobs), like.shape[1])


def bounds(p: Plan, *samples):
    """Windows ``(lo, hi)`` of every part around every cut (:func:`dsort.core.plan.windows`)."""
    return plan.windows(list(samples), p.sizes, p.spacing, p.targets)


def window(spec: KeySpec, part: Sorted, p: Plan, q: int) -> list:
    """Part ``q``'s keys inside its window around every cut."""
    lo, hi = p.windows
    return [part_keys(spec, part, p, a, b) for a, b in zip(lo[:, q], hi[:, q])]


def cuts(p: Plan, *window_keys):
    """The exact cut rows ``(outputs + 1, parts)``: output ``t`` takes rows ``[b[t, q], b[t + 1,
    q])`` of part ``q``."""
    if len(p.sizes) < 2 or not len(p.targets):  # one part: its cuts are the targets themselves
        exact = np.asarray(p.targets, np.int64).reshape(-1, len(p.sizes))
    else:
        exact = plan.exact_cuts(
            [[w[t] for w in window_keys] for t in range(len(p.targets))], p.windows[0], p.targets
        )
    return plan.boundaries(p.sizes, exact)


def output_sizes(p: Plan) -> tuple:
    """Rows of every output partition."""
    return tuple(p.out_sizes)


def piece(frame: pd.DataFrame, sizes, t: int, first: int) -> pd.DataFrame:
    """Output partition ``t``: its rows of its merge group's frame, whose first output is ``first``
    (``sizes``: every output's rows). A copy: a view would keep the group's frame alive unseen."""
    lo = int(sum(sizes[first:t]))
    return unwire(frame).iloc[lo : lo + int(sizes[t])].copy()


def wired_result(func, *args):
    """``func(*args)`` ready to travel (:func:`~dsort.core.frame_wire.wire`): a merge group's frame,
    which the tasks of its output partitions (:func:`piece`) may take on other workers."""
    return wire(func(*args))


def take(spec: KeySpec, part: Sorted, p: Plan, cut, t: int, q: int):
    """Output ``t``'s slice of part ``q``: ``(rows, keys at the common widths)``."""
    a, b = int(cut[t, q]), int(cut[t + 1, q])
    # it may travel: arrays in object columns as Arrow
    return wire(part.frame.iloc[a:b]), part_keys(spec, part, p, a, b)


def sliced(*pieces) -> int:
    """A part's marker: every one of its slices is made (their count). The merges wait for every
    part's marker, so no worker runs a merge while another still waits for its slices."""
    return len(pieces)


def merge_order(keys, device):
    """The order (host positions into the keys joined) that merges sorted ``keys`` (byte rows or
    words, each sorted), ties kept in slice order: merge-path merges on the GPU with
    ``device="gpu"``, else one stable sort of the sorted slices, told their lengths (NumPy's timsort
    merges a few, its SIMD sort takes many: :func:`dsort.engine.numpy_engine.argsort`)."""
    if device == "gpu":
        with pools.own_pool():
            return dev.to_host(chunk.merge_order([chunk.on_gpu(k) for k in keys], False, "last")[1])
    runs = [len(k) for k in keys]
    return engines.get(keys[0]).argsort(host.concatenate(keys), runs=runs)


def concat(frames):
    """Frames end to end, pandas' or cudf's (one: itself)."""
    frames = list(frames)
    return frame_backend.of(frames[0]).concat(frames)


def merge_after(ready, meta, cut, t, ignore_index, device, *pieces) -> pd.DataFrame:
    """:func:`merge`, once the markers ``ready`` (:func:`sliced`) are there."""
    return merge(meta, cut, t, ignore_index, device, *pieces)


def merge(meta: pd.DataFrame, cut, t: int, ignore_index: bool, device, *pieces) -> pd.DataFrame:
    """Output partition ``t``: its slices of every part (in part order) merged by their keys; with
    ``ignore_index`` its index is its rows' positions in the whole result."""
    with host.pooled():
        return _merge(meta, cut, t, ignore_index, device, *pieces)


def _merge(meta, cut, t, ignore_index, device, *pieces) -> pd.DataFrame:
    pieces = [(unwire(f), k) for f, k in pieces]
    given, pieces = pieces, [(f, k) for f, k in pieces if len(f)]
    # an empty slice of the data, not the meta: dask may have given the meta other dtypes
    if not pieces:
        out = given[0][0] if given else meta.iloc[:0]
    elif len(pieces) == 1:
        out = pieces[0][0]
    else:
        out = gather(
            [f for f, _ in pieces],
            merge_order([k for _, k in pieces], device),
            index=not ignore_index,
        )
    backend = frame_backend.of(out)
    if ignore_index:
        out = backend.with_positions(out, int(cut[t].sum()))
    return backend.like(out, meta)  # object columns carried as Arrow: back
