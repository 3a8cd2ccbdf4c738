"""The external sort of dask arrays: the file sort's runs, cuts and merges, fed by chunks.

``strategy="external"`` of :func:`dsort.sort` / ``argsort`` / ``sort_by_key`` builds this graph
instead of :mod:`dsort.collections.graph`'s. The bulk data never stays in dask's memory:

``dsort-run``    one task per group of consecutive input chunks (:mod:`dsort.collections.scale`):
                 their keys and values (or global positions) as fixed-width rows (key bytes, then value bytes), sorted by their keys on the
                 chunk's engine (on the worker's GPU for CuPy chunks or ``device="gpu"``) and kept
                 in the run store (:mod:`dsort.core.runs`: host memory within ``host_budget`` bytes,
                 else a file under the job's directory). The task returns a small
                 :class:`~dsort.core.runs.Run` handle with the run's regular sample.
``dsort-cuts``   one task: the window of every cut between output chunks in every run, from the
                 runs' samples (:func:`dsort.core.filesort.cut_runs`).
``dsort-merge``  one task per group of output chunks: its slices of every run, read with the
                 windows at their ends, cut exactly at the few keys inside those windows
                 (:func:`dsort.core.filesort.settled_slices`; runs on another host's disk: cut by
                 the cuts task, once) and merged; the output chunks are pieces of it. The last
                 merge to finish removes the runs.

More runs than one merge pass takes (``dsort.file-sort.max-runs``) are first merged in groups into
chained runs (:mod:`dsort.collections.passes`), in ranges of a run's rows; the cuts and merges
then take the chains for runs (arrays and frames alike; a frame of strings or objects chains its
pickled rows too: :func:`frame_group_merge`).

Each task holds about three runs' worth of rows (``dsort.scale.external-run`` each, or a chunk), so ``da.store`` / ``to_npy_stack`` of the
result runs in memory bounded by the chunk size and the run store's budget, whatever the array's
size. On a multi-process cluster the runs are files only, in a directory all workers of one machine see
(``local_directory``: dask's ``temporary-directory``, else the system's temporary directory); on
workers of several hosts each keeps its runs in its own dask local directory, and a merge asks the
worker that holds a run for its slices (hosts share no directory).
"""

from __future__ import annotations

import atexit
import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ..core import chunk, plan
from ..core import frame_chunk as FC
from . import remote
from . import tasks as T
from .passes import merge_tasks
from ..core import filesort as F
from ..core import run_lifetime as lifetime
from ..core import runs as R
from ..core.frame_wire import unwire, wire
from ..engine import device as dev
from ..engine import host

PREFIX = "dsort-runs"  # the run directories: PREFIX-PID-TOKEN, PID the process that built the graph


REMADE_TOPIC = "dsort-runs-remade"  # the topic of the events that name each run a merge had made again (FromGraph)


class FromGraph(F.FirstPass):
    """A job of a sort of dask collections: a run that cannot be read (its worker lost, say, and
    with it the GPU memory or the disk that held it) is made again through the dask scheduler,
    by the task that made it in the graph, run again (:func:`dsort.collections.tasks.run_again`:
    from its input chunks, made again too where they are lost), by a merge that finds it gone;
    its result stays while the run store that asked for it does. For the jobs' dataclasses, which
    hold ``inputs`` (how the graph named the run tasks' inputs; None: not made again) and say
    :meth:`run_task`."""

    def run_task(self, q: int) -> tuple:
        """``(function, *arguments)`` of run ``q``'s task in the graph."""
        raise NotImplementedError

    def remake_run(self, q: int, gpu):
        if self.inputs is None or remote.this_worker() is None:  # no scheduler to ask (one process loses no worker)
            return super().remake_run(q, gpu)
        # a task of its own, not the run's: dask keeps a run's handle (small) on the workers that
        # read it, and gives that again though the run itself went with its worker
        s = R.store(self.store)
        got, future = T.run_again((T.name(T.REMADE, self.store.job), q, s.making(q)), *self.run_task(q))
        s.keep(future)
        run = F.handle(got)
        remote.this_worker().log_event(REMADE_TOPIC, {"job": self.store.job, "run": q, "tier": run.tier, "worker": run.worker})
        return run

    def recovery(self, gpu):
        if self.inputs is None or remote.this_worker() is None:  # nothing to ask: a failed read keeps its own error
            return None
        return lambda q: self.remake(q, gpu)


@dataclass(frozen=True)
class ArrayJob(FromGraph):
    """What the tasks of one external array sort need (the attributes of :class:`dsort.core.filesort.Job`
    that :func:`~dsort.core.filesort.sort_and_keep`, :func:`~dsort.core.filesort.cut_runs` and
    :func:`~dsort.core.filesort.merge_rows` read)."""

    layout: R.Layout  # key bytes (``dtype``: the key's dtype, None for byte rows), then value bytes
    range_rows: tuple  # rows of every output chunk: the input's chunk sizes
    spacing: int
    store: R.StoreConfig
    key_shape: tuple  # trailing shape of a key: () or (width,) for byte rows
    value_dtype: object  # a NumPy dtype, None: keys only
    value_shape: tuple = ()
    positions: bool = False  # the values are the keys' global int64 positions
    gpu: bool = False  # sort and merge on the worker's current GPU
    descending: bool = False
    na_position: str = "last"
    groups: tuple = ()  # more runs than one merge pass takes: a first pass (dsort.core.filesort.FirstPass)
    group_ranges: tuple = ()
    first_piece: int = 0  # the runs' count: pieces of the first pass are kept after them
    chain_spacing: int = 0
    inputs: tuple | None = None  # ((keys' Chunks, values' Chunks or None), ((its chunks, their first rows) of each run))

    def gpu_for(self, t: int):
        return _device() if self.gpu else None

    def run_task(self, q: int) -> tuple:
        (keys, values), runs = self.inputs
        each, starts = runs[q]
        return run_chunk, self, q, [T.ref(keys[i]) for i in each], None if values is None else [T.ref(values[i]) for i in each], starts


def _device():
    import cupy

    return cupy.cuda.Device().id


def run_chunk(job: ArrayJob, i: int, keys, values, starts) -> R.Run:
    """Input chunks (``keys``: a list of them; ``values``: theirs, or None), whose first rows are
    ``starts`` in the whole array, sorted together and kept as run ``i``."""
    if job.gpu:
        keys, values = [chunk.on_gpu(k) for k in keys], None if values is None else [chunk.on_gpu(v) for v in values]
    lengths = [len(k) for k in keys]
    keys, values = chunk.joined(keys), None if values is None else chunk.joined(values)
    gpu = _device() if job.gpu else None
    xp, n = dev.xp_of(keys), len(keys)
    kb = job.layout.key_bytes
    key_bytes = xp.ascontiguousarray(keys).view(np.uint8).reshape(n, kb)
    if job.positions:
        values = xp.concatenate([xp.arange(a, a + m, dtype=np.int64) for a, m in zip(starts, lengths)])
    if values is None or not job.layout.payload:
        rows = key_bytes
    else:
        rows = xp.empty((n, job.layout.row_bytes), np.uint8)
        rows[:, :kb] = key_bytes
        rows[:, kb:] = xp.ascontiguousarray(values).view(np.uint8).reshape(n, job.layout.row_bytes - kb)
    watch = F.Stopwatch()
    run = F.sort_and_keep(job, i, rows, watch, gpu)
    report_stages("run", watch, tier=run.tier)
    return run


def cuts(job: ArrayJob, *runs):
    """The exact cuts of the runs (or a first pass's chains: their tasks' results)."""
    watch = F.Stopwatch()
    got = F.cut_runs(job.final(), [F.handle(r) for r in runs], watch, settle_later=True)
    report_stages("cuts", watch)
    return got


def merge_chunk(job: ArrayJob, cut, t: int):
    """Output chunk ``t``: ``(keys, values or None)``, merged from its slices of every run."""
    gpu = _device() if job.gpu else None
    watch = F.Stopwatch()
    merged = F.merge_rows(job, cut, t, watch, gpu)
    report_stages("merge", watch)
    R.finish(job.store, t, len(job.range_rows), cut[1])
    lay = job.layout
    if merged is None:
        rows = np.empty((0, lay.row_bytes), np.uint8)
        if gpu is not None:
            rows = chunk.on_gpu(rows)
        keys = lay.keys(rows).reshape((0, *job.key_shape))
    else:
        keys, rows = merged
    if job.value_dtype is None:
        return keys, None
    # a copy, always: a one-row slice is contiguous, and a view of it would start at the key's
    # width, misaligned for the values' dtype (GPU kernels fault on such a pointer)
    values = rows[:, lay.key_bytes :].copy().view(job.value_dtype).reshape((len(rows), *job.value_shape))
    return keys, values


def _part(part, i: int, host: bool, lo: int = 0, hi=None):
    """Rows ``[lo, hi)`` of a merge's keys (``i`` 0) or values (1): an output chunk."""
    out = part[i][lo:hi]
    if host and dev.is_device_array(out):
        return dev.to_host(out)
    return out if lo == 0 and (hi is None or hi == len(part[i])) else out.copy()


def graph(token: str, key_chunks, value_chunks, sizes, members, job: ArrayJob, owners=None) -> tuple[dict, list]:
    """``(tasks, merge keys)``: the run, cuts and merge tasks of the sort of the chunks
    ``key_chunks`` (task keys; ``value_chunks``: task keys or None each) of ``sizes`` rows, the
    chunks of each of ``members`` (chunk numbers: :func:`dsort.collections.scale.runs_by_worker`)
    sorted together into a run; merge ``g`` gives the ``(keys, values)`` of merge group ``g``
    (``job.range_rows``: their rows; see :func:`output_tasks`). ``owners``: each chunk's worker
    where known (:func:`dsort.collections.scale.partition_workers`): the merges then spread evenly
    over the workers that hold the runs, however unevenly the input lies."""
    dsk = {}
    run_keys = []
    starts = plan.offsets(sizes).tolist()
    for g, each in enumerate(members):
        key = (T.name(T.RUN, token), g)
        values = None if value_chunks[each[0]] is None else [T.ref(value_chunks[i]) for i in each]
        dsk[key] = T.task(key, run_chunk, job, g, [T.ref(key_chunks[i]) for i in each], values, [starts[i] for i in each])
        run_keys.append(key)
    run_owners = [owners[each[0]] for each in members] if owners else None
    _, merges, _, _ = merge_tasks(dsk, job, token, run_keys, cuts, merge_chunk, len(job.range_rows), owners=run_owners)
    return dsk, merges


def output_tasks(merges, outputs, host: bool, sizes, groups) -> dict:
    """Chunk tasks of the results: ``outputs`` is ``[(name, ndim, 0 for keys or 1 for values)]``;
    chunk ``i`` is its rows of its group's merge."""
    dsk = {}
    for name, nd, which in outputs:
        for i, g, lo, hi in plan.pieces(sizes, groups):
            key = (name, i) + (0,) * (nd - 1)
            dsk[key] = T.task(key, _part, T.ref(merges[g]), which, host, lo, hi)
    return dsk


LOCAL_SCHEDULERS = ("threads", "threading", "sync", "synchronous", "single-threaded", "processes", "multiprocessing")


def _distributed_workers() -> list | None:
    """The distributed workers the graph will run on (every one: dask's ``scheduler_info`` names
    only five unless asked), or None where a local scheduler (or no client) runs it."""
    import dask

    if dask.config.get("scheduler", None) in LOCAL_SCHEDULERS:
        return None
    try:
        from distributed import default_client

        return list(remote.scheduler_identity(default_client())["workers"].values())
    except (ImportError, ValueError):
        return None


def where_it_runs() -> tuple[bool, int]:
    """``(one process, bytes of memory)``: whether the graph will run in this process (dask's
    threaded or synchronous scheduler; runs may then stay in its memory), and the memory there
    (the available memory, or the distributed workers' limits together)."""
    import dask
    import psutil

    available = psutil.virtual_memory().available
    if dask.config.get("scheduler", None) in ("processes", "multiprocessing"):
        return False, available
    workers = _distributed_workers()
    if workers is None:
        return True, available
    return False, sum(w.get("memory_limit") or available for w in workers) or available


def rows_travel() -> bool:
    """Whether the graph will run in several processes (dask's process scheduler, or two
    distributed workers or more), between which a sort's rows move."""
    import dask

    if dask.config.get("scheduler", None) in ("processes", "multiprocessing"):
        return True
    workers = _distributed_workers()
    return workers is not None and len(workers) > 1


def one_host() -> bool:
    """Whether the graph will run on this one machine: a local scheduler, or distributed workers
    that all share one host (so every worker can read a file any other wrote)."""
    workers = _distributed_workers()
    return workers is None or len({w.get("host") for w in workers}) <= 1


def gpu_workers_of_one_host() -> bool:
    """Whether the graph runs on two or more distributed workers, all of one host: there runs
    kept on the GPUs are read across the worker processes through CUDA IPC, GPU to GPU."""
    workers = _distributed_workers()
    return workers is not None and len(workers) > 1 and len({w.get("host") for w in workers}) == 1


def store_config(
    token: str, row_bytes: int, local_directory, host_budget: int, gpu: bool = False, gpu_budget: int | float | None = None
) -> R.StoreConfig:
    """The run store of one sort: ``host_budget`` bytes in memory (0: files only), files in a new
    directory under ``local_directory``, removed by the last merge or, failing that, when this
    process exits; stores left by killed processes are removed here. ``gpu``: runs sorted on GPUs
    stay there, shared by every worker process of the machine, where the graph runs on one
    (``dsort.runs.shared-gpu-fraction`` of each GPU's memory at most, and ``gpu_budget`` bytes, or
    that share of its GPU, of each worker process's runs where given; beyond it, host memory within
    ``host_budget``, then files)."""
    import dask

    from . import config

    base = Path(local_directory or dask.config.get("temporary-directory", None) or tempfile.gettempdir()).absolute()
    lifetime.remove_leftovers(base, PREFIX)
    directory = str(base / f"{PREFIX}-{os.getpid()}-{token[:16]}")
    atexit.register(lifetime.drop, token, directory)
    here = one_host()
    shared = float(config.get("runs.shared-gpu-fraction")) if gpu and here else 0.0
    # workers on several hosts share no directory: each keeps its runs on its own disk (its dask
    # local directory), and a merge asks the worker that holds a run for its slices
    return R.StoreConfig(
        token, directory, row_bytes, host_budget, 0, local=not here, shared_fraction=shared, shared_budget=gpu_budget, cluster=remote.DASK
    )


# -- dataframes -------------------------------------------------------------------------------------
#
# Rows of a dataframe vary in width, so a partition's run is two things: its sorted rows in a file
# of pickled blocks of at most BLOCK_ROWS rows (pickle keeps every pandas dtype, the index and the column
# labels as they are; a slice reads only the blocks it overlaps), and its sort keys (fixed-width byte
# rows whose unsigned order is the wanted order) in the run store, where the cuts and merges find
# them as for arrays.

BLOCK_ROWS = 1 << 16


@dataclass(frozen=True)
class FrameJob(F.FirstPass):
    """What the tasks of one external dataframe sort need (see :class:`ArrayJob`)."""

    spec: object  # the sort's :class:`~dsort.core.frame_keys.KeySpec`
    widths: tuple | None  # string widths for every partition's keys; None: each its own
    partitions: int  # output partitions, balanced to within one row
    spacing: int  # the runs' sample spacing, and the chains' (their pieces sample at its multiples)
    store: R.StoreConfig
    ignore_index: bool = False
    device: str | None = None
    starts: tuple = (0,)  # the first output of every merge group
    groups: tuple = ()  # more runs than one merge pass takes: a first pass (dsort.core.filesort.FirstPass),
    group_ranges: tuple = ()  # of as many ranges as each group's runs (zeros: sized by the group cuts)
    first_piece: int = 0


def _rows_path(job: FrameJob, run) -> str:
    """A run's (or piece's) pickled rows: beside its keys' file where it has one (on the disk of
    the worker that made it), else in this process's store directory; named for its making."""
    where = os.path.dirname(run.path) if run.path else R.store(job.store).directory
    return os.path.join(where, f"frame-{run.index:06d}-{run.made}.pickles")


def frame_run(job: FrameJob, p: int, *parts) -> tuple:
    """Consecutive partitions ``parts`` as run ``p``: their keys, a stable sort of their rows by
    them, the rows written in blocks beside the run store's files (:func:`_write_rows`), the keys
    kept as run ``p``; ``(run, the keys' string widths, their kinds)`` (the kinds: the types of
    the object columns' values, which the cuts check across runs: :func:`frame_cuts`)."""
    s = FC.sort_part(list(parts), job.spec, job.widths, job.device)
    made = _write_rows(job, p, s.frame)
    return R.store(job.store).put(p, s.keys, sample=s.keys[:: job.spacing].copy(), made=made), s.widths, s.kinds


def _write_rows(job: FrameJob, p: int, frame) -> str:
    """Run (or piece) ``p``'s sorted rows as a file of pickled blocks (:func:`block_rows` rows
    each), the blocks' byte offsets and their count and rows last; the making's name (its
    keys are put in the run store under it)."""
    import pickle

    made = R.new_making()
    block = block_rows(len(frame), len(job.starts))
    offsets = [0]
    with open(R.store(job.store).file_for(p, made, "frame", ".pickles"), "wb") as f:
        for b in range(0, len(frame), block):
            f.write(pickle.dumps(wire(frame.iloc[b : b + block]), protocol=5))  # arrays in object columns as Arrow
            offsets.append(f.tell())
        f.write(np.asarray(offsets, "<i8").tobytes())
        f.write(np.asarray([len(offsets), block], "<i8").tobytes())
    return made


def block_rows(rows: int, outputs: int) -> int:
    """Rows per pickled block of a partition's run: about one output's share of it (a slice then
    reads at most two blocks: unpickling a block costs its whole size), at most :data:`BLOCK_ROWS`,
    at least 1024 (or 1 where BLOCK_ROWS is smaller)."""
    return int(max(min(BLOCK_ROWS, 1024), min(BLOCK_ROWS, -(-rows // max(outputs, 1)))))


def _read_rows(path: str, lo: int, hi: int):
    """Rows ``[lo, hi)`` of a run's rows file: the blocks they lie in, unpickled, then cut."""
    import pickle

    with open(path, "rb") as f:
        f.seek(-16, os.SEEK_END)
        count, block = (int(x) for x in np.frombuffer(f.read(16), "<i8"))
        f.seek(-16 - 8 * count, os.SEEK_END)
        offsets = np.frombuffer(f.read(8 * count), "<i8")
        first, last = lo // block, (hi - 1) // block
        f.seek(offsets[first])
        data = f.read(int(offsets[last + 1] - offsets[first]))
    blocks, at = [], 0
    for b in range(first, last + 1):
        size = int(offsets[b + 1] - offsets[b])
        blocks.append(unwire(pickle.loads(data[at : at + size])))
        at += size
    rows = FC.concat(blocks)  # pandas' or cudf's (unpickled onto this worker's GPU)
    return wire(rows.iloc[lo - first * block : hi - first * block])  # it may travel to the merge


def _run_rows(job: FrameJob, run, lo: int, hi: int):
    """Rows ``[lo, hi)`` of a run's sorted rows, or of a chain's (read from the pieces they span)."""
    if not isinstance(run, R.Chain):
        return unwire(remote.read_where_it_is(run, _rows_path(job, run), _read_rows, lo, hi))
    return FC.concat([unwire(remote.read_where_it_is(p, _rows_path(job, p), _read_rows, a, b)) for p, a, b in run.spans(lo, hi)])


def frame_cuts(job: FrameJob, *made):
    """The cuts of ``job.partitions`` balanced output partitions: ``(cut rows, runs, the keys'
    string widths per run, the common widths, the runs' kinds joined)``, from the runs' samples and
    the keys in their windows (every key brought to the common widths first); runs whose keys do
    not compare are refused first (:func:`dsort.core.frame_keys.join_kinds`). ``made``: the runs'
    (or chains') ``(handle, string widths, kinds)``."""
    from ..core.frame_keys import common_widths, join_kinds, widen

    kinds = join_kinds(job.spec, [k for _, _, k in made])
    runs = [r for r, _, _ in made]
    have = [w for _, w, _ in made]
    sizes = [r.rows for r in runs]
    p = FC.Plan(tuple(sizes), common_widths(have), job.spacing, plan.balanced(sum(sizes), job.partitions), starts=job.starts)
    if len(runs) > 1 and len(p.targets):
        samples = [widen(job.spec, r.sample, w, p.widths) for r, w in zip(runs, have)]
        p = replace(p, windows=FC.bounds(p, *samples))
        found = F.read_windows(R.store(job.store), None, runs, *p.windows)  # [t][q], each run's keys at its own widths
        windows = [[widen(job.spec, found[t][q], have[q], p.widths) for t in range(len(p.targets))] for q in range(len(runs))]
        cut = FC.cuts(p, *windows)
    else:
        cut = FC.cuts(p)
    return cut, [R.bare(r) for r in runs], have, p.widths, kinds


def _frame_slices(job: FrameJob, cut, t: int) -> list:
    """Range ``t``'s slices of every run (or chain) of ``cut`` (:func:`frame_cuts`): ``(rows,
    keys at the common widths)`` of each run that has rows in it, in run order."""
    from ..core.frame_keys import widen

    bounds, runs, have, want, _ = cut
    pieces = [(q, run, int(bounds[t, q]), int(bounds[t + 1, q])) for q, run in enumerate(runs) if bounds[t + 1, q] > bounds[t, q]]
    keys = R.store(job.store).read_many([(run, lo, hi) for _, run, lo, hi in pieces])
    return [
        (_run_rows(job, run, lo, hi), widen(job.spec, np.ascontiguousarray(k), have[q], want)) for (q, run, lo, hi), k in zip(pieces, keys)
    ]


def frame_merge(job: FrameJob, cut, t: int, meta):
    """Merge group ``t``: its slices of every run's sorted rows, merged by their keys."""
    out = FC.merge(meta, cut[0], t, job.ignore_index, job.device, *_frame_slices(job, cut, t))
    R.finish(job.store, t, len(job.starts), cut[1])
    return out


# A frame's first merge pass (more runs than one pass takes): each group of runs is cut into as many
# ranges as it has runs (frame_group_cuts), each range's slices merged into one piece of the group's
# chain, its rows pickled as a run's are and its keys (at the group's common widths) kept in the run
# store (frame_group_merge), and the chain handed on with those widths and the group's kinds (frame_chain).


def frame_group_cuts(job: FrameJob, g: int, made):
    """:func:`frame_cuts` of group ``g``'s runs (``made``) into its first-pass ranges."""
    n = len(job.group_ranges[g])
    return frame_cuts(replace(job, partitions=n, starts=tuple(range(n))), *made)


def frame_group_merge(job: FrameJob, cut, g: int, t: int, meta):
    """Range ``t`` of group ``g``: its slices merged by their keys and kept as piece ``t`` of the
    group's chain (rows pickled, keys in the run store with the chain's sample positions):
    ``(piece, the keys' string widths, the group's kinds)``."""
    slices = [(f, k) for f, k in _frame_slices(job, cut, t) if len(f)]
    want = cut[3]
    if not slices:
        frame, keys = meta.iloc[:0], np.empty((0, job.spec.width(want)), np.uint8)
    elif len(slices) == 1:
        frame, keys = slices[0]
    else:
        order = FC.merge_order([k for _, k in slices], job.device)
        frame = FC.gather([f for f, _ in slices], order)
        keys = np.concatenate([k for _, k in slices])[order]
    p = job.piece_index(g, t)
    made = _write_rows(job, p, frame)
    start, step = plan.sample_positions(int(cut[0][t].sum()), job.spacing)
    return R.store(job.store).put(p, keys, sample=keys[start::step].copy(), made=made), want, cut[4]


def frame_chain(job: FrameJob, g: int, results):
    """Group ``g``'s chain from its pieces (the group merges' ``results``): ``(Chain, string
    widths, kinds)``, as a run's. In the embedded sort (one process) the group's runs are freed,
    every piece being made (see :func:`dsort.core.filesort.chain_task`)."""
    s = R.store(job.store)
    if s.address is None:
        a, b = job.groups[g]
        s.free(range(a, b))  # their rows' files too
    _, widths, kinds = results[0]
    return R.Chain(job.store.job, g, tuple(r for r, _, _ in results), row_bytes=job.spec.width(widths)), widths, kinds


def output_sizes(job, cut) -> tuple:
    """Rows of every output partition of an external frame sort (balanced), from its cuts."""
    return plan.balanced(int(F.range_starts(cut[0])[-1]), job.partitions)


# Frames whose columns and index all have fixed-width NumPy dtypes skip the pickled blocks: each row
# is its key's bytes then its own (dsort.core.frame_keys.RowCodec), and the runs are those rows in the
# run store, sorted, cut and merged exactly as an array's keys and values (on the GPU with
# device="gpu": the rows too), then decoded into frames by the merges.


@dataclass(frozen=True)
class FixedFrameJob(FromGraph):
    """What the tasks of one external sort of a fixed-width frame need (the attributes
    :func:`~dsort.core.filesort.sort_and_keep`, :func:`~dsort.core.filesort.cut_runs` and
    :func:`~dsort.core.filesort.merge_rows` read, and the frame's)."""

    layout: R.Layout  # the key's bytes, then the row's
    spec: object  # the sort's KeySpec
    codec: object  # the rows' RowCodec
    partitions: int
    spacing: int
    store: R.StoreConfig
    range_rows: tuple = ()  # rows of every merge group: set by the cuts task, once the runs' sizes are known
    ignore_index: bool = False
    gpu: bool = False
    cudf: bool = False  # cudf partitions (a dask-cudf frame): their columns read and the outputs made on the GPU
    starts: tuple = (0,)  # the first output of every merge group
    descending: bool = False  # the key bytes carry the order: always ascending here
    na_position: str = "last"
    groups: tuple = ()  # more runs than one merge pass takes: a first pass (dsort.core.filesort.FirstPass),
    group_ranges: tuple = ()  # of as many ranges as each group's runs, sized by the group cuts (zeros here)
    first_piece: int = 0
    chain_spacing: int = 0
    inputs: tuple | None = None  # (the input partitions' Chunks, ((first partition, end partition) of each run))

    def gpu_for(self, t: int):
        return _device() if self.gpu else None

    def run_task(self, q: int) -> tuple:
        chunks, runs = self.inputs
        a, b = runs[q]
        return fixed_run, self, q, *[T.ref(chunks[i]) for i in range(a, b)]

    def slot(self, gpu):
        return F.on_stream(gpu)  # this thread's own stream, as fixed_merge


STAGES = "dsort-stages"  # the topic of the events that say where a frame sort's tasks spent their time


def report_stages(task: str, watch: F.Stopwatch, **facts) -> None:
    """Send one task's seconds per stage (``watch``) to the dask scheduler as an event of topic
    :data:`STAGES` (``{"task": task, stage: seconds, ..., fact: text}``; ``client.get_events(STAGES)``
    reads them), where the task runs on a distributed worker; elsewhere nothing. ``facts``: words
    that tell tasks apart (a run's tier, say), counted by the reader."""
    worker = remote.this_worker()
    if worker is not None:
        worker.log_event(STAGES, {"task": task, **watch.times, **facts})


def fixed_run(job: FixedFrameJob, p: int, *parts) -> R.Run:
    """Consecutive partitions ``parts`` as rows (key bytes, row bytes), sorted by their keys and
    kept as run ``p``. On a GPU the rows are built there: the columns go as they are, keys and
    rows are made on the device (no host pass over the rows)."""
    watch = F.Stopwatch()
    if job.gpu:
        with F.on_stream(_device()):  # this thread's own stream: the worker's threads overlap on the GPU
            rows = _device_rows(job, parts, watch)
            run = F.sort_and_keep(job, p, rows, watch, _device())
        report_stages("run", watch)
        return run
    part = FC.concat(parts)
    keys, _ = job.spec.encode(part)
    rows = np.empty((len(part), job.layout.row_bytes), np.uint8)
    kb = job.layout.key_bytes
    key = np.dtype({"names": ["key"], "formats": [f"V{kb}"], "offsets": [0], "itemsize": job.layout.row_bytes})
    rows.reshape(-1).view(key)["key"] = np.ascontiguousarray(keys).reshape(-1).view(f"V{kb}")  # each key as one element
    job.codec.encode(part, rows, kb)
    watch.lap("encode")
    run = F.sort_and_keep(job, p, rows, watch)
    report_stages("run", watch)
    return run


def _device_rows(job: FixedFrameJob, parts, watch: F.Stopwatch):
    """The run rows of the partitions ``parts``, one after the other, made on the current GPU (no
    frame joined first): their columns (and index) copied there as they are and joined column by
    column, then the keys (:func:`dsort.core.frame_keys.write_number_keys`: a fixed-width frame's
    sort columns are all numbers, booleans, datetimes or durations) and the rows' bytes written."""
    import cupy

    from ..core.frame_keys import write_number_keys

    kinds = [np.dtype(d).kind for d in job.codec.dtypes]
    if job.cudf:  # already on this GPU (datetimes as int64): read in the order of cudf's stream, which this thread's then waits for
        each = [dev.after_default_stream(job.codec.gpu_columns, part) for part in parts]
        columns = each[0] if len(each) == 1 else [cupy.concatenate(c) for c in zip(*each)]
    else:  # host columns: each column of all the parts copied at once; CuPy has no datetimes; a range index is made there
        made = all(_range_index_made(job, part) for part in parts)
        each = [job.codec.columns(part, index=not made) for part in parts]
        columns = [
            chunk.joined_on_gpu([c[i].view(np.int64) if k in "mM" else c[i] for c in each]) for i, k in enumerate(kinds[: len(each[0])])
        ]
        if made and len(columns) < len(kinds):
            ranges = [cupy.arange(p.index.start, p.index.stop, p.index.step, dtype=job.codec.dtypes[-1]) for p in parts]
            columns.append(ranges[0] if len(ranges) == 1 else cupy.concatenate(ranges))
    watch.lap("copy in")
    names = list(parts[0].columns)
    keys = [names.index(c) if c in names else len(columns) - 1 for c in job.spec.by]  # else: the index (last), by its name
    rows = cupy.empty((len(columns[-1]), job.layout.row_bytes), cupy.uint8)
    gone = [job.codec.missing(columns, i) if i < job.codec.width else None for i in keys]  # the index has no nulls
    write_number_keys(job.spec, [columns[i] for i in keys], rows, cupy, [kinds[i] for i in keys], gone)
    job.codec.place(columns, rows, job.layout.key_bytes)
    F.sync(_device())
    watch.lap("encode")
    return rows


def fixed_cuts(job: FixedFrameJob, *runs):
    """The cuts of ``job.partitions`` balanced output partitions (:func:`frame_cuts`)."""
    watch = F.Stopwatch()
    runs = [F.handle(r) for r in runs]  # runs, or a first pass's chains
    out_sizes = plan.balanced(sum(r.rows for r in runs), job.partitions)
    final = replace(job.final(), range_rows=plan.group_sums(out_sizes, job.starts))
    cut = F.cut_runs(final, list(runs), watch, settle_later=True)
    report_stages("cuts", watch)
    return cut


def fixed_merge(job: FixedFrameJob, cut, t: int):
    """Merge group ``t``: its slices of every run merged and decoded into its output partitions,
    a tuple of them where it has several (:func:`nth`), else the one frame."""
    gpu = _device() if job.gpu else None
    watch = F.Stopwatch()
    with F.on_stream(gpu), host.pooled():  # as fixed_run; the host arrays from the worker's pool (dsort.engine.host)
        merged = F.merge_rows(job, cut, t, watch, gpu)
        rows = merged[1] if merged is not None else None
        sizes = _group_sizes(job, cut, t)
        if job.cudf:  # the outputs stay on the GPU, the group's columns taken apart once
            out = _cudf_outputs(job, rows, sizes, watch)
        else:
            out = _pandas_outputs(job, rows, sizes, watch)
    R.finish(job.store, t, len(job.starts), cut[1])
    report_stages("merge", watch)
    if job.ignore_index:
        starts = np.cumsum([int(F.range_starts(cut[0])[t]), *sizes]).tolist()
        out = [FC.with_positions(frame, start) for frame, start in zip(out, starts)]
    return out[0] if len(out) == 1 else tuple(out)


def _group_sizes(job: FixedFrameJob, cut, t: int) -> tuple:
    """The rows of merge group ``t``'s output partitions."""
    return output_sizes(job, cut)[job.starts[t] : job.starts[t + 1] if t + 1 < len(job.starts) else job.partitions]


def _bounds(sizes) -> list:
    """``(first, end)`` rows of each output of ``sizes`` rows in its group."""
    ends = np.cumsum([0, *sizes]).tolist()
    return list(zip(ends[:-1], ends[1:]))


def _pandas_outputs(job: FixedFrameJob, rows, sizes, watch: F.Stopwatch) -> list:
    """The pandas frames of merged ``rows`` (on this worker's GPU, or the host) cut into output
    partitions of ``sizes`` rows: the group's columns taken apart once (on the GPU, then copied
    out as they are) and each output's frame made on its slices of them, no copy (a frame sliced
    and copied per output was a second pass over every byte). The outputs of a group share that
    memory until the last of them goes: dask counts each output's own slice, so a spilled output
    frees its memory only with its group's others (written out or spilled together, as a sort's
    consumer takes them in order)."""
    if rows is None or not len(rows):
        rows = np.empty((0, job.layout.row_bytes), np.uint8)
    if dev.is_device_array(rows):
        columns = job.codec.pick(rows, job.layout.key_bytes)
        F.sync(_device())
        watch.lap("decode")
        columns = [dev.to_host(x) for x in columns]
        watch.lap("copy out")
    else:
        columns = job.codec.unpack(rows, job.layout.key_bytes)
        watch.lap("decode")
    out = [job.codec.frame([c[a:b] for c in columns]) for a, b in _bounds(sizes)]
    watch.lap("make frame")
    return out


def _cudf_outputs(job: FixedFrameJob, rows, sizes, watch: F.Stopwatch) -> list:
    """The cudf frames of merged ``rows`` cut into output partitions of ``sizes`` rows: the group's
    columns taken apart on the GPU once, each output's frame wrapping its slice of them (no frame
    sliced and copied again). One allocation a column a group, not an output: with RMM's default
    resource each is a cudaMalloc, and its cudaFree waits for the whole GPU. The outputs of a group
    share that memory until the last of them goes."""
    if rows is None:  # no rows: the meta's columns and index, as cudf
        import cudf

        return [cudf.from_pandas(job.codec.meta, nan_as_null=False) for _ in sizes]
    with dev.cudf_owned():  # the outputs' columns become cudf's memory
        whole = job.codec.pick(rows, job.layout.key_bytes)
    columns = [[c[a:b] for c in whole] for a, b in _bounds(sizes)]
    nulls = job.codec.null_columns(rows, job.layout.key_bytes)
    F.sync(_device())  # the columns made before cudf (its own stream) reads them
    watch.lap("decode")
    out = [dev.on_default_stream(job.codec.cudf_frame, c, nulls) for c in columns]
    watch.lap("make frame")
    return out


def nth(frames, sizes, t: int, first: int):
    """Output partition ``t`` of a merge group whose first is ``first``: its frame among the
    group's ``frames`` (:func:`fixed_merge`), as :func:`dsort.core.frame_chunk.piece` is of the
    other groups' one frame."""
    return frames[t - first]


def _range_index_made(job: FixedFrameJob, part) -> bool:
    """Whether pandas partition ``part``'s index is a range the GPU makes itself (of an integer
    dtype: no copy of its values)."""
    import pandas as pd

    return type(part.index) is pd.RangeIndex and np.dtype(job.codec.dtypes[-1]).kind in "iu"
