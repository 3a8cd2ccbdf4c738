"""Where a dask sort's graph will run, and the run store it gets there.

* :func:`where_it_runs`, :func:`rows_travel`, :func:`one_host`, :func:`gpu_workers_of_one_host` –
  asked of dask's config and the distributed scheduler (every worker) when the graph is built.
* :func:`store_config` – the run store of one sort (:class:`dsort.core.run_handles.StoreConfig`):
  its directory, budgets, and the cluster (:data:`dsort.collections.remote.DASK`).
"""

from __future__ import annotations

import atexit
import os
import tempfile
from pathlib import Path


from ..core import run_lifetime as lifetime
from ..core import runs as R
from . import remote

PREFIX = "dsort-runs"  # the run directories: PREFIX-PID-TOKEN, PID the process that built the graph


LOCAL_SCHEDULERS = (
    "threads",
    "threading",
    "sync",
    "synchronous",
    "single-threaded",
    "processes",
    "multiprocessing",
)


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
    token: str,
    row_bytes: int,
    local_directory,
    host_budget: int,
    gpu: bool = False,
    gpu_budget: int | float | None = None,
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

    base = Path(
        local_directory or dask.config.get("temporary-directory", None) or tempfile.gettempdir()
    ).absolute()
    lifetime.remove_leftovers(base, PREFIX)
    directory = str(base / f"{PREFIX}-{os.getpid()}-{token[:16]}")
    atexit.register(lifetime.drop, token, directory)
    here = one_host()
    shared = float(config.get("runs.shared-gpu-fraction")) if gpu and here else 0.0
    # workers on several hosts share no directory: each keeps its runs on its own disk (its dask
    # local directory), and a merge asks the worker that holds a run for its slices
    return R.StoreConfig(
        token,
        directory,
        row_bytes,
        host_budget,
        0,
        local=not here,
        shared_fraction=shared,
        shared_budget=gpu_budget,
        cluster=remote.DASK,
    )


def device_here() -> int:
    """The GPU this thread works on (CuPy's current device)."""
    import cupy

    return cupy.cuda.Device().id
