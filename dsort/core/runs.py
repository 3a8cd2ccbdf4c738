"""The run store: sorted runs kept outside dask's memory, and read back in slices.

A *run* is one sorted block of fixed-width rows (a record, or a ``.npy`` element's bytes). A run
task puts it here and hands the task graph only a :class:`Run` handle (where it is, how many rows,
its regular sample), never the rows. Three tiers, tried in this order while their budgets allow:

``shared``  on the GPU that sorted it, where every worker process of the machine opens it
            (CUDA IPC) and copies its slices device to device: distributed GPU workers on one
            host, while the GPU's used memory stays within ``StoreConfig.shared_fraction``;
``device``  on the GPU that sorted it (nothing crosses PCIe twice when the data fits on the GPUs);
``host``    in this process's memory;
``disk``    one file per run in the store's directory (the job's local directory).

Budgets are bytes per tier (the device budget per GPU); a run goes whole to the first tier with
room. A store lives in one process: the embedded (threaded) service keeps the memory tiers; on a
distributed cluster every worker keeps its runs on its GPU (shared) or on disk in a directory all
workers see, so any worker can read any slice. :meth:`RunStore.close` frees everything the store
holds and removes its files (each named for its run's making), never the job's directory, whose
being there says a compute of the job is under way; a worker's shared runs are freed once the
job's directory is gone: the last merge of a compute removes it once every merge has read its
slices (each closes what it opened before it counts itself done). A compute of part of a result
(one partition, ``head()``), or one that fails, leaves the runs (on the GPUs too) until the
process that built the graph exits or a later compute of the whole result finishes.

Rows are read back as slices ``[lo, hi)`` of a run, onto the device that asks (a CuPy array on
that GPU) or into host memory: the merges read exactly the rows of their output range.
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import shutil
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from .. import engine as engines
from ..engine import device as dev
from ..engine import ipc
from .diskio import Handles, write_file

TIERS = ("shared", "device", "host", "disk")
HOST_READERS = 8  # threads copying shared runs' slices into host memory at once
RECOVERIES = 2  # times a read makes its lost runs again before it fails
# A merge waits at most this long for another worker to read its slices of that worker's runs
# (then makes those runs again itself, or fails saying what that worker was doing): a read that
# never comes back (seen twice in tests/test_two_pass.py on the 2-core machine, cause not found;
# the hosts test's "gone" workers were scheduler_identity's race) must not hang the sort; where
# nothing can make them again, the read is asked once more.
REMOTE_READ_SECONDS = 120.0
# How often a task waiting for slices read on other workers looks whether those workers are still
# there: a read pinned to a worker that died waits for it for ever, so the wait ends only at a look.
REMOTE_POLL_SECONDS = 0.5
logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Layout:
    """Fixed-width rows and where their key is: the first ``key_bytes`` bytes of a row, one
    element of ``dtype`` where it is set (a ``.npy`` element, a dask array's key) or else
    compared as unsigned bytes (a record's key); any bytes after the key are its payload."""

    row_bytes: int
    key_bytes: int
    dtype: str | None = None

    def keys(self, rows):
        """The sort keys of ``rows`` (``(n, row_bytes)`` uint8, NumPy or CuPy) in the engines'
        spelling: a 1-D array of ``dtype``, or C-contiguous byte rows ``(n, key_bytes)``."""
        if self.key_bytes < self.row_bytes:
            rows = engines.contiguous(rows[:, : self.key_bytes])
        return rows if self.dtype is None else rows.view(self.dtype).reshape(-1)

    def rows_of(self, keys):
        """Rows whose bytes are the keys (only where the key is the whole row)."""
        return keys.view(np.uint8).reshape(len(keys), self.row_bytes)

    @property
    def payload(self) -> bool:
        """True when rows carry bytes beyond the key (they then follow the key's order)."""
        return self.key_bytes < self.row_bytes


def new_making() -> str:
    """A new making's name: a run's (:attr:`Run.made`), and the files made for it carry it."""
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class Run:
    """A handle to one sorted run: small enough to travel through the task graph."""

    job: str
    index: int
    rows: int
    tier: str
    path: str | None = None
    device: int | None = None
    sample: object = field(default=None, repr=False, compare=False)  # keys at run positions 0, s, 2s, ... (NumPy)
    worker: str | None = None  # the dask worker whose own disk holds it (a store with ``local``)
    row_bytes: int | None = None  # its rows' width where the store's differs (a dataframe's keys at its own string widths)
    shared: object = None  # a shared run's handle (:class:`dsort.engine.ipc.Shared`)
    made: str = field(default_factory=new_making, compare=False)  # this making of it (a compute of the job)

    def __sizeof__(self) -> int:
        """Its sample's bytes too: dask places the tasks beside a run by them (see
        :func:`dsort.collections.tasks.task_beside`)."""
        return object.__sizeof__(self) + (self.sample.nbytes if isinstance(self.sample, np.ndarray) else 0)


@dataclass(frozen=True)
class Chain:
    """Consecutive sorted pieces read as one run: a group of runs merged by a first pass (more runs
    than one merge pass takes, :mod:`dsort.core.filesort`). A slice of it is read from the pieces
    it spans, joined; its sample is theirs, end to end."""

    job: str
    index: int
    pieces: tuple  # the pieces' Run handles, in order
    tier: str = "chain"
    worker: None = None  # its pieces say where they are
    row_bytes: int | None = None

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.pieces)

    @property
    def made(self) -> str:
        return self.pieces[0].made if self.pieces else ""

    @property
    def sample(self):
        got = [p.sample for p in self.pieces if p.sample is not None]
        return np.concatenate(got) if got else None

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + sum(p.__sizeof__() for p in self.pieces)

    def spans(self, lo: int, hi: int) -> list:
        """``(piece, lo, hi)`` of the pieces that rows ``[lo, hi)`` of the chain cover, in order;
        at least one (an empty slice of the first piece where ``hi <= lo``)."""
        out, at = [], 0
        for p in self.pieces:
            a, b = max(lo - at, 0), min(hi - at, p.rows)
            if a < b:
                out.append((p, a, b))
            at += p.rows
        return out or [(self.pieces[0], 0, 0)]


def bare(run):
    """``run`` (a :class:`Run` or :class:`Chain`) without its sample: what the merges need."""
    if isinstance(run, Chain):
        return replace(run, pieces=tuple(replace(p, sample=None) for p in run.pieces))
    return replace(run, sample=None)


def _flat(items) -> tuple[list, list | None]:
    """``items`` (``(run, lo, hi)``) with every chain's slice replaced by its pieces' slices, and
    where each item's parts lie in the result (None where there is no chain)."""
    if not any(isinstance(run, Chain) for run, _, _ in items):
        return list(items), None
    flat, where = [], []
    for run, lo, hi in items:
        parts = run.spans(int(lo), int(hi)) if isinstance(run, Chain) else [(run, lo, hi)]
        where.append((len(flat), len(flat) + len(parts)))
        flat.extend(parts)
    return flat, where


def _joined(out: list, where) -> list:
    """The slices read for :func:`_flat`'s items, each chain's parts joined in order."""
    if where is None:
        return out
    return [out[a] if b - a == 1 else engines.get(out[a]).concatenate(out[a:b]) for a, b in where]


@dataclass(frozen=True)
class StoreConfig:
    """How a job's runs are kept: budgets in bytes (device: per GPU) and the directory for the disk tier."""

    job: str
    directory: str
    row_bytes: int
    host_budget: int = 0
    device_budget: int = 0
    local: bool = False  # on a dask cluster: runs on each worker's own local directory, read where they are
    shared_fraction: float = 0.0  # runs on the GPUs, shared by this host's processes, while a GPU's use stays within this
    shared_budget: int | float | None = None  # and while its shared runs on that GPU stay within these bytes (a float: that share of it)


class RunStore:
    def __init__(self, config: StoreConfig):
        self.config = config
        self._lock = threading.Lock()
        self._used = {"host": 0}
        self._data: dict[int, object] = {}
        self._files = Handles()  # the run files' mappings, kept while the store lives
        self._done: set = set()  # (compute, reader) of the readers done
        self.worker = self.directory = None
        w = this_worker()
        self.address = w.address if w is not None else None  # this worker (a shared run's owner)
        if config.local and w is not None:
            self.worker = w.address
            self.directory = os.path.join(w.local_directory, f"dsort-runs-{config.job}")
        self.directory = self.directory or config.directory
        self.recovered: dict[int, Run] = {}  # runs of lost workers, sorted again here
        self._recovering: dict[int, threading.Lock] = {}  # one making of each lost run at a time
        self._kept: list = []  # dask futures of runs made again through the scheduler (RunStore.keep)
        self._makings: dict[int, int] = {}  # index -> times made again for this store (RunStore.making)
        self._reserved: dict[int, tuple] = {}  # index -> (budget key, bytes) of the runs held within a budget
        self._shared: set[int] = set()  # the runs this process shares with the others (their owner: this store)
        self._maps: set = set()  # other processes' shared runs mapped here, kept open until the store closes
        self._written: dict[int, list] = {}  # index -> the files made for that run here (RunStore.file_for)
        self._hold: Path | None = None  # this process's mark that it maps other processes' runs (hold)
        self._waited_out = False  # a run of this store waited RECLAIM_SECONDS for room in vain (_room)

    # -- putting a run -------------------------------------------------------------------------

    def _reserve(self, tier: str, key, nbytes: int, budget: int, index: int | None = None) -> bool:
        with self._lock:
            if self._used.get(key, 0) + nbytes > budget:
                return False
            self._used[key] = self._used.get(key, 0) + nbytes
            if index is not None:
                self._reserved[index] = (key, nbytes)
            return True

    def _within_shared(self, gpu: int, nbytes: int, index: int) -> bool:
        """Whether ``nbytes`` more of shared runs on GPU ``gpu`` stay within the store's cap
        (``StoreConfig.shared_budget``; reserved for run ``index`` if so)."""
        cap = self.config.shared_budget
        if isinstance(cap, float):  # a share of the GPU's memory
            cap = int(cap * ipc.total_memory(gpu))
        return cap is None or self._reserve("shared", ("shared", gpu), nbytes, cap, index)

    def _unreserve(self, index: int) -> None:
        with self._lock:
            key, nbytes = self._reserved.pop(index, (None, 0))
            if key is not None:
                self._used[key] -= nbytes

    def put(self, index: int, rows, *, sample=None, made: str | None = None) -> Run:
        """Keep sorted ``rows`` (``(n, row_bytes)`` uint8, NumPy or CuPy) as run ``index``; rows of
        another width are kept as they are, the run's handle saying their width. ``made``: this
        making's name where files were made for it first (:meth:`file_for`)."""
        made = made or new_making()
        if rows.shape[1] != self.config.row_bytes:
            return replace(self._put(index, rows, sample, made), row_bytes=int(rows.shape[1]))
        return self._put(index, rows, sample, made)

    def _put(self, index: int, rows, sample, made: str) -> Run:
        n, nbytes = len(rows), int(rows.nbytes)
        cfg = self.config
        self._unreserve(index)  # a run put again (made again, or by a new compute): its old bytes no longer held
        if dev.is_device_array(rows):
            gpu = rows.device.id
            if cfg.shared_fraction and nbytes and self._within_shared(gpu, nbytes, index):
                if _room(self, gpu, nbytes, cfg.shared_fraction):
                    _watch(self)  # first: the job's directory made, this store kept until it is gone
                    got = ipc.share(rows)
                    if got is not None:
                        self._data[index], handle = got
                        self._shared.add(index)
                        return Run(cfg.job, index, n, "shared", device=gpu, sample=sample, worker=self.address, shared=handle, made=made)
                self._unreserve(index)
            if self._reserve("device", ("device", gpu), nbytes, cfg.device_budget, index):
                self._data[index] = rows
                return Run(cfg.job, index, n, "device", device=gpu, sample=sample, made=made)
            if self._reserve("host", "host", nbytes, cfg.host_budget, index):
                self._data[index] = dev.to_host(rows)
                return Run(cfg.job, index, n, "host", sample=sample, made=made)
        elif self._reserve("host", "host", nbytes, cfg.host_budget, index):
            self._data[index] = rows
            return Run(cfg.job, index, n, "host", sample=sample, made=made)
        path = self.file_for(index, made, "run", ".bin")
        write_file(path, rows)
        return Run(cfg.job, index, n, "disk", path=str(path), sample=sample, worker=self.worker, made=made)

    def file_for(self, index: int, made: str, kind: str, suffix: str) -> Path:
        """A new file of run ``index``'s making ``made`` (``KIND-INDEX-MADE.SUFFIX`` in the store's
        directory, made again where the last compute of the job removed it), removed with the run
        (:meth:`free`, :meth:`close`). Each making has files of its own: a store that the watcher
        closes (its job's directory gone: the last compute is over) removes only its own, never
        those of the job's next compute, which the other processes may have begun to write (they
        were removed with the whole directory, and a new run lost: 1 median run in 6 of
        ``bench_distributed.py --cpu --workers 4``). A run's earlier makings stay until then too:
        a lost piece is made again from its group's runs, all sorted again here, and other merges
        still read this worker's first making of them."""
        path = Path(self.directory) / f"{kind}-{index:06d}-{made}{suffix}"
        with _watch_lock:  # not while the watcher closes this store: the file is then no longer its to remove
            os.makedirs(self.directory, exist_ok=True)
            with self._lock:
                self._written.setdefault(index, []).append(path)
        return path

    def _remove(self, paths) -> None:
        for p in paths:
            self._files.forget(str(p))
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    # -- reading slices ------------------------------------------------------------------------

    def read(self, run: Run, lo: int, hi: int, gpu: int | None = None):
        """Rows ``[lo, hi)`` of ``run``: a CuPy array on GPU ``gpu``, or NumPy where ``gpu`` is None.
        A slice of a run held in memory may be a view: read it, never write it."""
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
        items, where = _flat(items)
        for attempt in range(RECOVERIES + 1):
            items = [self._again(it) for it in items]
            try:
                return _joined(self._read(items, gpu, recover, fetched), where)
            except (OSError, KeyError) as e:
                lost = {} if recover is None or attempt == RECOVERIES else self._lost(items, e)
                if not lost:
                    raise
            failed = {run.index: run for run, _, _ in items if isinstance(run, Run) and run.index in lost}
            with self._lock:  # a run made again here and lost since: made again once more (not one made meanwhile)
                for i in lost:
                    if i in failed and self.recovered.get(i) is failed[i]:
                        del self.recovered[i]
            with seceded():  # while they are made (their inputs too, by other tasks), or another task of this process makes them
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
        return {run.index for run, _, _ in items if isinstance(run, Run) and not self._readable(run)}

    def _readable(self, run: Run) -> bool:
        if run.tier == "disk":
            return os.path.exists(run.path)
        return run.tier == "shared" and run.shared.owner != ipc.PROCESS or run.index in self._data

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
        host_reads: dict = {}  # shared run -> [(item, lo, hi)] read into host memory: one copy per run
        # one mapping per run file for all its slices (the cuts read thousands of windows)
        files = self._files
        with _opened(others, self._mappings() if others else None) as opened:
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
                    out[i] = files.read(run.path, lo * rb, hi - lo, rb)
                elif run.tier == "host" and gpu is None:
                    out[i] = self._data[run.index][lo:hi]
                elif run.tier in ("device", "shared"):
                    src, d = opened.get(run.index) or (self._data[run.index], run.device)
                    if src is None:
                        raise OSError(f"run {run.index} is on a GPU this process does not see (PCI bus {run.shared.bus})")
                    if gpu is None and run.tier == "shared":
                        host_reads.setdefault(run.index, (src, d, []))[2].append((i, lo, hi))
                    elif gpu is None:
                        out[i] = dev.to_host(src[lo:hi])
                    elif gpu != d:
                        out[i] = dev.peer_copy(src[lo:hi], d, gpu)
                    else:  # another process's rows are copied before they close; this one's are read in place
                        out[i] = src[lo:hi].copy() if run.index in opened else src[lo:hi]
                else:
                    segments.append((i, run, lo * rb, (hi - lo) * rb, total))
                    total += (hi - lo) * rb
            if host_reads:  # the runs' windows gathered and copied out by several threads at once (the cuts)
                with ThreadPoolExecutor(min(HOST_READERS, len(host_reads)), thread_name_prefix="dsort-windows") as pool:
                    done = pool.map(lambda r: dev.slices_to_host(r[0], r[1], [(lo, hi) for _, lo, hi in r[2]]), host_reads.values())
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
                            np.copyto(dst, self._data[run.index].reshape(-1)[first + a - at : first + b - at])
                        else:
                            self._files.pread_into(run.path, dst, first + a - at)
                    k += 1

            flat = dev.upload(total, fill, gpu)
            for i, _, _, size, at in segments:
                out[i] = flat[at : at + size].reshape(size // widths[i], widths[i])
        return out

    def _mappings(self) -> set:
        """Where this store keeps other processes' runs mapped (:func:`dsort.engine.ipc.opened`),
        this process's :func:`hold` on them made first (every merge reads every run: each is
        opened here once)."""
        with self._lock:
            if self._hold is None:
                self._hold = hold(self.config.directory)
        return self._maps

    def release(self, items) -> None:
        """Let this process's mapped pages of the slices ``items`` (``(run, lo, hi)``) of run files
        go (:meth:`~dsort.core.diskio.Handles.release`): their reader has copied what it needs. A
        merge's slices otherwise stay resident in the process until its end: the whole input
        once all merges are done, whatever the memory limit."""
        for run, lo, hi in _flat(items)[0]:
            if isinstance(run, Run) and run.tier == "disk" and run.path:
                rb = run.row_bytes or self.config.row_bytes
                self._files.release(run.path, int(lo) * rb, (int(hi) - int(lo)) * rb)

    def gather(self, run, lo, hi, columns: int):
        """The first ``columns`` bytes of rows ``[lo[j], hi[j])`` of ``run`` for every ``j``, joined
        in order (``(rows, columns)`` uint8): one gather where :meth:`read_many` would read each
        range apart (the cuts read a window of every run around every cut, thousands of them).
        None where the run is not in this process's memory or a file it sees (a GPU's, another
        process's or another machine's run, a chain): the caller reads those with :meth:`read_many`."""
        import dask

        if isinstance(run, Chain) or dask.config.get("dsort.read-runs-where-they-are", False):
            return None
        if run.tier == "host" and run.index in self._data and isinstance(self._data[run.index], np.ndarray):
            rows = self._data[run.index]
        elif run.tier == "disk" and os.path.exists(run.path):  # else gone or elsewhere: read_many fetches or makes it again
            rb = run.row_bytes or self.config.row_bytes
            rows = self._files.read(run.path, 0, run.rows, rb) if run.rows else np.empty((0, rb), np.uint8)
        else:
            return None
        lo, hi = np.asarray(lo, np.int64), np.asarray(hi, np.int64)
        lengths = np.maximum(hi - lo, 0)
        at = np.repeat(lo - (np.cumsum(lengths) - lengths), lengths) + np.arange(int(lengths.sum()), dtype=np.int64)
        got = rows[:, :columns][at]
        if run.tier == "disk":
            self.release([(run, 0, run.rows)])
        return got

    def fetch_remote(self, items, recover=None) -> dict:
        """``{item: NumPy rows}`` for the items whose run lies on another machine's disk (its file
        is not visible here): one task on each such worker reads all of this task's slices there
        (this task secedes meanwhile), so only the slices travel; runs of workers that are gone are
        made again here first (``recover(index) -> Run``: its block sorted again), then read as
        local runs. The caller must hold nothing another task of this worker waits for (a GPU
        slot): while it waits, the worker starts other tasks on its thread, and it takes a thread
        back only when one of them ends."""
        import dask

        items = _flat(items)[0]  # the keys of the result: the items of a chain's pieces, as read_many numbers them
        everywhere = dask.config.get("dsort.read-runs-where-they-are", False)  # also where the files are visible
        mine = self.address
        remote = {i: it for i, it in enumerate(items) if it[0].worker and it[0].worker != mine and (everywhere or not _visible(it[0]))}
        if not remote:
            return {}
        from distributed import wait, worker_client

        by_worker: dict = {}
        for i, (run, _, _) in remote.items():
            by_worker.setdefault(run.worker, []).append(i)
        got = {}
        with worker_client() as client:

            def ask(w):  # a read task pinned to worker w, and when it is late
                items = [(remote[i][0], int(remote[i][1]), int(remote[i][2])) for i in by_worker[w]]
                key = f"dsort-slices-{self.config.job}-{uuid.uuid4().hex}"
                f = client.submit(read_slices, self.config, items, workers=[w], allow_other_workers=False, key=key)
                return f, time.monotonic() + REMOTE_READ_SECONDS

            alive = set(scheduler_identity(client)["workers"])
            futures = {w: ask(w) for w in by_worker if w in alive}
            why = {w: "which is gone" for w in by_worker if w not in futures}
            asked_again: set = set()
            while futures:
                try:
                    wait([f for f, _ in futures.values()], timeout=REMOTE_POLL_SECONDS)
                except TimeoutError:  # still running, or waiting for a worker that died: look again
                    pass
                alive = set(scheduler_identity(client)["workers"])
                for w, (f, deadline) in list(futures.items()):
                    if f.status == "finished":
                        try:
                            got.update(zip(by_worker[w], f.result(timeout=REMOTE_READ_SECONDS)))
                        except TimeoutError:  # its result does not come: made again below
                            why[w] = f"whose result did not come within {REMOTE_READ_SECONDS:g} s"
                            f.cancel()
                    elif f.status == "error":
                        why[w] = f"whose read failed: {type(f.exception()).__name__}: {f.exception()}"
                        f.cancel()
                    elif w not in alive:
                        why[w] = "which is gone"
                        f.cancel()  # its worker died meanwhile: its runs are made again below
                    elif time.monotonic() > deadline:
                        why[w] = f"which did not read it within {REMOTE_READ_SECONDS:g} s ({_doing(client, w, f.key)})"
                        f.cancel()
                        if recover is None and w not in asked_again:  # nothing to make them again with: asked once more
                            logger.warning("run slices asked of worker %s: %s; asked again", w, why[w])
                            asked_again.add(w)
                            futures[w] = ask(w)
                            continue
                    else:
                        continue
                    del futures[w]
        lost = {i: it for i, it in remote.items() if i not in got}
        for run, _, _ in lost.values():
            if recover is None:
                raise OSError(f"run {run.index} was on worker {run.worker}, {why.get(run.worker, 'which did not read it')}")
        with seceded() if lost else contextlib.nullcontext():  # as read_many makes lost runs
            for i, (run, lo, hi) in lost.items():
                got[i] = self.read(self.recover_once(run.index, recover), lo, hi)
        return got

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
            with self._lock:
                data = self._data.pop(i, None)
                shared = i in self._shared
                self._shared.discard(i)
                files = self._written.pop(i, [])
            if shared:
                free_shared(self.config.directory, [data])
            self._unreserve(i)
            self._remove(files)

    def close(self) -> None:
        """Close the other processes' runs mapped here, free every run in memory (shared ones once
        no other process maps them) and remove the files made here (:meth:`file_for`): only
        those. The job's directory stays: it is removed whole by the last merge (:func:`finish`),
        or when the process that built the graph exits. Its being there says that a compute of the
        job is under way; a store closed by the watcher, late, removed the next compute's
        directory (empty yet, its runs on the GPUs), and the processes of that compute then took
        their own stores for the last compute's and dropped them, their runs with them (a run made
        again in 1 of 3 sorts on four GPUs)."""
        ipc.close_kept(self._maps)
        if self._hold is not None:
            unhold(self._hold)
            self._hold = None
        with self._lock:
            shared = [self._data[i] for i in self._shared if i in self._data]
            self._shared.clear()
        free_shared(self.config.directory, shared)
        del shared
        self._data.clear()
        self._kept.clear()
        self.recovered.clear()
        self._used = {"host": 0}
        self._reserved.clear()
        with self._lock:
            files = [p for each in self._written.values() for p in each]
            self._written.clear()
        self._remove(files)
        self._files.close()
        if self.directory != self.config.directory:  # a worker's own directory on a cluster of hosts
            shutil.rmtree(self.directory, ignore_errors=True)
            shutil.rmtree(self.config.directory, ignore_errors=True)


class RunsGone(OSError):
    """Runs kept on the GPUs by another process that cannot be opened (``indices``)."""

    def __init__(self, message: str, indices):
        super().__init__(message)
        self.indices = tuple(indices)


@contextlib.contextmanager
def _opened(runs: dict, kept: set | None = None):
    """:func:`dsort.engine.ipc.opened` of other processes' shared ``runs`` (by index), each apart:
    the runs that cannot be opened (their worker restarted, say) fail the read with their names
    (:class:`RunsGone`), the others opened meanwhile closed again (unless ``kept``)."""
    with contextlib.ExitStack() as stack:
        got, gone = [], {}
        for r in runs.values():
            try:
                got += stack.enter_context(ipc.opened([r.shared], kept))
            except ipc.SharedGone as e:
                gone[r.index] = (r, e)
        if gone:
            where = ", ".join(f"{r.index} (worker {r.worker})" for r, _ in gone.values())
            why = next(iter(gone.values()))[1]
            raise RunsGone(f"the runs {where} kept on the GPUs are gone ({why}): was their worker restarted?", gone)
        yield got


def _visible(run: Run) -> bool:
    """Whether this process reads ``run`` itself: its file is visible here, or its GPU (a shared
    run's; the process that made it reads it in place)."""
    if run.tier == "shared":
        return run.shared.owner == ipc.PROCESS or ipc.local_device(run.shared) is not None
    return os.path.exists(run.path)


@contextlib.contextmanager
def seceded():
    """On a dask worker, the task running this block lets go of its thread meanwhile (the worker
    runs other tasks, those this one waits for among them) and takes one back at its end."""
    if this_worker() is None or getattr(_seceding, "on", False):  # no worker, or let go already (a recovery inside one)
        yield
        return
    from distributed import rejoin, secede

    secede()
    _seceding.on = True
    try:
        yield
    finally:
        _seceding.on = False
        rejoin()


_seceding = threading.local()


def this_worker():
    """The dask worker running this task, or None (dask's local schedulers, the client). A
    process that has not imported distributed runs no worker: it is not imported here (the
    embedded sort never pays for it)."""
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def read_where_it_is(run: Run, path: str, read, *args):
    """``read(path, *args)`` of a file that lies beside ``run`` (a frame's pickled rows): here
    where the file is visible, else by a task pinned to the worker whose disk holds the run (on a
    cluster of hosts that share nothing), this task seceded meanwhile. A worker gone fails with an
    OSError that names it; a read that does not come back within :data:`REMOTE_READ_SECONDS` is
    asked once more, then fails with an OSError that says what that worker was doing."""
    if os.path.exists(path) or not run.worker:
        return read(path, *args)
    from distributed import worker_client

    with seceded(), worker_client() as client:
        for asked in range(2):
            if run.worker not in scheduler_identity(client)["workers"]:
                raise OSError(f"{path} was on worker {run.worker}, which is gone")
            key = f"dsort-slices-{run.job}-{uuid.uuid4().hex}"
            f = client.submit(read, path, *args, workers=[run.worker], allow_other_workers=False, key=key)
            try:
                return f.result(timeout=REMOTE_READ_SECONDS)
            except TimeoutError:
                why = f"which did not read it within {REMOTE_READ_SECONDS:g} s ({_doing(client, run.worker, f.key)})"
                f.cancel()
                if asked or run.worker not in scheduler_identity(client)["workers"]:
                    raise OSError(f"{path} was on worker {run.worker}, {why}") from None
                logger.warning("%s asked of worker %s: %s; asked again", path, run.worker, why)


def scheduler_identity(client) -> dict:
    """The scheduler's identity (``"workers"``: every worker), fetched for this call alone. Not
    ``client.scheduler_info()``, which returns the client's shared copy: the client's periodic
    refresh replaces it with one that names no worker (distributed 2026.8's
    ``_update_scheduler_info`` asks for ``n_workers=0``), so a thread that reads it at that moment
    sees none, and took a live worker for gone (a frame merge on hosts that share nothing failed
    so, in CI and in 1 of 3 local runs)."""
    return client.sync(client.scheduler.identity, n_workers=-1)


def _doing(client, worker: str, key) -> str:
    """What ``worker`` says of task ``key`` and of its threads (a read that does not come: the
    reason it gives), in one line; asked in its event loop, so a worker whose threads are all busy
    answers."""

    def ask(dask_worker, key=key):
        import traceback

        st = dask_worker.state
        ts = st.tasks.get(key)
        frames = sys._current_frames()
        threads = [
            f"{t.name}: " + " < ".join(f"{f.name}:{f.lineno}" for f in traceback.extract_stack(frames[t.ident])[::-1][:4])
            for t in threading.enumerate()
            if t.ident in frames
        ]
        return (
            f"its task {ts.state if ts else 'unknown there'}, {len(st.executing)} executing, {len(st.long_running)} seceded, "
            f"{len(st.ready)} ready; threads: " + "; ".join(threads)
        )

    try:
        return client.sync(client._run, ask, workers=[worker], callback_timeout=10)[worker]
    except Exception as e:  # noqa: BLE001 (a diagnosis only)
        return f"it did not say: {type(e).__name__}: {e}"


def read_slices(config: StoreConfig, items) -> list:
    """Rows ``[lo, hi)`` of each ``(run, lo, hi)``, read by the worker whose disk holds the runs
    (a task pinned there)."""
    return store(config).read_many(items)


# -- the stores of this process ------------------------------------------------------------------

_stores: dict[str, RunStore] = {}
_stores_lock = threading.Lock()


def store(config: StoreConfig) -> RunStore:
    """This process's store for ``config.job`` (made on first use: each distributed worker has its
    own). A store whose runs may be shared (on the GPUs) is made with its job's directory, under
    the watcher's lock: the watcher, still following the job's last compute, would otherwise drop
    the new compute's store before its first run made the directory again, and the tasks of that
    compute would keep their runs in two stores."""
    if config.shared_fraction:
        with _watch_lock:
            with _stores_lock:  # a store whose job's directory is gone is the last compute's: dropped, as the watcher would
                stale = _stores.pop(config.job) if config.job in _stores and not os.path.isdir(config.directory) else None
            if stale is not None:
                stale.close()
            s, _ = _get_or_make(config)
            os.makedirs(config.directory, exist_ok=True)
            _watched[config.job] = config.directory
            _start_watcher()
        return s
    s, made = _get_or_make(config)
    if made and s.address is not None and os.path.isdir(config.directory):
        _follow(config)  # a worker reading another process's runs: its store goes when the job does
    return s


def _get_or_make(config: StoreConfig) -> tuple:
    with _stores_lock:
        s = _stores.get(config.job)
        if s is None:
            s = _stores[config.job] = RunStore(config)
            return s, True
    return s, False


# -- shared runs: freed by the process that made them, once the job is over -------------------

_watched: dict[str, str] = {}  # job -> its directory, for the jobs whose shared runs this process holds
_watch_lock = threading.RLock()  # taken again by a store the watcher closes (free_shared)
WATCH_SECONDS = 0.05


def _watch(s: RunStore) -> None:
    """Free this process's shared runs of store ``s``'s job once its directory is gone (made here
    now; the last merge removes it, or the process that built the graph when it exits), looked at
    every :data:`WATCH_SECONDS` by one thread; ``s`` stays this process's store of the job until
    then (a new compute of a job the watcher has just dropped registers it again)."""
    with _watch_lock:
        os.makedirs(s.config.directory, exist_ok=True)
        with _stores_lock:
            _stores[s.config.job] = s
    _follow(s.config)


def _follow(config: StoreConfig) -> None:
    """Drop this process's store of ``config.job`` once the job's directory is gone (the watcher
    thread started if none runs)."""
    with _watch_lock:
        _watched[config.job] = config.directory
        _start_watcher()


_watcher: list = []  # the watcher thread, while one runs


def _start_watcher() -> None:
    """Start the watcher thread unless one runs (the caller holds the watcher's lock)."""
    if not (_watcher and _watcher[0].is_alive()):
        _watcher[:] = [threading.Thread(target=_free_finished, name="dsort-shared-runs", daemon=True)]
        _watcher[0].start()


def _free_finished() -> None:
    while True:
        time.sleep(WATCH_SECONDS)
        with _watch_lock:  # a run put meanwhile registers under this lock, after its directory exists
            if not _free_pass():
                _watcher.clear()
                return


def _free_pass() -> bool:
    """One look of the watcher: the stores of jobs whose directory is gone closed, the shared runs
    that no other process holds any longer freed; whether anything is left to watch."""
    with _watch_lock:
        for j in [j for j, d in _watched.items() if not os.path.isdir(d)]:
            del _watched[j]
            drop(j)
        _pending[:] = [(d, arrays) for d, arrays in _pending if _holders(d)]
        return bool(_watched or _pending)


RECLAIM_SECONDS = 3.0  # how long a run waits at most for the shared runs of jobs just over to be freed
RECLAIM_POLL = 0.01  # and how often it looks again meanwhile


def _reclaimable(gpu: int) -> int:
    """Bytes of this process's shared runs on GPU ``gpu`` that wait only for other processes to
    unmap them (their jobs over). Called under ``_watch_lock``, after :func:`_free_pass`."""
    return sum(a.nbytes for _, arrays in _pending for a in arrays if a.device.id == gpu)


def _room(s: RunStore, gpu: int, nbytes: int, fraction: float) -> bool:
    """Whether GPU ``gpu`` has room for ``nbytes`` more of store ``s``'s shared runs
    (:func:`ipc.shortfall`). Where it has not, the stores of this process's jobs that are over are
    closed first, and their shared runs freed as soon as the other processes unmap them (each
    looks every :data:`WATCH_SECONDS`): the run waits for that, up to :data:`RECLAIM_SECONDS`, but
    only while those runs would cover the shortfall, and only until a wait of the store's has once
    run out. Sorts run back to back would otherwise find the last one's runs still there, and put
    theirs in host memory or files (BENCHMARKS.md section 7)."""
    if ipc.shortfall(gpu, nbytes, fraction) <= 0:
        return True
    deadline = time.monotonic() + RECLAIM_SECONDS
    while True:
        with _watch_lock:
            if _pending or any(not os.path.isdir(d) for d in _watched.values()):
                _free_pass()
            reclaimable = _reclaimable(gpu)
        short = ipc.shortfall(gpu, nbytes, fraction)
        if short <= 0:
            return True
        if reclaimable < short or s._waited_out:
            return False
        if time.monotonic() >= deadline:
            s._waited_out = True  # its later runs go on at once
            return False
        time.sleep(RECLAIM_POLL)


# -- other processes' runs mapped here: held until this process's store of the job closes -------
#
# A reader keeps another process's shared run mapped from its first read until its store of the
# job closes (the job's directory gone). CUDA leaves a mapping of freed memory undefined, so each
# reading process marks the job (a file of its own in DIRECTORY.holds) before its first mapping and
# removes the mark after closing them; an owner frees its shared runs only once no other living
# process's mark is left (the watcher looks again while some are).

_pending: list = []  # (job directory, [shared arrays]): freed here once no other process holds the job


def hold(directory: str) -> Path:
    """This process's mark that it maps runs of the job in ``directory``."""
    d = Path(f"{directory}.holds")
    d.mkdir(parents=True, exist_ok=True)
    mark = d / f"{os.getpid()}-{ipc.PROCESS}"
    mark.touch()
    return mark


def unhold(mark: Path) -> None:
    """Remove this process's ``mark`` (its mappings closed), and the holds directory if it was the last."""
    with contextlib.suppress(FileNotFoundError):
        mark.unlink()
    with contextlib.suppress(OSError):
        mark.parent.rmdir()


def _holders(directory: str) -> int:
    """How many other living processes hold the job in ``directory`` (marks of ended ones removed)."""
    d = Path(f"{directory}.holds")
    n = 0
    with contextlib.suppress(FileNotFoundError):
        for e in os.scandir(d):
            pid, _, process = e.name.partition("-")
            if process == ipc.PROCESS:
                continue
            if pid.isdigit() and alive(int(pid)):
                n += 1
            else:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(e.path)
    if not n:
        with contextlib.suppress(OSError):
            d.rmdir()
    return n


def free_shared(directory: str, arrays: list) -> None:
    """Let this process's shared ``arrays`` of the job in ``directory`` go: now where no other
    process holds the job, else once none does (the watcher keeps them until then)."""
    arrays = [a for a in arrays if a is not None]
    if arrays and _holders(directory):
        with _watch_lock:
            _pending.append((directory, arrays))
            _start_watcher()


def drop(job: str, directory: str | None = None) -> None:
    """Close and forget this process's store of ``job`` (and remove ``directory`` in any case)."""
    with _stores_lock:
        s = _stores.pop(job, None)
    if s is not None:
        s.close()
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


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


def alive(pid: int) -> bool:
    """True while process ``pid`` exists (on this machine): names that carry a process id are
    leftovers once it is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers(directory, prefix: str) -> list[str]:
    """Remove the ``PREFIX-PID-…`` entries of ``directory`` whose process is gone (run stores of
    killed jobs); the removed paths."""
    gone = []
    with contextlib.suppress(OSError):
        for e in os.scandir(directory):
            pid = e.name[len(prefix) + 1 :].split("-", 1)[0] if e.name.startswith(prefix + "-") else ""
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(e.path, ignore_errors=True)
                gone.append(e.path)
    return gone
