"""The one place where data moves between host and device, and where the GPUs are found.

* :func:`xp_of` – the array module of an array (NumPy or CuPy), found the same way everywhere.
* :func:`gpu_count`, :func:`has_gpu` – the CUDA devices CuPy sees (0 where CuPy is missing).
* :func:`from_host`, :func:`to_host` – whole arrays, page-locked in place for the copy, or through
  reused pinned buffers while other threads copy too; :func:`from_host_joined` – many host arrays
  as one device array, copied once.
* :class:`Staging` – reused page-locked host buffers: a stream of blocks is read from a file into
  one, copied to the device from it, and copied back into one to be written, with no new pinned
  allocation per block.
* :func:`slices_to_host` – many small row ranges of a device array, gathered and copied out at once.
* :func:`own_pool`, :func:`cudf_owned`, :func:`after_default_stream`, :func:`on_default_stream` –
  living beside cudf: CuPy's own pool where cudf left RMM's unpooled allocator (RMM's for arrays
  cudf will own), and cudf's stream (the default one) ordered with this thread's.

Device arrays shared with the host's other processes (CUDA IPC): :mod:`dsort.engine.ipc`.

Imports no CuPy until a function needs it, so the CPU-only paths never pay for it.
"""

from __future__ import annotations

import contextlib
import functools
import mmap
import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import host


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


def current_device() -> int:
    """The calling thread's current CUDA device."""
    import cupy

    return cupy.cuda.Device().id


def has_gpu() -> bool:
    """True where CuPy is installed and sees a CUDA device."""
    return gpu_count() > 0


# Host <-> device copies of whole chunks. CUDA copies pageable host memory through small staging
# buffers, page by page, many times slower than page-locked memory, and page-locking an array in
# place costs less than that difference; new host memory is slow to touch the first time from one
# thread. So to_host touches the new array's pages from several threads, then page-locks it for
# the copy; small arrays take the plain path. While another thread of the process copies too, both
# directions go through the staging buffers instead (see _alone). The figures: BENCHMARKS.md
# (bench_host_transfer.py, bench_concurrent_transfer.py).
#
# Page-locked host memory is process-wide, and CuPy copies from (or into) any host pointer that is
# page-locked as from pinned memory: asynchronously, by DMA straight from those pages. So pages
# that one thread locked must stay locked while another thread may be copying through them: an
# unregister under a copy in flight is a DMA fault, the sticky "unspecified launch failure" that
# ends every later CUDA call of the process (or an "invalid value" from the copy, as it races the
# unregister). Hence: only whole pages inside an array are ever locked (no other allocation shares
# them), one registry counts the users of each locked range (a thread copying an array that
# another has locked shares that lock, which is released by the last of them), and an array that
# partly overlaps a locked range goes through this module's own pinned staging buffers, never
# through CuPy's plain copy of the user's pages.
PINNED_MIN_BYTES = 4 << 20
_REGISTER_READ_ONLY = 8  # cudaHostRegisterReadOnly: memory-mapped, read-only inputs too
_PAGE = 4096
_OS_PAGE = mmap.PAGESIZE  # what cudaHostRegister locks: whole pages of the OS
_touch_pool = None
_pins: dict = {}  # (first byte, end byte) of a locked range of pages -> [users, read_only]
_pins_lock = threading.Lock()


def _register(ptr: int, nbytes: int, read_only: bool) -> bool:
    """Page-lock host bytes [ptr, ptr + nbytes) (whole pages) in place; False where that is
    refused (a kernel that allows no more, say)."""
    import cupy

    rt = cupy.cuda.runtime
    for flags in (_REGISTER_READ_ONLY,) if read_only else (0,):
        try:
            rt.hostRegister(ptr, nbytes, flags)
            return True
        # CuPy clears CUDA's last error as it raises: no error of later calls
        except rt.CUDARuntimeError:
            pass
    return False


@contextlib.contextmanager
def _pinned(a: np.ndarray, read_only: bool):
    """Page-lock the whole pages inside C-contiguous ``a`` for the block: yields ``(lo, hi)``, the
    byte offsets in ``a`` of the locked part, or None where none could be locked (no whole page
    inside, a refusal, or a conflict: see below). Threads locking the same pages share one lock
    (read-only where all of them only read), released by the last one out.

    The copy then reads the partial pages at either end of ``a`` as pageable memory, so no other
    lock may hold them while it runs, and no other thread may lock them meanwhile: a lock is
    refused where ``a``'s pages, partial ones included, meet another lock's pages, or where the
    pages it would lock meet the pages (partial ones included) of another lock's arrays."""
    import cupy

    ptr = a.ctypes.data
    first, end = -(-ptr // _OS_PAGE) * _OS_PAGE, (ptr + a.nbytes) // _OS_PAGE * _OS_PAGE
    outer = (ptr // _OS_PAGE * _OS_PAGE, -(-(ptr + a.nbytes) // _OS_PAGE) * _OS_PAGE)
    key = (first, end)
    with _pins_lock:
        pin = _pins.get(key)
        clash = any(
            k != key and (k[0] < outer[1] and outer[0] < k[1] or first < p[3] and p[2] < end)
            # p: [users, read only, first and end byte of its arrays' pages]
            for k, p in _pins.items()
        )
        if clash or end <= first:
            pin = None
        elif pin is not None and (read_only or not pin[1]):
            pin[0] += 1
            pin[2], pin[3] = min(pin[2], outer[0]), max(pin[3], outer[1])
        elif pin is None and _register(first, end - first, read_only):
            pin = _pins[key] = [1, read_only, *outer]
        else:
            pin = None
    if pin is None:
        yield None
        return
    try:
        yield first - ptr, end - ptr
    finally:
        with _pins_lock:
            pin[0] -= 1
            if pin[0] == 0:
                del _pins[key]
                cupy.cuda.runtime.hostUnregister(first)


def _copy_pieces(dst: int, src: int, nbytes: int, span, kind: int) -> None:
    """Copy ``nbytes`` between host and device on the current stream and wait for it: the locked
    span ``(lo, hi)`` in one piece, the partial pages before and after it through CUDA's pageable
    path (less than a page each)."""
    import cupy

    rt = cupy.cuda.runtime
    stream = cupy.cuda.get_current_stream()
    lo, hi = span
    for a, b in ((0, lo), (lo, hi), (hi, nbytes)):
        if b > a:
            rt.memcpyAsync(dst + a, src + a, b - a, kind, stream.ptr)
    stream.synchronize()


_copying = [0]  # threads of this process inside a large copy between host and device
_copying_lock = threading.Lock()


@contextlib.contextmanager
def _alone():
    """Whether no other thread of this process is copying between host and device (large
    copies). Alone, page-locking the array in place is the faster way; with others at it, their
    page locks queue on each other, and the reused staging buffers are faster, both ways
    (benchmarks/bench_concurrent_transfer.py; BENCHMARKS.md section 7)."""
    with _copying_lock:
        _copying[0] += 1
        alone = _copying[0] == 1
    try:
        yield alone
    finally:
        with _copying_lock:
            _copying[0] -= 1


def _pinned_if(alone: bool, a: np.ndarray, read_only: bool):
    return _pinned(a, read_only) if alone else contextlib.nullcontext(None)


def from_host(a):
    """A NumPy array copied to the current device: page-locked in place for the copy (the array
    is not modified) where no other thread copies meanwhile, else (or where its pages cannot be
    locked) through pinned staging buffers."""
    import cupy

    a = np.asarray(a)
    if a.nbytes < PINNED_MIN_BYTES or not a.flags.c_contiguous:
        # from a private copy: CuPy would copy a view of pages that another thread has locked
        # straight from them, asynchronously
        return cupy.asarray(np.array(a, order="C"))
    with _alone() as alone, _pinned_if(alone, a, not a.flags.writeable) as span:
        if span is not None:
            out = cupy.empty(a.shape, a.dtype)
            _copy_pieces(
                out.data.ptr, a.ctypes.data, a.nbytes, span, cupy.cuda.runtime.memcpyHostToDevice
            )
            return out
    flat = a.reshape(-1).view(np.uint8)
    out = upload(
        a.nbytes, lambda buf, off: np.copyto(buf, flat[off : off + len(buf)]), cupy.cuda.Device().id
    )
    return out.view(a.dtype).reshape(a.shape)


def from_host_joined(arrays):
    """The NumPy arrays ``arrays`` (one dtype, 1-d) joined into one array on the current device,
    copied once: each piece of the staging buffers is filled from the arrays it spans, so no
    joined copy is made on the host and the small arrays of many partitions make one transfer
    (not one each: a synchronous copy from pageable memory under the GIL per array)."""
    import cupy

    arrays = [np.ascontiguousarray(a).reshape(-1) for a in arrays]
    if len(arrays) == 1:
        return from_host(arrays[0])
    dtype = arrays[0].dtype
    if any(a.dtype != dtype for a in arrays):
        raise TypeError(
            "from_host_joined joins arrays of one dtype, not "
            f"{sorted({str(a.dtype) for a in arrays})}"
        )
    nbytes, fill = joined_fill(arrays)
    if nbytes < PINNED_MIN_BYTES:
        return cupy.asarray(np.concatenate(arrays))
    out = upload(nbytes, fill, cupy.cuda.Device().id)
    return out.view(dtype)


def joined_fill(arrays):
    """``(bytes, fill)`` of 1-d C-contiguous arrays joined: ``fill(buffer, offset)`` writes the
    joined bytes from ``offset`` on into ``buffer`` (:func:`upload`'s source of
    :func:`from_host_joined`)."""
    flats = [a.view(np.uint8) for a in arrays]
    ends = np.cumsum([0] + [len(f) for f in flats])

    def fill(buf, off):
        at, end = off, off + len(buf)
        k = int(np.searchsorted(ends, at, side="right")) - 1
        while at < end:
            start, n = at - int(ends[k]), min(end, int(ends[k + 1])) - at
            np.copyto(buf[at - off : at - off + n], flats[k][start : start + n])
            at, k = at + n, k + 1

    return int(ends[-1]), fill


def _touch(a):
    """Fault in the pages of new NumPy array ``a`` from several threads (NumPy's fill releases the
    GIL)."""
    global _touch_pool

    flat = a.reshape(-1).view(np.uint8)
    threads = max(1, min(8, (os.cpu_count() or 1) // 2))
    if _touch_pool is None:
        _touch_pool = ThreadPoolExecutor(threads, thread_name_prefix="dsort-touch")
    step = -(-len(flat) // threads // _PAGE) * _PAGE
    list(_touch_pool.map(lambda i: flat[i : i + step : _PAGE].fill(0), range(0, len(flat), step)))


def to_host(x) -> np.ndarray:
    """A new NumPy array holding a copy of ``x`` (a CuPy array; a NumPy array is copied too), in
    :mod:`~dsort.engine.host` memory (in a task that pools its arrays, pages used before: new
    pages fault in one by one, and from several threads at once they queue on the process's
    memory map)."""
    if isinstance(x, np.ndarray):
        return x.copy()
    import cupy

    # a view (every s-th key): copied by dsort's kernel, not a CuPy one
    if not x.flags.c_contiguous:
        from ._codes import contiguous

        x = contiguous(x)
    if x.nbytes < PINNED_MIN_BYTES:
        return cupy.asnumpy(x)
    out = host.empty(x.shape, x.dtype)
    with _alone() as alone, x.device:  # on x's device, after the work queued on its stream there
        if alone:
            _touch(out)
            with _pinned(out, read_only=False) as span:
                if span is not None:
                    _copy_pieces(
                        out.ctypes.data,
                        x.data.ptr,
                        x.nbytes,
                        span,
                        cupy.cuda.runtime.memcpyDeviceToHost,
                    )
                    return out
        # through the staging buffers: with other threads copying, or pages not locked (pooled
        # memory may share its end pages with arrays that another thread has locked)
        flat = out.reshape(-1).view(np.uint8)
        download(x, lambda buf, off: np.copyto(flat[off : off + len(buf)], buf), x.device.id)
    return out


# cudaErrorPeerAccessAlreadyEnabled (CuPy exports no name for it)
_PEER_ACCESS_ALREADY_ENABLED = 704
_peers: dict = {}  # (dst, src) -> whether dst reads src's memory directly, in this process
_peers_lock = threading.Lock()


def peer_access(dst: int, src: int) -> bool:
    """Whether GPU ``dst`` reads GPU ``src``'s memory directly (NVLink or PCIe) in this process:
    enabled here once per pair, where the two can. Without it a copy between them is staged through
    host memory by the driver, the slower way for a merge reading another GPU's run slices
    (BENCHMARKS.md section 5). Idempotent and thread-safe: peer access belongs to the process's
    context, so the first thread enables it under a lock and the others read the answer; where
    another library (CuPy's own copies between devices, cudf) enabled it first, CUDA's "already
    enabled" is a yes. Too many peers (8 per GPU) is a no: the copies still work, staged. CuPy
    clears CUDA's last error as it raises, so a refusal is no error of a later call."""
    import cupy

    if dst == src:
        return True
    with _peers_lock:
        known = _peers.get((dst, src))
        if known is None:
            rt = cupy.cuda.runtime
            known = bool(rt.deviceCanAccessPeer(dst, src))
            if known:
                with cupy.cuda.Device(dst):
                    try:
                        rt.deviceEnablePeerAccess(src)
                    except rt.CUDARuntimeError as e:
                        known = e.status == _PEER_ACCESS_ALREADY_ENABLED
            _peers[(dst, src)] = known
    return known


def peer_copy(x, src: int, dst: int):
    """A copy of device array ``x`` (contiguous, on GPU ``src``) on GPU ``dst``: directly where
    the two GPUs can (:func:`peer_access`)."""
    import cupy

    peer_access(dst, src)
    with cupy.cuda.Device(dst):
        out = cupy.empty(x.shape, x.dtype)
        # on the current stream of dst: kernels that read the copy come after it on that stream
        # (a plain memcpyPeer runs on the legacy stream, which non-blocking streams do not wait for)
        stream = cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memcpyPeerAsync(out.data.ptr, dst, x.data.ptr, src, x.nbytes, stream.ptr)
    return out


# bytes per staging piece: big enough for full-speed copies, small enough to pin cheaply
PIECE = 8 << 20


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


_streams = threading.local()


def _thread_stream(device: int):
    """This thread's own non-blocking stream on ``device`` (made once: CuPy's memory pool reuses
    a block on the stream that freed it)."""
    import cupy

    streams = _streams.__dict__.setdefault("by_device", {})
    if device not in streams:
        with cupy.cuda.Device(device):
            streams[device] = cupy.cuda.Stream(non_blocking=True)
    return streams[device]


def slices_to_host(x, device: int, ranges) -> list:
    """Rows ``[lo, hi)`` of device array ``x`` (on GPU ``device``) for each of ``ranges``, in host
    memory: gathered on the GPU, copied out at once (the cuts read thousands of small windows).
    Threads may call it at once: each works on its own stream."""
    import cupy

    lengths = [hi - lo for lo, hi in ranges]
    rows = np.repeat(
        np.asarray([lo for lo, _ in ranges], np.int64) - np.cumsum([0] + lengths[:-1]), lengths
    ) + np.arange(sum(lengths))
    with cupy.cuda.Device(device), _thread_stream(device):
        host = to_host(x[cupy.asarray(rows)])  # one gather, one copy out
    out, at = [], 0
    for lo, hi in ranges:
        out.append(host[at : at + hi - lo])
        at += hi - lo
    return out
