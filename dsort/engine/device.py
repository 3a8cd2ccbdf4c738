"""The one place where data moves between host and device, and where the GPUs are found.

* :func:`xp_of` – the array module of an array (NumPy or CuPy), found the same way everywhere.
* :func:`gpu_count`, :func:`has_gpu` – the CUDA devices CuPy sees (0 where CuPy is missing).
* :func:`from_host`, :func:`to_host` – whole arrays, page-locked in place for the copy.
* :class:`Staging` – reused page-locked host buffers: a stream of blocks is read from a file into
  one, copied to the device from it, and copied back into one to be written, with no new pinned
  allocation per block.

Imports no CuPy until a function needs it, so the CPU-only paths never pay for it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np


def xp_of(a):
    """NumPy or CuPy: the module of array ``a`` (anything not CuPy counts as NumPy)."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def is_device_array(a) -> bool:
    return type(a).__module__.split(".")[0] == "cupy"


@functools.cache
def gpu_count() -> int:
    """How many CUDA devices CuPy sees here (0 without CuPy or a driver)."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:
        return 0


def has_gpu() -> bool:
    """True where CuPy is installed and sees a CUDA device."""
    return gpu_count() > 0


# Host <-> device copies of whole chunks. CUDA copies pageable host memory through small staging
# buffers, page by page. Measured on 2x H200 (benchmarks/bench_host_transfer.py, 2 GiB): host to
# device 2.0 GB/s pageable, against 55 GB/s once the array is page-locked in place (cudaHostRegister
# 28 GB/s, cudaHostUnregister 57 GB/s); device to host 3.6 GB/s into new pageable memory, 16 GB/s
# into memory already touched. New host memory is slow to touch the first time (5 GB/s, one
# thread), so to_host touches the new array's pages from several threads, then page-locks it for
# the copy. Small arrays take the plain path.
PINNED_MIN_BYTES = 4 << 20
_REGISTER_READ_ONLY = 8  # cudaHostRegisterReadOnly: memory-mapped, read-only inputs too
_PAGE = 4096
_touch_pool = None


def _register(a, read_only) -> bool:
    """Page-lock NumPy array ``a``'s memory in place; False where that is refused (e.g. pages that
    another thread has locked, or a kernel that allows no more)."""
    import cupy

    rt = cupy.cuda.runtime
    for flags in (_REGISTER_READ_ONLY,) if read_only else (0,):
        try:
            rt.hostRegister(a.ctypes.data, a.nbytes, flags)
            return True
        except rt.CUDARuntimeError:
            try:
                rt.getLastError()  # a refused registration is no error of later calls
            except Exception:
                pass
    return False


def from_host(a):
    """A NumPy array copied to the current device: page-locked in place for the copy (the array
    is not modified), or the plain pageable copy where that is not possible."""
    import cupy

    a = np.asarray(a)
    if a.nbytes < PINNED_MIN_BYTES or not a.flags.c_contiguous or not _register(a, read_only=not a.flags.writeable):
        return cupy.asarray(a)
    try:
        out = cupy.empty(a.shape, a.dtype)
        out.set(a)
        cupy.cuda.get_current_stream().synchronize()
    finally:
        cupy.cuda.runtime.hostUnregister(a.ctypes.data)
    return out


def _touch(a):
    """Fault in the pages of new NumPy array ``a`` from several threads (NumPy's fill releases the GIL)."""
    global _touch_pool

    flat = a.reshape(-1).view(np.uint8)
    threads = max(1, min(8, (os.cpu_count() or 1) // 2))
    if _touch_pool is None:
        _touch_pool = ThreadPoolExecutor(threads, thread_name_prefix="dsort-touch")
    step = -(-len(flat) // threads // _PAGE) * _PAGE
    list(_touch_pool.map(lambda i: flat[i : i + step : _PAGE].fill(0), range(0, len(flat), step)))


def to_host(x) -> np.ndarray:
    """A new NumPy array holding a copy of ``x`` (a CuPy array; a NumPy array is copied too)."""
    if isinstance(x, np.ndarray):
        return x.copy()
    import cupy

    x = cupy.ascontiguousarray(x)
    if x.nbytes < PINNED_MIN_BYTES:
        return cupy.asnumpy(x)
    out = np.empty(x.shape, x.dtype)
    _touch(out)
    if not _register(out, read_only=False):
        x.get(out=out)
        return out
    try:
        x.get(out=out)
    finally:
        cupy.cuda.runtime.hostUnregister(out.ctypes.data)
    return out


class Staging:
    """Page-locked host buffers for one device, reused: :meth:`buffer` lends one of at least
    ``nbytes`` (a NumPy ``uint8`` array over pinned memory) and takes it back when the block ends.
    At most one buffer per concurrent borrower is ever allocated."""

    def __init__(self):
        self._free: list = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def buffer(self, nbytes: int):
        import cupy

        nbytes = max(int(nbytes), 1)
        with self._lock:
            fits = [b for b in self._free if b[1].nbytes >= nbytes]
            item = min(fits, key=lambda b: b[1].nbytes) if fits else None
            if item is not None:
                self._free.remove(item)
        if item is None:
            mem = cupy.cuda.alloc_pinned_memory(nbytes)
            item = (mem, np.frombuffer(mem, np.uint8, nbytes))
        try:
            yield item[1][:nbytes]
        finally:
            with self._lock:
                self._free.append(item)

    def clear(self) -> None:
        with self._lock:
            self._free.clear()


_staging: dict = {}


def staging(device: int = 0) -> Staging:
    """The staging buffers of CUDA device ``device`` (one pool per device, per process)."""
    return _staging.setdefault(device, Staging())
