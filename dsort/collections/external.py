"""The external sort of dask arrays: the file sort's runs, cuts and merges, fed by chunks.

``strategy="external"`` of :func:`dsort.sort` / ``argsort`` / ``sort_by_key`` builds this graph
instead of :mod:`dsort.collections.graph`'s. The bulk data never stays in dask's memory:

``dsort-run``    one task per group of consecutive input chunks (:mod:`dsort.collections.scale`):
                 their keys and values (or global positions) as fixed-width rows (key bytes, then
                 value bytes), sorted by their keys on the chunk's engine (on the worker's GPU for
                 CuPy chunks or ``device="gpu"``) and kept in the run store (:mod:`dsort.core.runs`:
                 host memory within ``host_budget`` bytes, else a file under the job's directory).
                 The task returns a small :class:`~dsort.core.runs.Run` handle with the run's
                 regular sample.
``dsort-cuts``   one task: the window of every cut between output chunks in every run, from the
                 runs' samples (:func:`dsort.core.filesort.cut_runs`).
``dsort-merge``  one task per group of output chunks: its slices of every run, read with the
                 windows at their ends, cut exactly at the few keys inside those windows
                 (:func:`dsort.core.cuts.settled_slices`; runs on another host's disk: cut by
                 the cuts task, once) and merged; the output chunks are pieces of it. The last
                 merge to finish removes the runs.

More runs than one merge pass takes (``dsort.file-sort.max-runs``) are first merged in groups into
chained runs (:mod:`dsort.collections.passes`), in ranges of a run's rows; the cuts and merges
then take the chains for runs (arrays and frames alike; a frame of strings or objects chains its
pickled rows too: :func:`dsort.collections.frame_runs.frame_group_merge`).

Each task holds about three runs' worth of rows (``dsort.scale.external-run`` each, or a chunk), so
``da.store`` / ``to_npy_stack`` of the result runs in memory bounded by the chunk size and the run
store's budget, whatever the array's size. On a multi-process cluster the runs are files only, in a
directory all workers of one machine see (``local_directory``: dask's ``temporary-directory``, else
the system's temporary directory); on workers of several hosts each keeps its runs in its own dask
local directory, and a merge asks the worker that holds a run for its slices (hosts share no
directory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..core import chunk, plan
from ..core import filesort as F
from ..core import runs as R
from ..engine import device as dev
from . import remote
from . import tasks as T
from .passes import merge_tasks
from .stores import device_here


@dataclass(frozen=True)
class ArrayJob(remote.FromGraph):
    """What the tasks of one external array sort need: a :class:`~dsort.core.filesort.RunJob`
    (its ``layout``: key bytes, ``dtype`` the key's dtype or None for byte rows, then value
    bytes; its ``range_rows``: the input's chunk sizes), and the array's."""

    key_shape: tuple  # trailing shape of a key: () or (width,) for byte rows
    value_dtype: object  # a NumPy dtype, None: keys only
    value_shape: tuple = ()
    positions: bool = False  # the values are the keys' global int64 positions
    gpu: bool = False  # sort and merge on the worker's current GPU
    first_piece: int = 0  # the runs' count: pieces of the first pass are kept after them
    # ((keys' Chunks, values' Chunks or None), ((its chunks, their first rows) of each run))
    inputs: tuple | None = None

    def gpu_for(self, t: int):
        return device_here() if self.gpu else None

    def run_task(self, q: int) -> tuple:
        (keys, values), runs = self.inputs
        each, starts = runs[q]
        return (
            run_chunk,
            self,
            q,
            [T.ref(keys[i]) for i in each],
            None if values is None else [T.ref(values[i]) for i in each],
            starts,
        )


def run_chunk(job: ArrayJob, i: int, keys, values, starts) -> R.Run:
    """Input chunks (``keys``: a list of them; ``values``: theirs, or None), whose first rows are
    ``starts`` in the whole array, sorted together and kept as run ``i``."""
    if job.gpu:
        keys, values = (
            [chunk.on_gpu(k) for k in keys],
            None if values is None else [chunk.on_gpu(v) for v in values],
        )
    lengths = [len(k) for k in keys]
    keys, values = chunk.joined(keys), None if values is None else chunk.joined(values)
    gpu = device_here() if job.gpu else None
    xp, n = dev.xp_of(keys), len(keys)
    kb = job.layout.key_bytes
    key_bytes = xp.ascontiguousarray(keys).view(np.uint8).reshape(n, kb)
    if job.positions:
        values = xp.concatenate(
            [xp.arange(a, a + m, dtype=np.int64) for a, m in zip(starts, lengths)]
        )
    if values is None or not job.layout.payload:
        rows = key_bytes
    else:
        rows = xp.empty((n, job.layout.row_bytes), np.uint8)
        rows[:, :kb] = key_bytes
        rows[:, kb:] = (
            xp.ascontiguousarray(values).view(np.uint8).reshape(n, job.layout.row_bytes - kb)
        )
    watch = F.Stopwatch()
    run = F.sort_and_keep(job, i, rows, watch, gpu)
    remote.report_stages("run", watch, tier=run.tier)
    return run


def cuts(job: ArrayJob, *runs):
    """The exact cuts of the runs (or a first pass's chains: their tasks' results)."""
    watch = F.Stopwatch()
    got = F.cut_runs(job.final(), [F.handle(r) for r in runs], watch, settle_later=True)
    remote.report_stages("cuts", watch)
    return got


def merge_chunk(job: ArrayJob, cut, t: int):
    """Output chunk ``t``: ``(keys, values or None)``, merged from its slices of every run."""
    gpu = device_here() if job.gpu else None
    watch = F.Stopwatch()
    merged = F.merge_rows(job, cut, t, watch, gpu)
    remote.report_stages("merge", watch)
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
    values = (
        rows[:, lay.key_bytes :].copy().view(job.value_dtype).reshape((len(rows), *job.value_shape))
    )
    return keys, values


def _part(part, i: int, host: bool, lo: int = 0, hi=None):
    """Rows ``[lo, hi)`` of a merge's keys (``i`` 0) or values (1): an output chunk."""
    out = part[i][lo:hi]
    if host and dev.is_device_array(out):
        return dev.to_host(out)
    return out if lo == 0 and (hi is None or hi == len(part[i])) else out.copy()


def graph(
    token: str, key_chunks, value_chunks, sizes, members, job: ArrayJob, owners=None
) -> tuple[dict, list]:
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
        dsk[key] = T.task(
            key,
            run_chunk,
            job,
            g,
            [T.ref(key_chunks[i]) for i in each],
            values,
            [starts[i] for i in each],
        )
        run_keys.append(key)
    run_owners = [owners[each[0]] for each in members] if owners else None
    _, merges, _, _ = merge_tasks(
        dsk, job, token, run_keys, cuts, merge_chunk, len(job.range_rows), owners=run_owners
    )
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
