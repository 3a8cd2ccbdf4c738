"""Loading dsort's CUDA kernels through CuPy: compile once per process, launch, tune.

Kernels are C++ templates in ``kernels/`` (see its README), compiled by NVRTC with
``cupy.RawModule`` and instantiated by name. A module is built the first time a (source, set of
instantiations) is asked for and cached for the process; CuPy also caches the binary on disk,
keyed by the code string, which therefore carries a digest of every kernel source.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
from pathlib import Path

import cupy
import numpy as np

from . import kernel_dir

NULL = np.uint64(0)  # a null pointer argument (no values)
SEARCH_THREADS = 256  # one thread per query in the search kernels


@functools.cache
def _digest() -> str:
    h = hashlib.sha256()
    for path in sorted(kernel_dir().glob("*.cu*")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


_build_lock = threading.Lock()  # guards the table of per-module locks and the shared-memory opt-ins
_module_locks: dict = {}


def _lock_of(key) -> threading.Lock:
    with _build_lock:
        return _module_locks.setdefault(key, threading.Lock())


@functools.cache
def _module(sources: tuple[str, ...], names: tuple[str, ...]) -> cupy.RawModule:
    code = f"// dsort kernels {_digest()}\n" + "".join(f'#include "{s}"\n' for s in sources)
    return cupy.RawModule(code=code, options=("-std=c++17", f"-I{kernel_dir()}"), name_expressions=list(names))


def module(sources: tuple[str, ...], names: tuple[str, ...]) -> cupy.RawModule:
    """The module of ``names`` built from ``sources``, built once: threads that need the same module
    wait for one build; threads that need different ones build them at once (NVRTC releases the
    GIL), which is what a first use on a fresh machine spends its time on."""
    with _lock_of((sources, names)):
        return _module(sources, names)


@functools.cache
def _function(sources, names, name, device: int):
    return module(sources, names).get_function(name)


def function(sources: tuple[str, ...], names: tuple[str, ...], name: str):
    """One kernel of a module on the current device, cached (so its shared-memory opt-in below
    is set once per device)."""
    return _function(sources, names, name, cupy.cuda.Device().id)


def launch(kern, grid: int, block: int, args, smem: int = 0) -> None:
    """Launch ``kern`` on ``grid`` CTAs of ``block`` threads (nothing when grid is 0). Dynamic
    shared memory above 48 KiB needs the kernel's opt-in, read from the driver before every such
    launch (one cheap call) rather than remembered, so no cache of ours can ever skip it."""
    if grid <= 0:
        return
    if smem > 48 * 1024 and kern.max_dynamic_shared_size_bytes < smem:
        with _build_lock:  # threads launching one kernel: raise it once, before any of them launches
            if kern.max_dynamic_shared_size_bytes < smem:
                kern.max_dynamic_shared_size_bytes = smem
    kern((int(grid),), (int(block),), args, shared_mem=int(smem))


def search_grid(count: int) -> int:
    return -(-count // SEARCH_THREADS)


@functools.cache
def smem_limit() -> int:
    """The most dynamic shared memory one CTA may have on the current device."""
    attrs = cupy.cuda.Device().attributes
    return int(attrs.get("MaxSharedMemoryPerBlockOptin", attrs.get("MaxSharedMemoryPerBlock", 48 * 1024)))


@functools.cache
def sm_count() -> int:
    return int(cupy.cuda.Device().attributes["MultiProcessorCount"])


def align16(n: int) -> int:
    return (n + 15) & ~15


# Tuning per key size: (NT of blocksort, NT of merge, VT), measured on the H100 with
# benchmarks/bench_gpu_sort.py --sweep. VT odd: the thread-major transposes through shared memory
# are then free of bank conflicts. The blocksort tile is a multiple of the merge tile, so a merge
# tile never straddles two pairs of runs; a larger blocksort tile saves global passes.
# An entry keyed (key bytes, value bytes) overrides the one keyed by key bytes alone.
TUNING = {4: (512, 256, 21), 8: (512, 256, 17), 16: (256, 128, 17)}


@functools.cache
def tuning(key_bytes: int, value_bytes: int) -> tuple[int, int, int]:
    """(NT of blocksort, NT of merge, VT), shrunk until the shared memory fits this device."""
    nt_b, nt_m, vt = TUNING.get((key_bytes, value_bytes)) or TUNING[key_bytes]
    limit = smem_limit()

    def blocksort_smem(nt):
        return align16(nt * vt * key_bytes) + (nt * vt * 4 if value_bytes else 0)

    def merge_smem(nt):
        return align16(nt * vt * key_bytes) + nt * vt * value_bytes

    while merge_smem(nt_m) > limit and nt_m > 32:
        nt_m //= 2
        nt_b = min(nt_b, nt_m)
    while blocksort_smem(nt_b) > limit and nt_b > nt_m:
        nt_b //= 2
    return nt_b, nt_m, vt


def _compile_one(spec):
    sources, names = spec
    module(sources, names).compile()
    return len(names)


def cache_dir() -> Path:
    """CuPy's on-disk kernel cache (``CUPY_CACHE_DIR``, else ``~/.cupy/kernel_cache``)."""
    return Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")


def arch() -> str:
    """The current device's architecture as NVRTC names it, e.g. ``sm_90``."""
    return f"sm_{cupy.cuda.Device().compute_capability}"


def _built_marker() -> Path:
    return cache_dir() / f"dsort-{_digest()}-{arch()}.built"


def kernels_built() -> bool:
    """True when :func:`compile_all` filled the cache with these kernel sources for this device's
    architecture (so no run compiles on first use)."""
    return _built_marker().is_file()


def compile_all(specs, jobs: int | None = None) -> int:
    """Compile many modules in parallel processes into CuPy's on-disk cache (so that later
    processes load binaries instead of compiling), then mark the cache as holding them for this
    architecture. Returns the number of kernels built."""
    import concurrent.futures
    import multiprocessing

    jobs = jobs or min(len(specs), os.cpu_count() or 1)
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
        built = sum(pool.map(_compile_one, specs))
    marker = _built_marker()
    marker.parent.mkdir(parents=True, exist_ok=True)
    marker.write_text(f"{built} kernels\n")
    return built
