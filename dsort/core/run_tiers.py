"""The tiers of a run store, one object each, tried in this order while their budgets allow:

* :class:`SharedTier` – on the GPU that sorted the run, opened by this host's other worker
  processes (CUDA IPC), who copy their slices device to device: while the GPU's used memory stays
  within ``StoreConfig.shared_fraction`` (and the store's shared runs within ``shared_budget``);
* :class:`DeviceTier` – on the GPU that sorted it, for this process alone;
* :class:`HostTier` – in this process's memory;
* :class:`DiskTier` – one file per run in the store's directory.

Each has ``put`` (a :class:`~dsort.core.run_handles.Run` handle, or None where the run is not
for it or finds no room), ``get`` or ``read`` (the rows it holds), ``free`` and ``close``; the
store (:class:`dsort.core.runs.RunStore`) composes them, as dask-cuda's ``DeviceHostFile``
composes zict's buffers. Budgets are bytes (the device's per GPU), kept by one :class:`Budget`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

from ..engine import device as dev
from ..engine import ipc
from . import run_lifetime as lifetime
from .diskio import Handles, write_file
from .run_handles import Run, RunsGone


class Budget:
    """Bytes held per key (``"host"``, ``("device", gpu)``, ``("shared", gpu)``) within caps, and
    the bytes each run holds (given back when the run is freed or put again)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._used: dict = {}
        self._held: dict[int, tuple] = {}  # index -> (key, bytes)

    def take(self, key, nbytes: int, cap: int, index: int | None = None) -> bool:
        """Whether ``nbytes`` more under ``key`` stay within ``cap`` (then held, for run
        ``index``)."""
        with self._lock:
            if self._used.get(key, 0) + nbytes > cap:
                return False
            self._used[key] = self._used.get(key, 0) + nbytes
            if index is not None:
                self._held[index] = (key, nbytes)
            return True

    def used(self, key) -> int:
        """The bytes held under ``key``."""
        with self._lock:
            return self._used.get(key, 0)

    def give_back(self, index: int) -> None:
        with self._lock:
            key, nbytes = self._held.pop(index, (None, 0))
            if key is not None:
                self._used[key] -= nbytes

    def clear(self) -> None:
        with self._lock:
            self._used.clear()
            self._held.clear()


class _Memory:
    """Runs held as arrays by this process, by index."""

    name = ""

    def __init__(self, config, budget: Budget):
        self.config, self.budget = config, budget
        self.arrays: dict[int, object] = {}

    def get(self, index: int):
        return self.arrays[index]

    def holds(self, index: int) -> bool:
        return index in self.arrays

    def free(self, index: int) -> None:
        self.arrays.pop(index, None)

    def close(self) -> None:
        self.arrays.clear()


class DeviceTier(_Memory):
    """Runs on the GPU that sorted them, within ``StoreConfig.device_budget`` bytes a GPU."""

    name = "device"

    def put(self, index: int, rows, sample, made: str) -> Run | None:
        if not dev.is_device_array(rows):
            return None
        gpu = rows.device.id
        if not self.budget.take(
            ("device", gpu), int(rows.nbytes), self.config.device_budget, index
        ):
            return None
        self.arrays[index] = rows
        return Run(
            self.config.job, index, len(rows), "device", device=gpu, sample=sample, made=made
        )


class HostTier(_Memory):
    """Runs in this process's memory (a GPU's copied here), within ``StoreConfig.host_budget``."""

    name = "host"

    def put(self, index: int, rows, sample, made: str) -> Run | None:
        if not self.budget.take("host", int(rows.nbytes), self.config.host_budget, index):
            return None
        self.arrays[index] = dev.to_host(rows) if dev.is_device_array(rows) else rows
        return Run(self.config.job, index, len(rows), "host", sample=sample, made=made)


class SharedTier(_Memory):
    """Runs on the GPU that sorted them, in allocations of their own that this host's other
    processes open by handle (:func:`dsort.engine.ipc.share`); and the other processes' runs
    mapped here, kept until the store closes (every merge reads every run: each opened once)."""

    name = "shared"

    def __init__(self, config, budget: Budget, store, address):
        super().__init__(config, budget)
        self.store, self.address = store, address
        self.waited_out = False  # a run of this store waited for room in vain (run_lifetime.room)
        self._maps: set = set()  # other processes' shared runs mapped here
        self._hold: Path | None = None  # this process's mark that it maps them (run_lifetime.hold)
        self._lock = threading.Lock()

    def _within_cap(self, gpu: int, nbytes: int, index: int) -> bool:
        """Whether ``nbytes`` more of shared runs on GPU ``gpu`` stay within the store's cap
        (``StoreConfig.shared_budget``; held for run ``index`` if so)."""
        cap = self.config.shared_budget
        if isinstance(cap, float):  # a share of the GPU's memory
            cap = int(cap * ipc.total_memory(gpu))
        return cap is None or self.budget.take(("shared", gpu), nbytes, cap, index)

    def put(self, index: int, rows, sample, made: str) -> Run | None:
        cfg, nbytes = self.config, int(rows.nbytes)
        if not (dev.is_device_array(rows) and cfg.shared_fraction and nbytes):
            return None
        gpu = rows.device.id
        if not self._within_cap(gpu, nbytes, index):
            return None
        if lifetime.room(self, gpu, nbytes, cfg.shared_fraction):
            # first: the job's directory made, the store kept until it is gone
            lifetime.watch(self.store)
            got = ipc.share(rows)
            if got is not None:
                self.arrays[index], handle = got
                return Run(
                    cfg.job,
                    index,
                    len(rows),
                    "shared",
                    device=gpu,
                    sample=sample,
                    worker=self.address,
                    shared=handle,
                    made=made,
                )
        self.budget.give_back(index)
        return None

    def holds(self, index: int) -> bool:
        return index in self.arrays

    def free(self, index: int) -> None:
        if index in self.arrays:
            lifetime.free_shared(self.config.directory, [self.arrays.pop(index)])

    @contextlib.contextmanager
    def opened(self, runs: dict):
        """Other processes' shared ``runs`` (by index) opened here (:func:`dsort.engine.ipc.opened`,
        each apart) and kept mapped until the store closes, as ``(array, device)`` in order: the
        runs that cannot be opened (their worker restarted, say) fail the read with their names
        (:class:`~dsort.core.run_handles.RunsGone`)."""
        if not runs:
            yield []
            return
        with self._lock:
            if self._hold is None:
                self._hold = lifetime.hold(self.config.directory)
        with contextlib.ExitStack() as stack:
            got, gone = [], {}
            for r in runs.values():
                try:
                    got += stack.enter_context(ipc.opened([r.shared], self._maps))
                except ipc.SharedGone as e:
                    gone[r.index] = (r, e)
            if gone:
                where = ", ".join(f"{r.index} (worker {r.worker})" for r, _ in gone.values())
                why = next(iter(gone.values()))[1]
                raise RunsGone(
                    f"the runs {where} kept on the GPUs are gone ({why}): was their worker "
                    "restarted?",
                    gone,
                )
            yield got

    def close(self) -> None:
        """Close the other processes' runs mapped here, and free this process's shared runs once no
        other process maps them."""
        ipc.close_kept(self._maps)
        if self._hold is not None:
            lifetime.unhold(self._hold)
            self._hold = None
        own = list(self.arrays.values())
        self.arrays.clear()
        lifetime.free_shared(self.config.directory, own)


class DiskTier:
    """Runs in files of the store's directory, one a run's making (``run-INDEX-MADE.bin``), mapped
    once each for all its reads while the store lives."""

    name = "disk"

    def __init__(self, config, directory: str, worker: str | None):
        self.config, self.directory, self.worker = config, directory, worker
        self.files = Handles()
        self._written: dict[int, list] = {}  # index -> the files made for that run here
        self._lock = threading.Lock()

    def put(self, index: int, rows, sample, made: str) -> Run:
        path = self.file_for(index, made, "run", ".bin")
        write_file(path, rows)
        return Run(
            self.config.job,
            index,
            len(rows),
            "disk",
            path=str(path),
            sample=sample,
            worker=self.worker,
            made=made,
        )

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
        # not while the watcher closes this store: the file is then no longer its to remove
        with lifetime.watch_lock:
            os.makedirs(self.directory, exist_ok=True)
            with self._lock:
                self._written.setdefault(index, []).append(path)
        return path

    def read(self, run: Run, lo: int, hi: int, row_bytes: int):
        """Rows ``[lo, hi)`` of ``run``'s file, through its mapping."""
        return self.files.read(run.path, lo * row_bytes, hi - lo, row_bytes)

    def read_into(self, run: Run, out, first: int) -> None:
        """``len(out)`` bytes of ``run``'s file from byte ``first``, into ``out``."""
        self.files.pread_into(run.path, out, first)

    def release(self, run: Run, lo: int, hi: int, row_bytes: int) -> None:
        """Let this process's mapped pages of rows ``[lo, hi)`` of ``run``'s file go."""
        self.files.release(run.path, lo * row_bytes, (hi - lo) * row_bytes)

    def holds(self, index: int) -> bool:
        return False

    def free(self, index: int) -> None:
        with self._lock:
            files = self._written.pop(index, [])
        self._remove(files)

    def _remove(self, paths) -> None:
        for p in paths:
            self.files.forget(str(p))
            with contextlib.suppress(FileNotFoundError):
                p.unlink()

    def close(self) -> None:
        with self._lock:
            files = [p for each in self._written.values() for p in each]
            self._written.clear()
        self._remove(files)
        self.files.close()
