"""Loading dsort's CUDA kernels through CuPy: load (or compile) once per process, launch.

Kernels are C++ templates in ``kernels/`` (see its README) instantiated by name; which
instantiations, and how each is launched, the kernel plans say (:mod:`dsort.engine._kernels`). A
module is loaded the first time it is asked for and cached for the process: from the cubins built
ahead of time for the device's architecture (:mod:`._aot`) where they are shipped, else compiled by
NVRTC with ``cupy.RawModule``, which caches the binary on disk, keyed by the code string (carrying a
digest of every kernel source).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from pathlib import Path

import cupy
import numpy as np

from . import _aot
from ._kernels import Kernel, Module, Target, kernel_dir

NULL = np.uint64(0)  # a null pointer argument (no values)


_build_lock = threading.Lock()  # guards the table of per-module locks and the shared-memory opt-ins
_module_locks: dict = {}


def _lock_of(key) -> threading.Lock:
    with _build_lock:
        return _module_locks.setdefault(key, threading.Lock())


@functools.cache
def _module(m: Module, arch: int) -> tuple[cupy.RawModule, dict]:
    shipped = _aot.find(m, arch)
    if shipped is not None:
        path, lowered = shipped
        try:
            mod = cupy.RawModule(path=str(path))
            # loads it: a driver too old for it says so here
            mod.get_function(next(iter(lowered.values())))
            return mod, lowered
        except cupy.cuda.driver.CUDADriverError:
            pass  # compiled here instead, for this driver
    options = (*_aot.OPTIONS, f"-I{kernel_dir()}")
    return cupy.RawModule(code=_aot.code(m), options=options, name_expressions=list(m.names)), {}


def module(m: Module) -> tuple[cupy.RawModule, dict]:
    """The module ``m`` for the current device's architecture, once, and the mangled names of its
    kernels (empty where CuPy compiled it and maps the names itself): loaded from the shipped
    cubins, or built; threads that need the same module wait for one build; threads that need
    different ones build them at once (NVRTC releases the GIL)."""
    arch = int(cupy.cuda.Device().compute_capability)
    with _lock_of((m, arch)):
        return _module(m, arch)


@functools.cache
def _function(m: Module, name: str, device: int):
    mod, lowered = module(m)
    return mod.get_function(lowered.get(name, name))


def function(kernel: Kernel):
    """The kernel's function on the current device, cached (so its shared-memory opt-in below is
    set once per device)."""
    return _function(kernel.module, kernel.name, cupy.cuda.Device().id)


def launch(kernel: Kernel, grid: int, args) -> None:
    """Launch ``kernel`` on ``grid`` CTAs of its threads with its shared memory (nothing when grid
    is 0). Dynamic shared memory above 48 KiB needs the kernel's opt-in, read from the driver
    before every such launch (one cheap call) rather than remembered, so no cache of ours can ever
    skip it."""
    if grid <= 0:
        return
    kern, smem = function(kernel), kernel.smem
    if smem > 48 * 1024 and kern.max_dynamic_shared_size_bytes < smem:
        # threads launching one kernel: raise it once, before any of them launches
        with _build_lock:
            if kern.max_dynamic_shared_size_bytes < smem:
                kern.max_dynamic_shared_size_bytes = smem
    kern((int(grid),), (kernel.threads,), args, shared_mem=smem)


@functools.cache
def _target(device: int) -> Target:
    d = cupy.cuda.Device(device)
    attrs = d.attributes
    smem = int(
        attrs.get("MaxSharedMemoryPerBlockOptin", attrs.get("MaxSharedMemoryPerBlock", 48 * 1024))
    )
    return Target(int(d.compute_capability), smem)


def target() -> Target:
    """The current device as the kernel plans see it (compute capability, shared memory per CTA)."""
    return _target(cupy.cuda.Device().id)


@functools.cache
def _sm_count(device: int) -> int:
    return int(cupy.cuda.Device(device).attributes["MultiProcessorCount"])


def sm_count() -> int:
    """SMs of the current device (the persistent grids' size)."""
    return _sm_count(cupy.cuda.Device().id)


# Measurement hook (benchmarks): inside traced(), every phase(label) block records CUDA events.
_TRACE: list | None = None


class phase:
    """``with phase(label):`` times the GPU work the block enqueues, when traced() is on; costs one
    test when it is off."""

    __slots__ = ("label", "start")

    def __init__(self, label: str):
        self.label = label

    def __enter__(self):
        self.start = None
        if _TRACE is not None:
            self.start = cupy.cuda.Event()
            self.start.record()

    def __exit__(self, *exc):
        if self.start is not None:
            end = cupy.cuda.Event()
            end.record()
            _TRACE.append((self.label, self.start, end))


@contextlib.contextmanager
def traced():
    """Collect the phases of the engine calls inside the block: yields a list that holds
    (label, milliseconds) pairs, in launch order, once the block has run."""
    global _TRACE
    events, out = [], []
    _TRACE = events
    try:
        yield out
    finally:
        _TRACE = None
    cupy.cuda.Device().synchronize()
    out += [(label, cupy.cuda.get_elapsed_time(a, b)) for label, a, b in events]


def _compile_one(m: Module) -> int:
    mod, lowered = module(m)
    if not lowered:  # shipped cubins need no build
        mod.compile()
    return len(m.names)


def cache_dir() -> Path:
    """CuPy's on-disk kernel cache (``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``)."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def arch() -> str:
    """The current device's architecture as NVRTC names it, e.g. ``sm_90``."""
    return f"sm_{cupy.cuda.Device().compute_capability}"


def _built_marker() -> Path:
    return cache_dir() / f"dsort-{_aot.digest()}-{arch()}.built"


def kernels_built() -> bool:
    """True when no run compiles dsort's kernels on first use: they are shipped for this device
    (:mod:`._aot`), or :func:`compile_all` filled the cache with them for its architecture."""
    return _built_marker().is_file() or _aot.shipped_all(target())


def compile_all(modules: list[Module], jobs: int | None = None) -> int:
    """Compile many modules in parallel processes into CuPy's on-disk cache (so that later
    processes load binaries instead of compiling), then mark the cache as holding them for this
    architecture. Returns the number of kernels built."""
    import concurrent.futures
    import multiprocessing

    jobs = jobs or min(len(modules), os.cpu_count() or 1)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        built = sum(pool.map(_compile_one, modules))
    marker = _built_marker()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{built} kernels\n")
    return built
