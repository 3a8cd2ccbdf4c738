"""The lifetime of a process's run stores, and of the runs it shares with the other processes.

A process keeps one store a job (:func:`register`, :func:`drop`). A run kept on a GPU and shared
with this host's other processes (CUDA IPC) is freed by the process that made it, once its job is
over (the job's directory gone: the last merge removes it, or the process that built the graph when
it exits) and no other process maps it any longer. One watcher thread a process looks for both
every :data:`WATCH_SECONDS`. A run that finds no room on its GPU waits a little for the shared runs
of jobs just over to go (:func:`room`).

A reader keeps another process's shared run mapped from its first read until its store of the job
closes. CUDA leaves a mapping of freed memory undefined, so each reading process marks the job (a
file of its own in ``DIRECTORY.holds``, :func:`hold`) before its first mapping and removes the mark
after closing them (:func:`unhold`); an owner frees its shared runs only once no other living
process's mark is left (:func:`free_shared`; the watcher looks again while some are).

Names that carry a process id are leftovers once it is gone (:func:`alive`,
:func:`remove_leftovers`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import time
from pathlib import Path

from ..engine import ipc

_stores: dict = {}  # job -> this process's store of it (dsort.core.runs.RunStore)
_stores_lock = threading.Lock()


def register(job: str, make):
    """``(store, made)``: this process's store of ``job``, made by ``make()`` where there is
    none."""
    with _stores_lock:
        s = _stores.get(job)
        if s is None:
            s = _stores[job] = make()
            return s, True
    return s, False


def drop_stale(job: str, directory: str) -> None:
    """Close this process's store of ``job`` if its directory is gone: the last compute's (as the
    watcher would). The caller holds the watcher's lock."""
    with _stores_lock:
        stale = _stores.pop(job) if job in _stores and not os.path.isdir(directory) else None
    if stale is not None:
        stale.close()


# -- shared runs: freed by the process that made them, once the job is over -------------------

# job -> its directory, for the jobs whose shared runs this process holds
_watched: dict[str, str] = {}
watch_lock = threading.RLock()  # taken again by a store the watcher closes (free_shared)
WATCH_SECONDS = 0.05


def watch(s) -> None:
    """Free this process's shared runs of store ``s``'s job once its directory is gone (made here
    now), looked at every :data:`WATCH_SECONDS` by one thread; ``s`` stays this process's store of
    the job until then (a new compute of a job the watcher has just dropped registers it again)."""
    with watch_lock:
        os.makedirs(s.config.directory, exist_ok=True)
        with _stores_lock:
            _stores[s.config.job] = s
    follow(s.config.job, s.config.directory)


def follow(job: str, directory: str) -> None:
    """Drop this process's store of ``job`` once ``directory`` is gone (the watcher thread started
    if none runs)."""
    with watch_lock:
        _watched[job] = directory
        _start_watcher()


_watcher: list = []  # the watcher thread, while one runs


def _start_watcher() -> None:
    """Start the watcher thread unless one runs (the caller holds the watcher's lock)."""
    if not (_watcher and _watcher[0].is_alive()):
        _watcher[:] = [
            threading.Thread(target=_free_finished, name="dsort-shared-runs", daemon=True)
        ]
        _watcher[0].start()


def _free_finished() -> None:
    while True:
        time.sleep(WATCH_SECONDS)
        # a run put meanwhile registers under this lock, after its directory exists
        with watch_lock:
            if not _free_pass():
                _watcher.clear()
                return


def _free_pass() -> bool:
    """One look of the watcher: the stores of jobs whose directory is gone closed, the shared runs
    that no other process holds any longer freed; whether anything is left to watch."""
    with watch_lock:
        for j in [j for j, d in _watched.items() if not os.path.isdir(d)]:
            del _watched[j]
            drop(j)
        _pending[:] = [(d, arrays) for d, arrays in _pending if _holders(d)]
        return bool(_watched or _pending)


# how long a run waits at most for the shared runs of jobs just over to be freed
RECLAIM_SECONDS = 3.0
RECLAIM_POLL = 0.01  # and how often it looks again meanwhile


def _reclaimable(gpu: int) -> int:
    """Bytes of this process's shared runs on GPU ``gpu`` that wait only for other processes to
    unmap them (their jobs over). Called under ``watch_lock``, after :func:`_free_pass`."""
    return sum(a.nbytes for _, arrays in _pending for a in arrays if a.device.id == gpu)


def room(waiter, gpu: int, nbytes: int, fraction: float) -> bool:
    """Whether GPU ``gpu`` has room for ``nbytes`` more shared runs (:func:`ipc.shortfall`) of
    ``waiter`` (a shared tier: its ``waited_out`` says a wait of its ran out). Where it has not,
    the stores of this process's jobs that are over are closed first, and their shared runs freed
    as soon as the other processes unmap them (each looks every :data:`WATCH_SECONDS`): the run
    waits for that, up to :data:`RECLAIM_SECONDS`, but only while those runs would cover the
    shortfall, and only until a wait of ``waiter``'s has once run out. Sorts run back to back would
    otherwise find the last one's runs still there, and put theirs in host memory or files
    (BENCHMARKS.md section 7)."""
    if ipc.shortfall(gpu, nbytes, fraction) <= 0:
        return True
    deadline = time.monotonic() + RECLAIM_SECONDS
    while True:
        with watch_lock:
            if _pending or any(not os.path.isdir(d) for d in _watched.values()):
                _free_pass()
            reclaimable = _reclaimable(gpu)
        short = ipc.shortfall(gpu, nbytes, fraction)
        if short <= 0:
            return True
        if reclaimable < short or waiter.waited_out:
            return False
        if time.monotonic() >= deadline:
            waiter.waited_out = True  # its later runs go on at once
            return False
        time.sleep(RECLAIM_POLL)


# -- other processes' runs mapped here: held until this process's store of the job closes -------

# (job directory, [shared arrays]): freed here once no other process holds the job
_pending: list = []


def hold(directory: str) -> Path:
    """This process's mark that it maps runs of the job in ``directory``."""
    d = Path(f"{directory}.holds")
    d.mkdir(parents=True, exist_ok=True)
    mark = d / f"{os.getpid()}-{ipc.PROCESS}"
    mark.touch()
    return mark


def unhold(mark: Path) -> None:
    """Remove this process's ``mark`` (its mappings closed), and the holds directory if it was the
    last."""
    with contextlib.suppress(FileNotFoundError):
        mark.unlink()
    with contextlib.suppress(OSError):
        mark.parent.rmdir()


def _holders(directory: str) -> int:
    """How many other living processes hold the job in ``directory`` (marks of ended ones
    removed)."""
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
        with watch_lock:
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
            pid = (
                e.name[len(prefix) + 1 :].split("-", 1)[0]
                if e.name.startswith(prefix + "-")
                else ""
            )
            if pid.isdigit() and not alive(int(pid)):
                shutil.rmtree(e.path, ignore_errors=True)
                gone.append(e.path)
    return gone
