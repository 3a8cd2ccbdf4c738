"""The external sort of dask arrays: the file sort's runs, cuts and merges, fed by chunks.

``strategy="external"`` of :func:`dsort.sort` / ``argsort`` / ``sort_by_key`` builds this graph
instead of :mod:`dsort.graph`'s. The bulk data never stays in dask's memory:

``dsort-run``    one task per input chunk: the chunk's keys and values (or global positions) as
                 fixed-width rows (key bytes, then value bytes), sorted by their keys on the
                 chunk's engine (on the worker's GPU for CuPy chunks or ``device="gpu"``) and kept
                 in the run store (:mod:`dsort.runs`: host memory within ``host_budget`` bytes,
                 else a file under the job's directory). The task returns a small
                 :class:`~dsort.runs.Run` handle with the run's regular sample.
``dsort-cuts``   one task: the exact cut of every output chunk in every run, from the samples and
                 the few keys inside their windows (:func:`dsort.filesort.cut_runs`).
``dsort-merge``  one task per output chunk: its slices of every run, read and merged; the chunk's
                 keys and values. The last merge to finish removes the runs.

Each task holds about three chunks' worth of rows, so ``da.store`` / ``to_npy_stack`` of the
result runs in memory bounded by the chunk size and the run store's budget, whatever the array's
size. On a multi-process cluster the runs are files only (every worker reads any slice), in a
directory all workers see (``local_directory``: dask's ``temporary-directory``, else the system's
temporary directory, which on one machine they share).
"""

from __future__ import annotations

import atexit
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from dask._task_spec import Task, TaskRef

from . import chunk
from . import filesort as F
from . import runs as R
from .engine import device as dev

PREFIX = "dsort-runs"  # the run directories: PREFIX-PID-TOKEN, PID the process that built the graph


@dataclass(frozen=True)
class ArrayJob:
    """What the tasks of one external array sort need (the attributes of :class:`dsort.filesort.Job`
    that :func:`~dsort.filesort.sort_and_keep`, :func:`~dsort.filesort.cut_runs` and
    :func:`~dsort.filesort.merge_rows` read)."""

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


def _device():
    import cupy

    return cupy.cuda.Device().id


def run_chunk(job: ArrayJob, i: int, keys, values, offset: int) -> R.Run:
    """Input chunk ``i`` (its keys, and values or None), sorted and kept as run ``i``."""
    if job.gpu:
        keys, values = chunk.on_gpu(keys), None if values is None else chunk.on_gpu(values)
    gpu = _device() if job.gpu else None
    xp, n = dev.xp_of(keys), len(keys)
    kb = job.layout.key_bytes
    key_bytes = xp.ascontiguousarray(keys).view(np.uint8).reshape(n, kb)
    if job.positions:
        values = xp.arange(offset, offset + n, dtype=np.int64)
    if values is None or not job.layout.payload:
        rows = key_bytes
    else:
        rows = xp.empty((n, job.layout.row_bytes), np.uint8)
        rows[:, :kb] = key_bytes
        rows[:, kb:] = xp.ascontiguousarray(values).view(np.uint8).reshape(n, job.layout.row_bytes - kb)
    return F.sort_and_keep(job, i, rows, F.Stopwatch(), gpu)


def cuts(job: ArrayJob, *runs):
    return F.cut_runs(job, list(runs))


def merge_chunk(job: ArrayJob, cut, t: int):
    """Output chunk ``t``: ``(keys, values or None)``, merged from its slices of every run."""
    gpu = _device() if job.gpu else None
    merged = F.merge_rows(job, cut, t, F.Stopwatch(), gpu)
    R.finish(job.store, t, len(job.range_rows))
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


def _part(part, i: int, host: bool):
    out = part[i]
    return dev.to_host(out) if host and dev.is_device_array(out) else out


def graph(token: str, key_chunks, value_chunks, sizes, job: ArrayJob) -> tuple[dict, list]:
    """``(tasks, merge keys)``: the run, cuts and merge tasks of the sort of the chunks
    ``key_chunks`` (task keys; ``value_chunks``: task keys or None each) of ``sizes`` rows; merge
    ``t`` gives output chunk ``t``'s ``(keys, values)`` (see :func:`output_tasks`)."""
    names = {p: f"dsort-{p}-{token}" for p in F.PHASES}
    dsk = {}
    offsets = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)[:-1]]).astype(int).tolist()
    run_keys = []
    for i, (k, v, off) in enumerate(zip(key_chunks, value_chunks, offsets)):
        key = (names["run"], i)
        dsk[key] = Task(key, run_chunk, job, i, TaskRef(k), None if v is None else TaskRef(v), off)
        run_keys.append(key)
    cut = names["cuts"]
    dsk[cut] = Task(cut, cuts, job, *map(TaskRef, run_keys))
    merges = []
    for t in range(len(sizes)):
        key = (names["merge"], t)
        dsk[key] = Task(key, merge_chunk, job, TaskRef(cut), t)
        merges.append(key)
    return dsk, merges


def output_tasks(merges, outputs, host: bool) -> dict:
    """Chunk tasks of the results: ``outputs`` is ``[(name, ndim, 0 for keys or 1 for values)]``."""
    dsk = {}
    for name, nd, which in outputs:
        for i, m in enumerate(merges):
            key = (name, i) + (0,) * (nd - 1)
            dsk[key] = Task(key, _part, TaskRef(m), which, host)
    return dsk


def store_config(token: str, row_bytes: int, local_directory, host_budget: int) -> R.StoreConfig:
    """The run store of one sort: ``host_budget`` bytes in memory (0: files only), files in a new
    directory under ``local_directory``, removed by the last merge or, failing that, when this
    process exits; stores left by killed processes are removed here."""
    import dask

    base = Path(local_directory or dask.config.get("temporary-directory", None) or tempfile.gettempdir()).absolute()
    R.remove_leftovers(base, PREFIX)
    directory = str(base / f"{PREFIX}-{os.getpid()}-{token[:16]}")
    atexit.register(R.drop, token, directory)
    return R.StoreConfig(token, directory, row_bytes, host_budget, 0)
