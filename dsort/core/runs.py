"""The run store: sorted runs kept outside dask's memory, and read back in slices.

A *run* is one sorted block of fixed-width rows (a record, or a ``.npy`` element's bytes). A run
task puts it here and hands the task graph only a :class:`~dsort.core.run_handles.Run` handle
(where it is, how many rows, its regular sample), never the rows. The store puts a run whole in
the first of its tiers with room (:mod:`dsort.core.run_tiers`: shared between this host's
processes on the GPU, on the GPU, in host memory, on disk).

A store lives in one process (:func:`store`; :mod:`dsort.core.run_lifetime` keeps them): the
embedded (threaded) service keeps the memory tiers; on a distributed cluster every worker keeps its
runs on its GPU (shared) or on disk in a directory all workers see, so any worker can read any
slice, or, on hosts that share nothing, on its own disk, where its cluster
(``StoreConfig.cluster``, :mod:`dsort.collections.remote`) reads them for the others.
:meth:`RunStore.close` frees everything the store holds and removes its files (each named for its
run's making), never the job's directory, whose being there says a compute of the job is under
way; a worker's shared runs are freed once the job's directory is gone: the last merge of a
compute removes it once every merge has read its slices (:func:`finish`). A compute of part of a
result (one partition, ``head()``), or one that fails, leaves the runs (on the GPUs too) until the
process that built the graph exits or a later compute of the whole result finishes.

Rows are read back as slices ``[lo, hi)`` of a run, onto the device that asks (a CuPy array on
that GPU) or into host memory: the merges read exactly the rows of their output range. A run that
cannot be read (its process or file gone) is made again by the reader's ``recover``.
"""

from __future__ import annotations

import bisect
import os
import shutil
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..engine import device as dev
from ..engine import ipc
from . import run_lifetime as lifetime
from .run_handles import (
    Chain,
    Layout,
    Run,
    RunsGone,
    StoreConfig,
    bare,
    cluster_of,
    flat,
    joined,
    new_making,
)
from .run_tiers import Budget, DeviceTier, DiskTier, HostTier, SharedTier

__all__ = [
    "Chain",
    "Layout",
    "Run",
    "RunStore",
    "RunsGone",
    "StoreConfig",
    "bare",
    "drop",
    "finish",
    "new_making",
    "store",
]

TIERS = ("shared", "device", "host", "disk")
HOST_READERS = 8  # threads copying shared runs' slices into host memory at once
RECOVERIES = 2  # times a read makes its lost runs again before it fails
drop = lifetime.drop


class RunStore:
    def __init__(self, config: StoreConfig):
        self.config = config
        self.cluster = cluster_of(config)
        self._lock = threading.Lock()
        self._done: set = set()  # (compute, reader) of the readers done
        w = self.cluster.worker()
        self.address = w.address if w is not None else None  # this worker (a shared run's owner)
        self.worker = self.directory = None
        if config.local and w is not None:
            self.worker = w.address
            self.directory = os.path.join(w.local_directory, f"dsort-runs-{config.job}")
        self.directory = self.directory or config.directory
        self.recovered: dict[int, Run] = {}  # runs of lost workers, sorted again here
        self._recovering: dict[int, threading.Lock] = {}  # one making of each lost run at a time
        self._kept: list = []  # futures of runs made again through the scheduler (RunStore.keep)
        # index -> times made again for this store (RunStore.making)
        self._makings: dict[int, int] = {}
        self.budget = Budget()
        self.shared = SharedTier(config, self.budget, self, self.address)
        self.device = DeviceTier(config, self.budget)
        self.host = HostTier(config, self.budget)
        self.disk = DiskTier(config, self.directory, self.worker)
        self.tiers = {t.name: t for t in (self.shared, self.device, self.host, self.disk)}

    # -- putting a run -------------------------------------------------------------------------

    def put(self, index: int, rows, *, sample=None, made: str | None = None) -> Run:
        """Keep sorted ``rows`` (``(n, row_bytes)`` uint8, NumPy or CuPy) as run ``index`` in the
        first tier that takes it; rows of another width are kept as they are, the run's handle
        saying their width. ``made``: this making's name where files were made for it first
        (:meth:`file_for`)."""
        made = made or new_making()
        # a run put again (made again, or by a new compute): its old rows in memory let go (a
        # shared one once no other process maps it), its bytes no longer held; its old files
        # stay until the store closes (other merges may still read that making: file_for)
        for tier in (self.shared, self.device, self.host):
            tier.free(index)
        self.budget.give_back(index)
        for tier in self.tiers.values():
            run = tier.put(index, rows, sample, made)
            if run is not None:
                break
        return (
            run
            if rows.shape[1] == self.config.row_bytes
            else replace(run, row_bytes=int(rows.shape[1]))
        )

    def file_for(self, index: int, made: str, kind: str, suffix: str) -> Path:
        """A new file of run ``index``'s making ``made`` in the store's directory, removed with the
        run (:meth:`dsort.core.run_tiers.DiskTier.file_for`)."""
        return self.disk.file_for(index, made, kind, suffix)

    # -- reading slices ------------------------------------------------------------------------

    def read(self, run: Run, lo: int, hi: int, gpu: int | None = None):
        """Rows ``[lo, hi)`` of ``run``: a CuPy array on GPU ``gpu``, or NumPy where ``gpu`` is
        None. A slice of a run held in memory may be a view: read it, never write it."""
        return self.read_many([(run, lo, hi)], gpu)[0]

    def read_many(self, items, gpu: int | None = None, recover=None, fetched=None) -> list:
        """Rows ``[lo, hi)`` of several runs (``items``: ``(run, lo, hi)``), as :meth:`read` gives
        them. To a GPU, every slice not already there travels in one stream of staging pieces.
        Slices of runs on another worker's disk are read there and only they travel (see
        :meth:`fetch_remote`; ``fetched``: its result for these items, where the caller fetched them
        first). With ``recover`` (``recover(index) -> Run``), a run that cannot be read (another
        process's GPU run whose process is gone, a file removed, a run this store no longer holds)
        is made again by it, once in this process, and read instead; so is one made again here
        before."""
        items, where = flat(items)
        for attempt in range(RECOVERIES + 1):
            items = [self._again(it) for it in items]
            try:
                return joined(self._read(items, gpu, recover, fetched), where)
            except (OSError, KeyError) as e:
                lost = {} if recover is None or attempt == RECOVERIES else self._lost(items, e)
                if not lost:
                    raise
            failed = {
                run.index: run for run, _, _ in items if isinstance(run, Run) and run.index in lost
            }
            # a run made again here and lost since: made again once more (not one made meanwhile)
            with self._lock:
                for i in lost:
                    if i in failed and self.recovered.get(i) is failed[i]:
                        del self.recovered[i]
            # let go of the thread while they are made (their inputs too, by other tasks), or
            # another task of this process makes them
            with self.cluster.seceded():
                for i in lost:
                    self.recover_once(i, recover)
        raise AssertionError("unreachable")

    def _again(self, item):
        """``item`` (``(run, lo, hi)``) of the run made again here in place of a lost one."""
        run = item[0]
        again = self.recovered.get(run.index) if isinstance(run, Run) else None
        return item if again is None or again is run else (again, *item[1:])

    def _lost(self, items, error) -> set:
        """The indices of the runs of ``items`` that could not be read (``error``: the read's)."""
        if isinstance(error, RunsGone):  # another process's GPU runs: those that failed to open
            return set(error.indices)
        return {
            run.index for run, _, _ in items if isinstance(run, Run) and not self._readable(run)
        }

    def _readable(self, run: Run) -> bool:
        if run.tier == "disk":
            return os.path.exists(run.path)
        return (
            run.tier == "shared"
            and run.shared.owner != ipc.PROCESS
            or self.tiers[run.tier].holds(run.index)
        )

    def making(self, index: int) -> int:
        """How many times run ``index`` has been made again for this store before (counted here):
        the processes that ask for a lost run to be made again name that making alike."""
        with self._lock:
            n = self._makings.get(index, 0)
            self._makings[index] = n + 1
            return n

    def keep(self, future) -> None:
        """Hold a dask future (of a run made again through the scheduler) while this store lives:
        the scheduler keeps its result, and another process asking for it gets the same run."""
        with self._lock:
            self._kept.append(future)

    def _read(self, items, gpu, recover, fetched) -> list:
        out: list = [None] * len(items)
        segments = []  # (item, run, first byte in the run, bytes, first byte in the upload)
        total = 0
        if fetched is None:
            fetched = self.fetch_remote(items, recover)
        widths = [run.row_bytes or self.config.row_bytes for run, _, _ in items]
        others = {}  # other processes' shared runs, by index: opened for this read only
        for i, (run, _, _) in enumerate(items):
            if i not in fetched and run.tier == "shared" and run.shared.owner != ipc.PROCESS:
                others.setdefault(run.index, run)
        # shared run -> [(item, lo, hi)] read into host memory: one copy per run
        host_reads: dict = {}
        with self.shared.opened(others) as opened:
            opened = dict(zip(others, opened))
            for i, (run, lo, hi) in enumerate(items):
                lo, hi, rb = int(lo), int(hi), widths[i]
                if i in fetched:
                    run, lo, hi = fetched[i], 0, hi - lo  # the slice itself, now in this process
                if isinstance(run, np.ndarray) and gpu is None:
                    out[i] = run
                elif isinstance(run, np.ndarray):
                    segments.append((i, run, 0, run.nbytes, total))
                    total += run.nbytes
                elif run.tier == "disk" and gpu is None:
                    out[i] = self.disk.read(run, lo, hi, rb)
                elif run.tier == "host" and gpu is None:
                    out[i] = self.host.get(run.index)[lo:hi]
                elif run.tier in ("device", "shared"):
                    src, d = opened.get(run.index) or (
                        self.tiers[run.tier].get(run.index),
                        run.device,
                    )
                    if src is None:
                        raise OSError(
                            f"run {run.index} is on a GPU this process does not see (PCI bus "
                            f"{run.shared.bus})"
                        )
                    if gpu is None and run.tier == "shared":
                        host_reads.setdefault(run.index, (src, d, []))[2].append((i, lo, hi))
                    elif gpu is None:
                        out[i] = dev.to_host(src[lo:hi])
                    elif gpu != d:
                        out[i] = dev.peer_copy(src[lo:hi], d, gpu)
                    # another process's rows are copied before they close; this one's are read in
                    # place
                    else:
                        out[i] = src[lo:hi].copy() if run.index in opened else src[lo:hi]
                else:
                    segments.append((i, run, lo * rb, (hi - lo) * rb, total))
                    total += (hi - lo) * rb
            # the runs' windows gathered and copied out by several threads at once (the cuts)
            if host_reads:
                with ThreadPoolExecutor(
                    min(HOST_READERS, len(host_reads)), thread_name_prefix="dsort-windows"
                ) as pool:
                    done = pool.map(
                        lambda r: dev.slices_to_host(r[0], r[1], [(lo, hi) for _, lo, hi in r[2]]),
                        host_reads.values(),
                    )
                    for (_, _, reads), got in zip(host_reads.values(), done):
                        for (i, _, _), rows in zip(reads, got):
                            out[i] = rows
        if segments:
            starts = [s[4] for s in segments]

            def fill(buf, off):
                end = off + len(buf)
                k = bisect.bisect_right(starts, off) - 1
                while k < len(segments) and segments[k][4] < end:
                    _, run, first, size, at = segments[k]
                    a, b = max(off, at), min(end, at + size)
                    if a < b:
                        dst = buf[a - off : b - off]
                        if isinstance(run, np.ndarray):
                            np.copyto(dst, run.reshape(-1)[first + a - at : first + b - at])
                        elif run.tier == "host":
                            np.copyto(
                                dst,
                                self.host.get(run.index).reshape(-1)[
                                    first + a - at : first + b - at
                                ],
                            )
                        else:
                            self.disk.read_into(run, dst, first + a - at)
                    k += 1

            flat = dev.upload(total, fill, gpu)
            for i, _, _, size, at in segments:
                out[i] = flat[at : at + size].reshape(size // widths[i], widths[i])
        return out

    def release(self, items) -> None:
        """Let this process's mapped pages of the slices ``items`` (``(run, lo, hi)``) of run files
        go (:meth:`~dsort.core.diskio.Handles.release`): their reader has copied what it needs. A
        merge's slices otherwise stay resident in the process until its end: the whole input
        once all merges are done, whatever the memory limit."""
        for run, lo, hi in flat(items)[0]:
            if isinstance(run, Run) and run.tier == "disk" and run.path:
                rb = run.row_bytes or self.config.row_bytes
                self.disk.release(run, int(lo), int(hi), rb)

    def gather(self, run, lo, hi, columns: int):
        """The first ``columns`` bytes of rows ``[lo[j], hi[j])`` of ``run`` for every ``j``, joined
        in order (``(rows, columns)`` uint8): one gather where :meth:`read_many` would read each
        range apart (the cuts read a window of every run around every cut, thousands of them).
        None where the run is not in this process's memory or a file it sees (a GPU's, another
        process's or another machine's run, a chain): the caller reads those with
        :meth:`read_many`."""
        if isinstance(run, Chain) or self.cluster.everywhere():
            return None
        if (
            run.tier == "host"
            and self.host.holds(run.index)
            and isinstance(self.host.get(run.index), np.ndarray)
        ):
            rows = self.host.get(run.index)
        # else gone or elsewhere: read_many fetches or makes it again
        elif run.tier == "disk" and os.path.exists(run.path):
            rb = run.row_bytes or self.config.row_bytes
            rows = self.disk.read(run, 0, run.rows, rb) if run.rows else np.empty((0, rb), np.uint8)
        else:
            return None
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        lengths = np.maximum(hi - lo, 0)
        at = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths) + np.arange(
            int(lengths.sum()), dtype=np.int64
        )
        got = rows[:, :columns][at]
        if run.tier == "disk":
            self.release([(run, 0, run.rows)])
        return got

    def fetch_remote(self, items, recover=None) -> dict:
        """``{item: NumPy rows}`` for the items whose run lies on another machine's disk, read
        there by the store's cluster (only the slices travel; runs of workers that are gone made
        again here first by ``recover``): :meth:`dsort.collections.remote.DaskCluster.fetch`. The
        caller must hold nothing another task of this worker waits for (a GPU slot): while it
        waits, the worker starts other tasks on its thread, and takes a thread back only when one
        of them ends."""
        return self.cluster.fetch(self, items, recover)

    # -- the end ---------------------------------------------------------------------------------

    def recover_once(self, index: int, recover) -> Run:
        """Run ``index`` of a lost worker made again here by ``recover(index)``, once in this
        process however many tasks ask for it at once (the others wait for it)."""
        with self._lock:
            gate = self._recovering.setdefault(index, threading.Lock())
        with gate:
            with self._lock:
                again = self.recovered.get(index)
            if again is None:
                again = recover(index)
                with self._lock:
                    self.recovered[index] = again
        return again

    def free(self, indices) -> None:
        """Free the runs ``indices`` that this store holds (in its memory, or files in its
        directory): their readers are done."""
        for i in indices:
            for tier in self.tiers.values():
                tier.free(i)
            self.budget.give_back(i)

    def close(self) -> None:
        """Close the other processes' runs mapped here, free every run in memory (shared ones once
        no other process maps them) and remove the files made here (:meth:`file_for`): only
        those. The job's directory stays: it is removed whole by the last merge (:func:`finish`),
        or when the process that built the graph exits. Its being there says that a compute of the
        job is under way; a store closed by the watcher, late, removed the next compute's
        directory (empty yet, its runs on the GPUs), and the processes of that compute then took
        their own stores for the last compute's and dropped them, their runs with them (a run made
        again in 1 of 3 sorts on four GPUs)."""
        for tier in self.tiers.values():
            tier.close()
        self._kept.clear()
        self.recovered.clear()
        self.budget.clear()
        # a worker's own directory on a cluster of hosts
        if self.directory != self.config.directory:
            shutil.rmtree(self.directory, ignore_errors=True)
            shutil.rmtree(self.config.directory, ignore_errors=True)


def visible(run: Run) -> bool:
    """Whether this process reads ``run`` itself: its file is visible here, or its GPU (a shared
    run's; the process that made it reads it in place)."""
    if run.tier == "shared":
        return run.shared.owner == ipc.PROCESS or ipc.local_device(run.shared) is not None
    return os.path.exists(run.path)


def read_slices(config: StoreConfig, items) -> list:
    """Rows ``[lo, hi)`` of each ``(run, lo, hi)``, read by the worker whose disk holds the runs
    (a task pinned there)."""
    return store(config).read_many(items)


# -- the stores of this process ------------------------------------------------------------------


def store(config: StoreConfig) -> RunStore:
    """This process's store for ``config.job`` (made on first use: each distributed worker has its
    own). A store whose runs may be shared (on the GPUs) is made with its job's directory, under
    the watcher's lock: the watcher, still following the job's last compute, would otherwise drop
    the new compute's store before its first run made the directory again, and the tasks of that
    compute would keep their runs in two stores."""
    if config.shared_fraction:
        with lifetime.watch_lock:
            lifetime.drop_stale(config.job, config.directory)
            s, _ = lifetime.register(config.job, lambda: RunStore(config))
            os.makedirs(config.directory, exist_ok=True)
            lifetime.follow(config.job, config.directory)
        return s
    s, made = lifetime.register(config.job, lambda: RunStore(config))
    if made and s.address is not None and os.path.isdir(config.directory):
        # a worker reading another process's runs: its store goes when the job does
        lifetime.follow(config.job, config.directory)
    return s


def finish(config: StoreConfig, reader: int, readers: int, runs=()) -> None:
    """Note that ``reader`` (one of ``readers`` tasks, each reading its slices once) is done with
    the job's runs ``runs`` (the cuts' handles); the last one to finish removes them. Readers count
    within one compute of the job (its runs' making): a partial compute's readers are not counted
    by a later one. A store with memory tiers lives in one process, which counts; a store read by
    many processes counts marker files in the runs' directory. Runs made again for readers that
    dask runs after the last one (a lost worker's finished outputs, made again) stay until the
    process that built the graph exits: such readers come several at once, and the first to end
    would remove what the others read."""
    compute = runs[0].made if len(runs) else ""
    s = store(config)
    with s._lock:
        s._done.add((compute, reader))
        done = sum(1 for c, _ in s._done if c == compute)
    if not (config.host_budget or config.device_budget):
        d = Path(config.directory)
        try:
            d.mkdir(parents=True, exist_ok=True)
            (d / f"done-{compute}-{reader:06d}").touch()
            done = sum(1 for e in os.scandir(d) if e.name.startswith(f"done-{compute}-"))
        except FileNotFoundError:  # another process finished meanwhile and removed it all
            done = readers
    if done >= readers:
        drop(config.job, config.directory)
