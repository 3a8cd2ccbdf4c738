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
# buffers, page by page, many times slower than page-locked memory, and page-locking an array in
# place costs less than that difference; new host memory is slow to touch the first time from one
# thread. So to_host touches the new array's pages from several threads, then page-locks it for
# the copy; small arrays take the plain path. The figures: BENCHMARKS.md (bench_host_transfer.py).
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


def peer_copy(x, src: int, dst: int):
    """A copy of device array ``x`` (contiguous, on GPU ``src``) on GPU ``dst``."""
    import cupy

    with cupy.cuda.Device(dst):
        out = cupy.empty(x.shape, x.dtype)
        # on the current stream of dst: kernels that read the copy come after it on that stream
        # (a plain memcpyPeer runs on the legacy stream, which non-blocking streams do not wait for)
        stream = cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memcpyPeerAsync(out.data.ptr, dst, x.data.ptr, src, x.nbytes, stream.ptr)
    return out


PIECE = 8 << 20  # bytes per staging piece: big enough for full-speed copies, small enough to pin cheaply


class Staging:
    """Page-locked host buffers of :data:`PIECE` bytes for one device, reused: a thread borrows
    two (:meth:`pieces`) and streams any amount of data through them, one piece filling while
    the other is being copied. Only as many buffers are ever allocated as are in use at once."""

    def __init__(self):
        self._free: list = []
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def pieces(self, k: int = 2):
        import cupy

        with self._lock:
            got = [self._free.pop() for _ in range(min(k, len(self._free)))]
        while len(got) < k:
            mem = cupy.cuda.alloc_pinned_memory(PIECE)
            got.append((mem, np.frombuffer(mem, np.uint8, PIECE)))
        try:
            yield [b for _, b in got]
        finally:
            with self._lock:
                self._free.extend(got)


_staging: dict = {}
_staging_lock = threading.Lock()


def staging(device: int = 0) -> Staging:
    """The staging buffers of CUDA device ``device`` (one pool per device, per process)."""
    with _staging_lock:
        return _staging.setdefault(device, Staging())


def upload(nbytes: int, fill, device: int):
    """A new device array of ``nbytes`` bytes (uint8, on ``device``, the current one) whose
    content ``fill(buffer, offset)`` writes piece by piece into page-locked buffers: a file read,
    a copy from host memory. Double-buffered: the next piece fills while the last one copies."""
    import cupy

    out = cupy.empty(nbytes, np.uint8)
    stream = cupy.cuda.get_current_stream()
    with staging(device).pieces(2) as bufs:
        done = [None, None]
        for k, off in enumerate(range(0, nbytes, PIECE)):
            b, n = k % 2, min(PIECE, nbytes - off)
            if done[b] is not None:
                done[b].synchronize()  # its last copy has left the buffer
            fill(bufs[b][:n], off)
            out[off : off + n].set(bufs[b][:n], stream=stream)
            done[b] = stream.record()
        stream.synchronize()
    return out


def download(x, sink, device: int) -> None:
    """Hand the bytes of device array ``x`` to ``sink(buffer, offset)`` piece by piece (a file
    write, say), copied through page-locked buffers; the next piece copies while one is sunk."""
    import cupy

    flat = cupy.ascontiguousarray(x).reshape(-1).view(np.uint8)
    nbytes = flat.size
    stream = cupy.cuda.get_current_stream()
    offsets = list(range(0, nbytes, PIECE))
    with staging(device).pieces(2) as bufs:
        events = [None, None]

        def start(k):
            off = offsets[k]
            n = min(PIECE, nbytes - off)
            flat[off : off + n].get(stream=stream, out=bufs[k % 2][:n], blocking=False)
            events[k % 2] = stream.record()

        if offsets:
            start(0)
        for k, off in enumerate(offsets):
            if k + 1 < len(offsets):
                start(k + 1)
            events[k % 2].synchronize()
            sink(bufs[k % 2][: min(PIECE, nbytes - off)], off)
