"""The exact cuts of every output range in every run: from the runs' regular samples, a window of
each run around each cut (:func:`dsort.core.plan.windows`), then the few keys inside the windows
read from the runs (:func:`dsort.core.plan.exact_cuts`). Only samples and windows move.

* :func:`cut_runs` – every cut, in one task (or only the windows: :class:`Windowed`, which the
  merges settle themselves, :func:`settled_slices`, each reading its slices widened to the
  windows at their ends);
* :func:`read_windows` – the keys of every run inside its windows;
* :func:`range_starts` – the first row of every output range.
"""

from __future__ import annotations

import logging
import threading

import numpy as np

from .. import engine as engines
from ..engine import device as dev
from . import chunk, plan
from . import runs as R
from .streams import Stopwatch, on_stream, sync

logger = logging.getLogger(__name__)


class Windowed:
    """Cuts the merges settle themselves (:func:`settled_slices`): every interior cut's window in
    every run (``lo``, ``hi``: ``(ranges - 1, runs)``), its target rank, and the runs' sizes. Each
    merge reads the windows of its own two cuts with its slices, where one cuts task would read
    every window of every run: on several GPUs its first mapping of each other process's run, tens
    of milliseconds on the sort's critical path (BENCHMARKS.md section 7)."""

    def __init__(self, sizes, lo, hi, targets):
        self.sizes = np.asarray(sizes, np.int64)
        self.lo, self.hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        self.targets = np.asarray(targets, np.int64)


def range_starts(bounds) -> np.ndarray:
    """The first row of every output range in the merged output, then the total (``ranges + 1``
    of them), from the exact boundaries or a :class:`Windowed` (the cuts' targets are exact)."""
    if isinstance(bounds, Windowed):
        return np.concatenate([[0], bounds.targets, [bounds.sizes.sum()]]).astype(np.int64)
    return np.asarray(bounds, np.int64).sum(axis=1)


def cut_runs(job, runs, watch: Stopwatch | None = None, settle_later: bool = False):
    """The exact cut rows of every output range in every run (``(ranges + 1, runs)`` int64), and
    the runs' handles without their samples (what the merges need), for ``job`` (a
    :class:`~dsort.core.filesort.RunJob`); ``watch`` times its stages. ``settle_later`` (the merges
    read through :func:`~dsort.core.filesort.merge_rows`):
    where every worker reads the runs in place (one host's; not ``job.store.local``), only the
    windows of the cuts (a :class:`Windowed`, in place of the rows), each merge settling its own."""
    watch = watch or Stopwatch()
    sizes = [r.rows for r in runs]
    targets = plan.interior_targets(job.range_rows)
    store = R.store(job.store)
    if len(runs) > 1 and len(targets):
        samples = _samples(job, runs)
        watch.lap("samples")
        lo, hi = plan.windows(samples, sizes, job.spacing, targets, job.descending, job.na_position)
        watch.lap("windows")
        if settle_later and not job.store.local:
            return Windowed(sizes, lo, hi, targets), [R.bare(r) for r in runs]
        # a cut task run again (its result lost with a worker) may find runs of a worker that is
        # gone
        window_keys = read_windows(
            store, job.layout, runs, lo, hi, lambda q: job.remake(q, job.gpu_for(q))
        )
        watch.lap("read windows")
        cuts = plan.exact_cuts(window_keys, lo, targets, job.descending, job.na_position)
        watch.lap("exact cuts")
    else:  # one run: its cuts are the targets themselves
        cuts = (
            np.asarray(targets, np.int64).reshape(-1, 1)
            if runs
            else np.zeros((len(targets), 0), np.int64)
        )
    return plan.boundaries(sizes, cuts), [R.bare(r) for r in runs]


# from this many samples on, the cuts rank them on a GPU whose ranking this process has run
GPU_RANKED_SAMPLES = 1 << 16
GPU_RANKED_SAMPLES_COLD = 1 << 20  # and from this many on a GPU whose ranking it has not


def _samples(job, runs) -> list:
    """The runs' samples, copied to this worker's GPU where the job sorts on GPUs and they are not
    few: the samples of 2^28 keys in 16 runs keep the cuts task busy on the host, every GPU idle
    meanwhile, for a large share of a sort on four GPUs, and a GPU ranks them many times faster
    (BENCHMARKS.md section 7). Fewer stay on the host, whose ranking then costs less than the GPU's
    kernel launches. A process's first ranking on the GPU loads its CuPy kernels (slow where
    ``dsort build-kernels`` has not cached them, and not free where it has): below
    :data:`GPU_RANKED_SAMPLES_COLD` that first one is done on the host while a thread loads them
    (:func:`warm_ranking`), and the next sorts rank on the GPU."""
    samples = [r.sample for r in runs]
    gpu = getattr(job, "gpu", False) or getattr(job, "gpus", ())
    n = sum(len(x) for x in samples)
    if not gpu or n < GPU_RANKED_SAMPLES or not dev.has_gpu():
        return samples
    first = next((x for x in samples if len(x)), None)
    kind = (np.asarray(first).dtype.str, bool(job.descending), job.na_position)
    if n < GPU_RANKED_SAMPLES_COLD and not warm_ranking(kind, first, len(samples), job.spacing):
        return samples
    on = chunk.on_gpu(np.concatenate(samples))  # one copy, not one per run
    return dev.xp_of(on).split(on, np.cumsum([len(x) for x in samples])[:-1].tolist())


# (dtype, descending, na_position) -> threading.Event, set once this process ranked such samples on
# a GPU
_ranking_warm: dict = {}
_ranking_lock = threading.Lock()


def warm_ranking(kind, sample, runs: int, spacing: int) -> bool:
    """Whether this process has ranked samples of ``kind`` on its GPU (its kernels loaded); where
    not, a thread of its own does it now on a few of ``sample`` (the caller ranks on the host)."""
    with _ranking_lock:
        done = _ranking_warm.get(kind)
        if done is None:
            done = _ranking_warm[kind] = threading.Event()
            few = np.array(sample[:64])
            device = dev.current_device()

            def warm():
                try:
                    with on_stream(device):
                        on = chunk.on_gpu(few)
                        plan.windows(
                            [on] * runs,
                            [len(few) * spacing] * runs,
                            spacing,
                            [len(few) * spacing],
                            kind[1],
                            kind[2],
                        )
                    done.set()
                except Exception:  # noqa: BLE001 (a warm-up: the host keeps ranking)
                    logger.debug("warming the GPU ranking of samples failed", exc_info=True)

            threading.Thread(target=warm, name="dsort-warm-ranking", daemon=True).start()
    return done.is_set()


def read_windows(store, layout, runs, lo, hi, recover=None):
    """The keys of every run inside its window around every cut: run ``q``'s keys ``[lo[t, q],
    hi[t, q])`` for every cut ``t`` (NumPy). With a ``layout``, a :class:`~dsort.core.plan.Windows`
    (all keys joined, cut by cut): each run's windows gathered at once where this process holds
    the run (:meth:`~dsort.core.runs.RunStore.gather`), the others' read in one batch (runs of a
    worker that is gone made again by ``recover``, as the merges do). ``layout`` None: the runs'
    rows are their keys (a dataframe's, each run at its own width), ``[t][q]`` lists."""
    if layout is None:
        items = [
            (t, q) for t in range(lo.shape[0]) for q in range(len(runs)) if hi[t, q] > lo[t, q]
        ]
        got = store.read_many([(runs[q], lo[t, q], hi[t, q]) for t, q in items], recover=recover)
        out = [
            [np.empty((0, r.row_bytes or store.config.row_bytes), np.uint8) for r in runs]
            for _ in range(lo.shape[0])
        ]
        for (t, q), k in zip(items, got):
            out[t][q] = k
        return out
    kb = layout.key_bytes
    lengths = np.maximum(np.asarray(hi, np.int64) - np.asarray(lo, np.int64), 0)
    per_run = [store.gather(r, lo[:, q], hi[:, q], kb) for q, r in enumerate(runs)]
    rest = [
        (q, t)
        for q, g in enumerate(per_run)
        if g is None
        for t in range(lo.shape[0])
        if lengths[t, q]
    ]
    got = (
        store.read_many([(runs[q], lo[t, q], hi[t, q]) for q, t in rest], recover=recover)
        if rest
        else []
    )
    at = 0
    for q, g in enumerate(per_run):
        if g is None:
            n = int(np.count_nonzero(lengths[:, q]))
            parts = [np.ascontiguousarray(x[:, :kb]) for x in got[at : at + n]]
            per_run[q] = np.concatenate(parts) if parts else np.empty((0, kb), np.uint8)
            at += n
    return _key_windows(layout, [np.ascontiguousarray(g) for g in per_run], lengths)


def _key_windows(layout, per_run, lengths):
    """The :class:`~dsort.core.plan.Windows` of each run's windows' key bytes (``per_run[q]``: run
    ``q``'s, joined cut by cut, C-contiguous) as ``layout``'s keys."""
    kb = layout.key_bytes
    # the key bytes gathered: whole rows of this layout
    keys_of = R.Layout(kb, kb, layout.dtype).keys
    return plan.Windows.from_runs([keys_of(g) for g in per_run], lengths)


def settled_slices(job, cut, t: int, gpu=None, recover=None, watch=None) -> tuple:
    """Output range ``t``'s slices of every run where the merge settles its cuts (``cut[0]`` a
    :class:`Windowed`): each run read once, from its window around the range's first cut to the one
    around its last (the slice and the windows at its ends: a few more rows), onto ``gpu`` or into
    host memory; the two cuts made exact from the windows' keys (copied out together), as
    :func:`cut_runs` makes all; the slices cut to them. ``(the range's cut: boundaries (2, runs),
    the items read (run, lo, hi), the slices: one per run with rows in the range)``. ``watch``: its
    stages "read runs", "gather windows" (their keys to the host) and "settle cuts" timed."""
    w, runs = cut[0], cut[1]
    inner = [i for i in (t - 1, t) if 0 <= i < len(w.targets)]
    lo, hi = w.lo[inner], w.hi[inner]
    first = lo.min(axis=0) if t > 0 else np.zeros_like(w.sizes)
    end = hi.max(axis=0) if t < len(w.targets) else w.sizes
    items = [(run, first[q], end[q]) for q, run in enumerate(runs) if end[q] > first[q]]
    got = dict(
        zip(
            [q for q in range(len(runs)) if end[q] > first[q]],
            R.store(job.store).read_many(items, gpu, recover),
        )
    )
    if watch is not None:
        sync(gpu)
        watch.lap("read runs")
    lengths = np.maximum(hi - lo, 0)
    kb = job.layout.key_bytes
    parts = [
        got[q][lo[i, q] - first[q] : hi[i, q] - first[q], :kb]
        for q in range(len(runs))
        for i in range(len(inner))
        if lengths[i, q]
    ]
    joined = (
        dev.to_host(engines.get(parts[0]).concatenate(parts))
        if parts
        else np.empty((0, kb), np.uint8)
    )
    if watch is not None:
        watch.lap("gather windows")
    ends = np.cumsum(lengths.sum(axis=0))
    windows = _key_windows(
        job.layout, [joined[e - n : e] for e, n in zip(ends, lengths.sum(axis=0))], lengths
    )
    exact = plan.exact_cuts(windows, lo, w.targets[inner], job.descending, job.na_position)
    lower = np.zeros_like(w.sizes) if t == 0 else exact[0]
    upper = w.sizes if t == len(w.targets) else exact[-1]
    slices = [
        got[q][lower[q] - first[q] : upper[q] - first[q]]
        for q in range(len(runs))
        if upper[q] > lower[q]
    ]
    if watch is not None:
        watch.lap("settle cuts")
    return (np.stack([lower, upper]), *cut[1:]), items, slices
