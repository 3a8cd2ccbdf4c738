"""The external sort of fixed-width rows in files (records, ``.npy``): runs, exact cuts, merges
written straight into the output.

Three phases, one dask task graph (built by :func:`dsort.io._fixed.graph` for the file sort):

``dsort-run``    one task per input block: read the block (into a reused page-locked buffer on a
                 GPU), sort it on its engine (records: the keys with their row positions, then
                 every row moved once), keep the sorted run in the run store
                 (:mod:`dsort.core.runs`: GPU, host memory or the job's directory) and return a
                 small :class:`~dsort.core.runs.Run` handle with the run's regular sample, plus the
                 block's checksum summary.
``dsort-cuts``   one task: the exact cut of every output range in every run, from the samples
                 (:func:`dsort.core.plan.windows`) and then the few keys inside each window read
                 from the runs (:func:`dsort.core.plan.exact_cuts`). No bulk data moves.
``dsort-merge``  one task per output range: read its slice of every run, merge the slices (merge
                 path on a GPU), and write the rows at the range's exact byte offset of the
                 pre-allocated output; writeback to disk starts at once. Returns the range's
                 summary (count, checksum, order).

More runs than one pass merges (``dsort.file-sort.max-runs``): a first pass before the cuts,

``dsort-group-cuts``   per group of consecutive runs (``Job.groups``), the exact cuts of the
                       group's own ranges (``Job.group_ranges``) in its runs;
``dsort-group-merge``  per range of a group: its slices of the group's runs merged and kept as one
                       piece of the group's chained run (:class:`~dsort.core.runs.Chain`), in the
                       run store like any run, with its part of the chain's regular sample;
``dsort-chain``        per group: the chain's handle (its pieces, in order); the cuts and merges
                       above then take the chains for runs. A piece lost with its worker is made
                       again from its group's input blocks.

Every task's memory is bounded by the block and range sizes the caller chose from the limits,
never by the data's size. Ties keep input order (blocks are runs in input order, and the merge
breaks ties by run), so the output equals a stable sort of the whole input.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import pickle
import threading
import uuid
from dataclasses import dataclass, fields, replace

import numpy as np

from . import valsort
from . import chunk, diskio, plan
from .. import engine as engines
from . import runs as R
from . import cuts
from .cuts import Windowed, cut_runs, settled_slices
from .streams import Stopwatch, on_stream, sync
from ..engine import device as dev

logger = logging.getLogger(__name__)


class FirstPass:
    """A job's first merge pass, where its runs are more than one pass merges: its ``groups`` of
    consecutive runs (``((first run, end run), ...)``, () for one pass), each cut into its own
    ``group_ranges`` and merged into the pieces of one chained run; pieces are kept in the run
    store after the runs (from index ``first_piece`` on). For the jobs' dataclasses, which hold
    those attributes."""

    def __dask_tokenize__(self):
        """The job's fields hashed once per object: every task of a graph holds the same job, and
        dask hashes each task's arguments when the graph is sent (field by field, that cost grew
        with tasks times blocks: BENCHMARKS.md section 4)."""
        token = self.__dict__.get("_token")
        if token is None:
            state = tuple(getattr(self, f.name) for f in fields(self))
            try:
                token = hashlib.sha256(
                    pickle.dumps((type(self).__qualname__, state), protocol=5)
                ).hexdigest()
            # a field that does not pickle: this object's own
            except (pickle.PicklingError, TypeError, AttributeError):
                token = uuid.uuid4().hex
            object.__setattr__(self, "_token", token)  # a frozen dataclass: not one of its fields
        return token

    def group(self, g: int, runs=()):
        """This job as group ``g``'s first pass sees it: its ranges are the group's. Ranges of
        sizes not known when the graph was built (all 0: a frame's) are its ``runs``' rows in as
        many balanced ranges."""
        ranges = self.group_ranges[g]
        if ranges and not any(ranges) and runs:
            ranges = plan.balanced(sum(r.rows for r in runs), len(ranges))
        return replace(self, range_rows=ranges, groups=(), group_ranges=())

    def final(self):
        """This job as the final pass sees it: after a first pass, the chains' sample spacing
        (``chain_spacing``, chosen for few chains and many ranges; the runs' is for a group's few
        runs and ranges, and a finer one costs memory: the cuts hold every sample)."""
        return (
            replace(self, spacing=self.chain_spacing)
            if self.groups and self.chain_spacing
            else self
        )

    def piece_index(self, g: int, t: int) -> int:
        """The run-store index of group ``g``'s piece ``t``."""
        return self.first_piece + sum(len(r) for r in self.group_ranges[:g]) + t

    def piece_of(self, index: int) -> tuple[int, int]:
        """``(group, range)`` of the piece kept as run-store ``index`` (:meth:`piece_index`)."""
        t = index - self.first_piece
        for g, r in enumerate(self.group_ranges):
            if 0 <= t < len(r):
                return g, t
            t -= len(r)
        raise IndexError(f"no piece {index} in this job")

    def slot(self, gpu):
        """The context a merge runs in on ``gpu`` (None: the CPU)."""
        return contextlib.nullcontext()

    def remake(self, q: int, gpu):
        """Run or piece ``q`` made again (its worker gone, or its store): a piece of a first
        pass's chain from its group's runs, cut and merged again here (:func:`remake_piece`); a
        run by :meth:`remake_run`."""
        if self.groups and q >= self.first_piece:
            return remake_piece(self, q, gpu)
        return self.remake_run(q, gpu)

    def remake_run(self, q: int, gpu):
        """Run ``q`` made again (the caller holds no GPU slot)."""
        raise OSError(f"run {q} is lost with its worker and cannot be made again here")

    def recovery(self, gpu):
        """What makes a lost run again inside a merge on ``gpu`` (``recover(index) -> Run``), or
        None where a merge holds a GPU slot that making it would wait for: those jobs make lost
        runs before they take the slot (:meth:`~dsort.core.runs.RunStore.fetch_remote`)."""
        return None


@dataclass(frozen=True, kw_only=True)
class RunJob(FirstPass):
    """What the run, cut and merge functions of this module read of a sort's job, whatever it
    sorts: each kind adds its own fields (the file sort's :class:`Job`; arrays'
    :class:`~dsort.collections.external.ArrayJob`; frames'
    :class:`~dsort.collections.fixed_frames.FixedFrameJob` and
    :class:`~dsort.collections.frame_runs.FrameJob`). Small and frozen: it travels with every
    task."""

    store: R.StoreConfig  # where the runs are kept
    spacing: int  # the runs' sample spacing
    # fixed-width rows: the key's bytes, then the rest (None: rows vary)
    layout: R.Layout | None = None
    range_rows: tuple = ()  # rows of every output range (merge group), in order, where known
    descending: bool = False
    na_position: str = "last"
    # ((first run, end run), ...): groups merged by a first pass into chains; () for one pass
    groups: tuple = ()
    group_ranges: tuple = ()  # rows of each group's first-pass ranges, per group
    # the chains' sample spacing, where there is a first pass (FirstPass.final)
    chain_spacing: int = 0

    def gpu_for(self, t: int):
        """The GPU of task ``t`` (None: the CPU)."""
        return None


@dataclass(frozen=True)
class Job(RunJob):
    """What every task of one file sort needs to know (and :class:`RunJob`'s fields)."""

    id: str
    blocks: tuple  # ((path, byte offset, rows), ...): the input blocks, in input order
    output: str  # the (staged) output file, allocated before the tasks run
    out_offset: int  # where the rows start in it (after a .npy header)
    gpus: tuple = ()  # CUDA devices to use, () for the CPU
    gpu_tasks: int = 1  # tasks at once on each GPU (the block and range sizes assume no more)
    # on the CPU: checksums summed from the files by their own process (checksums.sums_apart)
    checksums_apart: bool = False

    @property
    def sizes(self):
        return [b[2] for b in self.blocks]

    def gpu_for(self, i: int):
        return self.gpus[i % len(self.gpus)] if self.gpus else None

    @property
    def first_piece(self) -> int:
        return len(self.blocks)

    def slot(self, gpu):
        return _on(gpu, self)

    def remake_run(self, q: int, gpu):
        with _on(gpu, self):  # from its input block
            return _make_run(self, q, Stopwatch(), gpu)[0]


_slots: dict = {}  # (job, GPU) -> its slots: at most job.gpu_tasks tasks at once on the GPU
_slots_lock = threading.Lock()


@contextlib.contextmanager
def _on(gpu, job: Job | None = None):
    """:func:`on_stream`, at most ``job.gpu_tasks`` tasks at once per GPU; or on the CPU where
    ``gpu`` is None."""
    if gpu is None:
        yield
        return
    with _slots_lock:
        slots = _slots.setdefault(
            (job.id if job else "", gpu), threading.BoundedSemaphore(job.gpu_tasks if job else 1)
        )
    with slots, on_stream(gpu):
        yield


# -- the tasks ----------------------------------------------------------------------------------


def run_task(job: Job, i: int):
    """Read input block ``i``, sort it, keep it as run ``i``: ``(Run, input Summary, stage
    times)``."""
    gpu = job.gpu_for(i)
    watch = Stopwatch()
    with _on(gpu, job):
        run, summary = _make_run(job, i, watch, gpu)
    return run, summary, watch.times


def _make_run(job: Job, i: int, watch: Stopwatch, gpu):
    """Run ``i`` made from input block ``i`` on ``gpu`` (the caller holds its slot there)."""
    path, offset, n = job.blocks[i]
    lay = job.layout
    if gpu is None:
        rows = diskio.read_file(path, offset, n, lay.row_bytes)
        watch.lap("read")
    else:
        fd = os.open(path, os.O_RDONLY)
        try:
            rows = dev.upload(
                n * lay.row_bytes, lambda buf, off: diskio.pread_into(fd, buf, offset + off), gpu
            ).reshape(n, lay.row_bytes)
        finally:
            os.close(fd)
        watch.lap("read + copy in")
    if gpu is None and job.checksums_apart:
        summary = None  # summed from the input file by the checksum process (Job.checksums_apart)
    else:
        summary = valsort.Summary(
            records=n, checksum=valsort.checksum(rows), bytes=n * lay.row_bytes
        )
        sync(gpu)
        watch.lap("checksum")
    return sort_and_keep(job, i, rows, watch, gpu), summary


def sort_and_keep(job: RunJob, i: int, rows, watch: Stopwatch, gpu=None) -> R.Run:
    """Sort block ``i``'s ``rows`` (``(n, row_bytes)`` uint8, NumPy or CuPy) by their keys (with
    a payload: the keys with their positions, then every row moved once) and keep them as run
    ``i`` in the job's store."""
    lay = job.layout
    keys = lay.keys(rows)
    e = engines.get(keys)
    if lay.payload:
        perm = e.argsort(keys, descending=job.descending, na_position=job.na_position)
        rows = engines.take_rows(rows, perm)
        sample = engines.take_rows(keys, perm[:: job.spacing])
    else:
        keys = e.sort(keys, descending=job.descending, na_position=job.na_position)
        rows = keys if lay.dtype is None else lay.rows_of(keys)
        sample = keys[:: job.spacing]
    sample = dev.to_host(sample)
    sync(gpu)
    watch.lap("sort")
    run = R.store(job.store).put(i, rows, sample=sample)
    sync(gpu)
    watch.lap("keep run" if run.tier != "disk" else "write run")
    if gpu is not None and 2 * len(sample) >= cuts.GPU_RANKED_SAMPLES:
        # the sort's cuts will rank their samples on a GPU, maybe in this process, in this sort or a
        # later one: a process that has not ranked such samples yet ranks them on the host, many
        # times slower (BENCHMARKS.md section 7), so this one warms up now
        cuts.warm_ranking(
            (sample.dtype.str, bool(job.descending), job.na_position), sample, 2, job.spacing
        )
    return run


def cuts_task(job: Job, *results):
    """:func:`cut_runs` of the runs (or chains) of the run (or chain) tasks' ``results``."""
    return cut_runs(job.final(), [handle(r) for r in results])


def merge_task(job: Job, cut, t: int):
    """Merge output range ``t`` from its slices of all runs and write it in place:
    ``(output Summary, stage times)``."""
    bounds = cut[0]
    lay, gpu = job.layout, job.gpu_for(t)
    watch = Stopwatch()
    first = int(bounds[t].sum())
    # slices on other workers' disks are fetched before this task takes its GPU slot: it waits for
    # them seceded, its thread running other tasks that would wait for the slot it held (deadlock)
    fetched = R.store(job.store).fetch_remote(_slice_items(cut, t), lambda q: job.remake(q, gpu))
    with _on(gpu, job):
        merged = merge_rows(job, cut, t, watch, gpu, fetched)
        if merged is None:
            return valsort.Summary(), watch.times
        keys, rows = merged
        # the output's checksum summed from the file afterwards
        apart = gpu is None and job.checksums_apart
        summary = valsort.summarize(keys, rows, descending=job.descending, with_checksum=not apart)
        sync(gpu)
        watch.lap("order check" if apart else "checksum")
        _write_at(job.output, job.out_offset + first * lay.row_bytes, rows, gpu)
        watch.lap("copy out + write" if gpu is not None else "write")
    return summary, watch.times


def _slice_items(cut, t: int) -> list:
    """Output range ``t``'s nonempty slices of the runs: ``(run, lo, hi)``."""
    bounds, runs = cut
    return [
        (run, bounds[t, q], bounds[t + 1, q])
        for q, run in enumerate(runs)
        if bounds[t + 1, q] > bounds[t, q]
    ]


# -- a first merge pass, where the runs are more than one pass merges --------------------------


def handle(result):
    """The run (or chain) handle in a run task's result (a file sort's ``(Run, summary, times)``,
    a chain task's ``(Chain, times)``) or the handle itself (an array's run task)."""
    return result[0] if isinstance(result, tuple) else result


def group_cuts_task(job: RunJob, g: int, results):
    """The exact cuts of group ``g``'s first-pass ranges in its runs (the run tasks'
    ``results``)."""
    runs = [handle(r) for r in results]
    return cut_runs(job.group(g, runs), runs)


def group_merge_task(job: RunJob, cut, g: int, t: int):
    """Range ``t`` of group ``g``'s first pass, merged from its slices of the group's runs and kept
    as a piece of the group's chain: ``(piece Run, stage times)``."""
    gpu = job.gpu_for(t)
    watch = Stopwatch()
    fetched = R.store(job.store).fetch_remote(_slice_items(cut, t), lambda q: job.remake(q, gpu))
    return _merge_piece(job, cut, g, t, watch, gpu, fetched), watch.times


def _merge_piece(job: RunJob, cut, g: int, t: int, watch: Stopwatch, gpu, fetched=None):
    """Group ``g``'s range ``t`` merged from its slices (``cut``: the group's) and kept in the run
    store as a piece of the group's chain, with the keys at the chain's sample positions (multiples
    of the final pass's spacing; the piece starts at the chain's row ``first``)."""
    with job.slot(gpu):
        merged = merge_rows(job.group(g), cut, t, watch, gpu, fetched)
        first = int(cut[0][t].sum())
        if merged is None:  # an empty range (a frame's group of fewer rows than ranges)
            rows = np.empty((0, job.layout.row_bytes), np.uint8)
            merged = job.layout.keys(rows), rows
        keys, rows = merged
        start, step = plan.sample_positions(first, job.final().spacing)
        piece = R.store(job.store).put(
            job.piece_index(g, t), rows, sample=dev.to_host(keys[start::step])
        )
        sync(gpu)
        watch.lap("keep piece" if piece.tier != "disk" else "write piece")
        return piece


def chain_task(job: RunJob, g: int, results):
    """Group ``g``'s chained run from its pieces (the group merges' ``results``): ``(Chain, stage
    times)``, each stage named for the first pass. In the embedded sort (one process, no worker
    to lose) the group's runs are freed here, every piece being made: the disk holds the input's
    bytes once more, not twice. On a cluster they stay until the job ends (dask may run a group
    merge again, reading them)."""
    pieces = tuple(r[0] for r in results)
    times: dict = {}
    for _, t in results:
        for k, v in t.items():
            times[f"first pass: {k}"] = times.get(f"first pass: {k}", 0.0) + v
    s = R.store(job.store)
    # no dask worker: this process holds every run, and none is computed again
    if s.address is None:
        a, b = job.groups[g]
        s.free(range(a, b))
    return R.Chain(job.store.job, g, pieces), times


def remake_piece(job: RunJob, q: int, gpu):
    """Piece ``q`` of a chained run, made again here (its worker gone): its group's runs made
    again (:meth:`FirstPass.remake_run`, once per process), cut again (the same cuts: the same
    runs and samples), and its range merged."""
    g, t = job.piece_of(q)
    a, b = job.groups[g]
    s = R.store(job.store)
    runs = [s.recover_once(i, lambda q: job.remake_run(q, gpu)) for i in range(a, b)]
    return _merge_piece(job, cut_runs(job.group(g, runs), runs), g, t, Stopwatch(), gpu)


def merge_rows(job: RunJob, cut, t: int, watch: Stopwatch, gpu=None, fetched=None):
    """Output range ``t``'s rows: its slices of every run (see :func:`cuts_task`) read onto
    ``gpu`` (or into host memory) and merged; ``(keys, rows)``, or None when the range is empty.
    ``fetched``: the slices from other workers, where the caller fetched them first
    (:meth:`~dsort.core.runs.RunStore.fetch_remote`). A run that cannot be read is made again
    where the job can (:meth:`FirstPass.recovery`)."""
    lay = job.layout
    store, recover = R.store(job.store), job.recovery(gpu)
    # its cuts settled here (cut_runs' settle_later), from the rows it reads
    if isinstance(cut[0], Windowed):
        _, items, slices = settled_slices(job, cut, t, gpu, recover, watch)
    else:
        items = _slice_items(cut, t)
        slices = store.read_many(items, gpu, recover, fetched)
        sync(gpu)
        watch.lap("read runs")
    if not slices:
        return None
    if lay.payload:  # the keys' positions carry the payload
        keys, perm = chunk.merge_order(
            [lay.keys(s) for s in slices], job.descending, job.na_position
        )
        rows = engines.take_rows(
            engines.get(slices[0]).concatenate(slices) if len(slices) > 1 else slices[0], perm
        )
    else:
        keys = chunk.merge_keys([lay.keys(s) for s in slices], job.descending, job.na_position)
        if len(slices) == 1:  # the slice itself: a view of a run (a file's mapping, read-only)
            keys = keys.copy()
        rows = keys if lay.dtype is None else lay.rows_of(keys)
    sync(gpu)
    store.release(items)  # every row copied: the runs' mapped pages leave this process
    watch.lap("merge")
    return keys, rows


def _write_at(path, offset: int, rows, gpu=None) -> None:
    """Write ``rows`` at byte ``offset`` of the output (from a GPU through the staging pieces)
    and start their writeback to disk."""
    fd = os.open(path, os.O_WRONLY)
    try:
        if gpu is None:
            diskio.pwrite_all(fd, np.ascontiguousarray(rows).reshape(-1).view(np.uint8), offset)
        else:
            dev.download(rows, lambda buf, off: diskio.pwrite_all(fd, buf, offset + off), gpu)
        diskio.start_writeback(fd, offset, rows.nbytes)
    finally:
        os.close(fd)
