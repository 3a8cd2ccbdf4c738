"""The run store: sorted runs kept outside dask's memory, and read back in slices.

A *run* is one sorted block of fixed-width rows (a record, or a ``.npy`` element's bytes). A run
task puts it here and hands the task graph only a :class:`Run` handle (where it is, how many rows,
its regular sample), never the rows. Three tiers, tried in this order while their budgets allow:

``device``  on the GPU that sorted it (nothing crosses PCIe twice when the data fits on the GPUs);
``host``    in this process's memory;
``disk``    one file per run in the store's directory (the job's local directory).

Budgets are bytes per tier (the device budget per GPU); a run goes whole to the first tier with
room. A store lives in one process: the embedded (threaded) service keeps all three tiers; on a
distributed cluster every worker keeps its runs on disk in a directory all workers see, so any
worker can read any slice. :meth:`RunStore.close` removes everything the store holds.

Rows are read back as slices ``[lo, hi)`` of a run, onto the device that asks (a CuPy array on
that GPU) or into host memory: the merges read exactly the rows of their output range.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from .engine import device as dev

TIERS = ("device", "host", "disk")


@dataclass(frozen=True)
class Layout:
    """Fixed-width rows and where their key is: ``dtype`` set (a ``.npy`` element), the row is
    the key; else the key is the first ``key_bytes`` bytes, compared as unsigned bytes."""

    row_bytes: int
    key_bytes: int
    dtype: str | None = None

    def keys(self, rows):
        """The sort keys of ``rows`` (``(n, row_bytes)`` uint8, NumPy or CuPy) in the engines'
        spelling: a 1-D array of ``dtype``, or C-contiguous byte rows ``(n, key_bytes)``."""
        if self.dtype is not None:
            return rows.view(self.dtype).reshape(-1)
        if self.key_bytes == self.row_bytes:
            return rows
        return dev.xp_of(rows).ascontiguousarray(rows[:, : self.key_bytes])

    def rows_of(self, keys):
        """Rows whose bytes are the keys (only where the key is the whole row)."""
        return keys.view(np.uint8).reshape(len(keys), self.row_bytes)

    @property
    def payload(self) -> bool:
        """True when rows carry bytes beyond the key (they then follow the key's order)."""
        return self.dtype is None and self.key_bytes < self.row_bytes


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


@dataclass(frozen=True)
class StoreConfig:
    """How a job's runs are kept: budgets in bytes (device: per GPU) and the directory for the disk tier."""

    job: str
    directory: str
    row_bytes: int
    host_budget: int = 0
    device_budget: int = 0


class RunStore:
    def __init__(self, config: StoreConfig):
        self.config = config
        self._lock = threading.Lock()
        self._used = {"host": 0}
        self._data: dict[int, object] = {}
        self._made_dir = False

    # -- putting a run -------------------------------------------------------------------------

    def _reserve(self, tier: str, key, nbytes: int, budget: int) -> bool:
        with self._lock:
            if self._used.get(key, 0) + nbytes > budget:
                return False
            self._used[key] = self._used.get(key, 0) + nbytes
            return True

    def put(self, index: int, rows, *, sample=None) -> Run:
        """Keep sorted ``rows`` (``(n, row_bytes)`` uint8, NumPy or CuPy) as run ``index``."""
        n, nbytes = len(rows), int(rows.nbytes)
        cfg = self.config
        if dev.is_device_array(rows):
            gpu = rows.device.id
            if self._reserve("device", ("device", gpu), nbytes, cfg.device_budget):
                self._data[index] = rows
                return Run(cfg.job, index, n, "device", device=gpu, sample=sample)
            if self._reserve("host", "host", nbytes, cfg.host_budget):
                self._data[index] = dev.to_host(rows)
                return Run(cfg.job, index, n, "host", sample=sample)
        elif self._reserve("host", "host", nbytes, cfg.host_budget):
            self._data[index] = rows
            return Run(cfg.job, index, n, "host", sample=sample)
        path = self._path(index)
        write_file(path, rows)
        return Run(cfg.job, index, n, "disk", path=str(path), sample=sample)

    def _path(self, index: int) -> Path:
        d = Path(self.config.directory)
        if not self._made_dir:
            d.mkdir(parents=True, exist_ok=True)
            self._made_dir = True
        return d / f"run-{index:06d}.bin"

    # -- reading slices ------------------------------------------------------------------------

    def read(self, run: Run, lo: int, hi: int, gpu: int | None = None):
        """Rows ``[lo, hi)`` of ``run``: a CuPy array on GPU ``gpu``, or NumPy where ``gpu`` is None.
        A slice of a run held in memory may be a view: read it, never write it."""
        lo, hi = int(lo), int(hi)
        rb = self.config.row_bytes
        if run.tier == "disk":
            if gpu is None:
                return read_file(run.path, lo * rb, hi - lo, rb)
            import cupy

            with dev.staging(gpu).buffer((hi - lo) * rb) as buf:
                rows = read_file(run.path, lo * rb, hi - lo, rb, out=buf)
                out = cupy.empty(rows.shape, np.uint8)
                out.set(rows)
                cupy.cuda.get_current_stream().synchronize()
                return out
        data = self._data[run.index]
        part = data[lo:hi]
        if run.tier == "host":
            return part if gpu is None else dev.from_host(part)
        if gpu is None:
            return dev.to_host(part)
        if gpu == run.device:
            return part
        return _peer_copy(part, run.device, gpu)

    # -- the end ---------------------------------------------------------------------------------

    def close(self) -> None:
        """Free every run in memory and remove the run files."""
        self._data.clear()
        self._used = {"host": 0}
        shutil.rmtree(self.config.directory, ignore_errors=True)


def _peer_copy(src, src_gpu: int, dst_gpu: int):
    import cupy

    with cupy.cuda.Device(dst_gpu):
        out = cupy.empty(src.shape, src.dtype)
        cupy.cuda.runtime.memcpyPeer(out.data.ptr, dst_gpu, src.data.ptr, src_gpu, src.nbytes)
    return out


# -- the stores of this process ------------------------------------------------------------------

_stores: dict[str, RunStore] = {}
_stores_lock = threading.Lock()


def store(config: StoreConfig) -> RunStore:
    """This process's store for ``config.job`` (made on first use: each distributed worker has its own)."""
    with _stores_lock:
        s = _stores.get(config.job)
        if s is None:
            s = _stores[config.job] = RunStore(config)
        return s


def drop(job: str, directory: str | None = None) -> None:
    """Close and forget this process's store of ``job`` (and remove ``directory`` in any case)."""
    with _stores_lock:
        s = _stores.pop(job, None)
    if s is not None:
        s.close()
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


# -- files ---------------------------------------------------------------------------------------


def read_file(path, offset: int, rows: int, row_bytes: int, out=None) -> np.ndarray:
    """``rows`` rows of ``row_bytes`` bytes at byte ``offset`` of ``path`` (into ``out``, a uint8
    buffer of at least that size, where given), as ``(rows, row_bytes)`` uint8."""
    nbytes = rows * row_bytes
    buf = np.empty(nbytes, np.uint8) if out is None else out[:nbytes]
    fd = os.open(path, os.O_RDONLY)
    try:
        view, done = memoryview(buf), 0
        while done < nbytes:
            got = os.preadv(fd, [view[done:]], offset + done)
            if got == 0:
                raise OSError(f"{path}: unexpected end of file at byte {offset + done:,}")
            done += got
    finally:
        os.close(fd)
    return buf.reshape(rows, row_bytes)


def write_file(path, rows) -> None:
    """Write ``rows`` (NumPy or CuPy) as a new file."""
    host = dev.to_host(rows) if dev.is_device_array(rows) else np.ascontiguousarray(rows)
    with open(path, "wb") as f:
        f.write(memoryview(host.reshape(-1).view(np.uint8)))


_SYNC_FILE_RANGE_WRITE = 2
_sync_file_range = None


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Ask the kernel to start writing ``[offset, offset + nbytes)`` of ``fd`` to disk now, without
    waiting (``sync_file_range``), so the final fsync finds little left to do. A no-op where the
    call does not exist."""
    global _sync_file_range
    if _sync_file_range is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
            _sync_file_range = fn
        except (OSError, AttributeError):
            _sync_file_range = False
    if _sync_file_range:
        with contextlib.suppress(Exception):
            _sync_file_range(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)
