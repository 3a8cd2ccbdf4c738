"""The cluster a command runs on: an embedded one started, or a running one connected to.

``--scheduler ADDRESS`` connects to a running cluster; otherwise dsort starts an embedded one:
``dask_cuda.LocalCUDACluster`` (one worker per visible GPU) where CuPy sees a GPU and dask-cuda is
installed, else ``distributed.LocalCluster``. The keywords are the clusters' own.

Between GPU workers, dask's default transport is TCP: a chunk goes device → host → socket → host →
device. ``protocol="ucx"`` (needs ``distributed-ucxx``; ``pip install 'dsort[ucx]'``) moves CuPy
chunks between the GPUs of one host directly (CUDA IPC over NVLink or PCIe). Each device buffer
that crosses needs an IPC mapping, costly to make, so UCX clusters allocate from one RMM pool per
worker (``rmm_pool_size``, default the setting ``dsort.ucx.rmm-pool-size``), which CuPy uses too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from dataclasses import dataclass, field

import dask
from dask.utils import format_bytes

from .collections import config

SPILL_EARLY = {"distributed.worker.memory.target": 0.4, "distributed.worker.memory.spill": 0.5}


@dataclass
class Session:
    client: object
    kind: str  # "LocalCluster", "LocalCUDACluster" or the scheduler's address
    gpu: bool  # chunks go to the workers' GPUs
    workers: int
    threads: int
    memory_limit: int  # per worker, bytes (0: none)
    device_memory_limit: int | None
    dashboard: str | None
    phases: dict = field(default_factory=dict)  # of the last dsort.progress.run on it

    def describe(self) -> str:
        mem = format_bytes(self.memory_limit) if self.memory_limit else "no limit"
        dev = (
            f", device memory limit {format_bytes(self.device_memory_limit)}"
            if self.device_memory_limit
            else ""
        )
        gpu = " (GPU)" if self.gpu else ""
        return (
            f"{self.kind}{gpu}: {self.workers} workers, {self.threads} threads, memory limit "
            f"{mem} per worker{dev}"
        )


def open_client(address: str, timeout: float = 30.0, security=None):
    """A ``distributed.Client`` of the scheduler at ``address``, or :class:`dsort.io.InputError`
    within about ``timeout`` seconds: a malformed address, nothing listening, or something there
    that is not a dask scheduler (which may never answer the handshake: the wait is bounded here).
    ``security``: for a ``tls://`` address, a ``distributed.security.Security`` or a directory
    made by ``dsort tls`` (:func:`dsort.tls.security`); without it, dask's configuration must
    name the certificates."""
    import threading

    from distributed import Client
    from distributed.security import Security

    from .core.errors import InputError
    from .tls import security as as_security

    scheme = address.split("://", 1)[0] if "://" in address else "tcp"
    if scheme not in ("tcp", "tls", "inproc", "ucx", "ucxx") or (
        scheme != "inproc" and ":" not in address.split("://", 1)[-1]
    ):
        raise InputError(
            f"--scheduler {address}: not a scheduler address; give tcp://HOST:PORT (dask's default "
            "port is 8786)"
        )
    security = as_security(security)
    if scheme == "tls" and not (security or Security()).tls_ca_file:
        raise InputError(
            f"--scheduler {address}: a TLS scheduler needs the deployment's certificates: "
            "--tls-ca-file, --tls-cert, --tls-key (dsort tls DIR makes a set)"
        )
    if scheme != "tls" and security is not None:
        raise InputError(
            f"--scheduler {address}: the TLS options are for a tls:// scheduler address"
        )
    box = {}

    def connect():
        try:
            box["client"] = Client(address, timeout=f"{timeout}s", security=security)
        except BaseException as e:  # noqa: BLE001 - reported below, in the caller's thread
            box["error"] = e

    t = threading.Thread(target=connect, daemon=True, name="dsort-connect")
    t.start()
    t.join(timeout + 10)
    if "client" in box:
        return box["client"]
    why = (
        f": {box['error']}"
        if "error" in box
        else f": no dask scheduler answered in {timeout + 10:.0f} s"
    )
    raise InputError(f"cannot reach a dask scheduler at {address}{why}") from None


def _gpu_available() -> bool:
    from .engine.device import has_gpu

    if not has_gpu():
        return False
    try:
        import dask_cuda  # noqa: F401
    except ImportError:
        print(
            "dsort: CuPy sees a GPU but dask-cuda is not installed; using a CPU LocalCluster (pip "
            "install 'dsort[gpu]')",
            file=sys.stderr,
        )
        return False
    return True


_BOTH = (
    "n_workers",
    "threads_per_worker",
    "memory_limit",
    "local_directory",
    "dashboard_address",
    "silence_logs",
)


def local_cuda_cluster(**kwargs):
    """``dask_cuda.LocalCUDACluster(**kwargs)`` (one worker per GPU) where CuPy sees a GPU and
    dask-cuda is installed; elsewhere a ``distributed.LocalCluster`` of CPU workers with the
    keywords both take, after a printed line saying so. The scripts in ``deploy/`` start from it,
    so they run as they are on a machine without a GPU too. The dashboard listens on loopback
    unless ``dashboard_address`` says otherwise."""
    kwargs.setdefault("dashboard_address", "127.0.0.1:8787")
    if _gpu_available():
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(**kwargs)
    from distributed import LocalCluster

    print(
        "no GPU usable here (CuPy sees none, or dask-cuda is missing): a LocalCluster of CPU "
        "workers instead of LocalCUDACluster"
    )
    return LocalCluster(**{k: v for k, v in kwargs.items() if k in _BOTH})


class _NoCancelledReconnect(logging.Filter):
    """Drops what distributed's client logs when its own close cancels a reconnect to the
    scheduler: an error with a traceback of ``CancelledError``, printed above the one line that
    says why a job failed (seen once a run had lost its last worker)."""

    def filter(self, record):
        return not (record.exc_info and isinstance(record.exc_info[1], asyncio.CancelledError))


@contextlib.contextmanager
def connect(
    scheduler=None,
    *,
    n_workers=None,
    threads_per_worker=None,
    memory_limit="auto",
    device_memory_limit=None,
    local_directory=None,
    dashboard_address="127.0.0.1:0",
    cpu=False,
    protocol=None,
    rmm_pool_size=None,
    quiet=False,
    security=None,
    limits=None,
):
    """A :class:`Session` on a dask cluster, a context manager: a running one, or an embedded one
    made for the session and closed after it.

    Parameters
    ----------
    scheduler : str, optional
        A running cluster's scheduler address; default: an embedded cluster, GPU workers
        (``LocalCUDACluster``, one a GPU) where a GPU is visible, unless ``cpu``.
    n_workers, threads_per_worker, memory_limit, device_memory_limit, local_directory
        The embedded cluster's workers and their limits, in dask's and dask-cuda's words.
    dashboard_address : str, default "127.0.0.1:0"
        Where the embedded cluster's dashboard listens.
    cpu : bool, default False
        CPU workers even where a GPU is visible.
    protocol : {None, "tcp", "ucx"}
        Between an embedded cluster's workers (UCX: GPU workers only).
    rmm_pool_size : int, str or float, optional
        With UCX: each worker's RMM pool (default ``dsort.ucx.rmm-pool-size``).
    quiet : bool, default False
        No lines about the cluster and its dashboard.
    security : distributed.security.Security or str, optional
        For a ``tls://`` scheduler (:func:`open_client`).
    limits : dsort.collections.config.Limits, optional
        The embedded cluster's workers, threads, memory, local directory and ``cpu`` as one object
        (then none of those keywords).

    Yields
    ------
    Session
        The client, and what the cluster is: its kind, workers, threads and memory limits.
    """
    from distributed import Client, LocalCluster

    from .collections.config import Limits

    words = dict(
        n_workers=n_workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit
    )
    words.update(
        device_memory_limit=device_memory_limit, local_directory=local_directory, cpu=cpu or None
    )
    lim = Limits.of(limits, **words)
    n_workers, threads_per_worker, memory_limit = (
        lim.n_workers,
        lim.threads_per_worker,
        lim.memory_limit,
    )
    device_memory_limit, local_directory, cpu = (
        lim.device_memory_limit,
        lim.local_directory,
        bool(lim.cpu),
    )

    from .collections.remote import scheduler_identity
    from .engine.device import gpu_count, has_gpu

    with contextlib.ExitStack() as stack:
        quiet_close, client_log = _NoCancelledReconnect(), logging.getLogger("distributed.client")
        client_log.addFilter(quiet_close)
        stack.callback(client_log.removeFilter, quiet_close)
        if scheduler:
            client = stack.enter_context(open_client(scheduler, security=security))
            kind = scheduler
            gpu = (
                all(client.run(has_gpu).values())
                if scheduler_identity(client)["workers"]
                else False
            )
        else:
            common = dict(
                n_workers=n_workers,
                threads_per_worker=threads_per_worker,
                memory_limit=memory_limit,
                local_directory=local_directory,
                dashboard_address=dashboard_address,
                silence_logs=logging.ERROR,
            )
            # unset: the cluster's own default
            common = {k: v for k, v in common.items() if v is not None}
            if not cpu and _gpu_available():
                from dask_cuda import LocalCUDACluster

                from .core.errors import InputError

                gpus = gpu_count()
                if n_workers is not None and n_workers > gpus:
                    raise InputError(
                        f"--n-workers {n_workers}: an embedded GPU cluster has one worker per GPU "
                        "and "
                        f"{gpus} GPU(s) are visible; pass --cpu for CPU workers"
                    )

                if device_memory_limit is not None:
                    common["device_memory_limit"] = device_memory_limit
                common.update(ucx_options(protocol, rmm_pool_size))
                cluster = stack.enter_context(LocalCUDACluster(**common))
                kind, gpu = "LocalCUDACluster", True
            else:
                if protocol not in (None, "tcp"):
                    from .core.errors import InputError

                    raise InputError(
                        f"--protocol {protocol}: UCX is for GPU workers (LocalCUDACluster); CPU "
                        "workers use tcp"
                    )
                # A sort task holds about three input chunks while it runs, on top of what the
                # worker stores: spill stored data earlier than dask's default (60/70 %) so that
                # a task's working memory fits under the limit. Nannies hand this to the workers.
                with dask.config.set(SPILL_EARLY):
                    cluster = stack.enter_context(LocalCluster(**common))
                kind, gpu = "LocalCluster", False
            # closing an embedded cluster cancels the scheduler's progress feeds, which it logs as
            # errors: noise once the work is done
            stack.callback(logging.getLogger("distributed.scheduler").setLevel, logging.CRITICAL)
            client = stack.enter_context(Client(cluster))
        info = scheduler_identity(client)
        workers = info["workers"].values()
        dashboard = (
            client.dashboard_link
            if "dashboard" in info.get("services", {}) and (scheduler or _has_bokeh())
            else None
        )
        s = Session(
            client=client,
            kind=kind,
            gpu=gpu,
            workers=len(workers),
            threads=sum(w["nthreads"] for w in workers),
            memory_limit=min((w.get("memory_limit") or 0 for w in workers), default=0),
            device_memory_limit=device_limit(device_memory_limit, _device_memory())
            if gpu
            else None,
            dashboard=dashboard,
        )
        if not quiet:
            print(f"cluster: {s.describe()}")
            print(
                f"dashboard: {dashboard}"
                if dashboard
                else "dashboard: not running (the dashboard needs bokeh: pip install 'bokeh>=3.1')"
            )
        yield s


def ucx_options(protocol=None, rmm_pool_size=None) -> dict:
    """``LocalCUDACluster`` keywords for ``protocol`` (None or "tcp": none). For "ucx": UCX with
    dask-cuda's automatic transport choice, an RMM pool per worker (``rmm_pool_size``, default
    ``dsort.ucx.rmm-pool-size`` of the GPU's memory) and CuPy allocating from it, so that a worker's
    buffers need one IPC mapping per peer, not one per chunk."""
    if protocol in (None, "tcp"):
        return {}
    if protocol not in ("ucx", "ucxx"):
        from .core.errors import InputError

        raise InputError(f"--protocol must be tcp or ucx, got {protocol!r}")
    try:
        import distributed_ucxx  # noqa: F401
    except ImportError:
        from .core.errors import InputError

        raise InputError(
            "--protocol ucx needs UCX for dask: pip install 'dsort[ucx]' (distributed-ucxx)"
        ) from None
    if rmm_pool_size is None:
        rmm_pool_size = config.get("ucx.rmm-pool-size")
    elif (
        isinstance(rmm_pool_size, str)
        and rmm_pool_size.replace(".", "", 1).isdigit()
        and float(rmm_pool_size) <= 1
    ):
        # a fraction of the GPU's memory, as dask-cuda takes it
        rmm_pool_size = float(rmm_pool_size)
    return {
        "protocol": "ucx",
        "rmm_pool_size": rmm_pool_size,
        "rmm_allocator_external_lib_list": ["cupy"],
    }


def _has_bokeh() -> bool:
    import importlib.util

    return importlib.util.find_spec("bokeh") is not None


def device_limit(value, whole: int):
    """``--device-memory-limit`` in bytes as dask-cuda applies it: a size, or a fraction of the
    GPU's ``whole`` memory (``0.8`` is 80 %, not 0 bytes); None for none/auto. One parser for every
    memory limit: :func:`dsort.collections.config.parse_size`."""
    from .collections.config import parse_size

    if value in (None, "auto", 0, "0"):
        return None
    return parse_size(value, whole, "--device-memory-limit")


def _device_memory() -> int:
    import cupy

    return int(cupy.cuda.Device(0).mem_info[1])
