"""Host memory of the large arrays the host's sort makes. The one place that allocates them.

In the dataframe sort's tasks (:func:`pooled`) in a dask worker whose nanny set
``MALLOC_TRIM_THRESHOLD_`` (dask's default: 65536), they are NumPy arrays on buffers of Arrow's
mimalloc pool; elsewhere, NumPy's own. That setting makes
glibc hand every freed large array back to the OS, so each new one faults its pages in again: a
4 MB array costs about 1,000 page faults, which on a virtual machine take longer than a take or an
XOR over it. mimalloc keeps freed pages for the next buffers: with that setting a partition's sort,
a merge's gather and the whole frame sort of issue 11 all run faster on its pool, with far fewer
page faults (BENCHMARKS.md section 5). (Arrow's jemalloc pool hands the pages back at once,
whatever its decay.)

mimalloc keeps the pages until asked, and a thread can ask only for its own: so once the pool's
use (arrays made, bytes in use) has not changed for :data:`IDLE_S` seconds since the last time,
and no task runs, the worker's event loop has each of its task threads give theirs back
(``release_unused``), and a worker's memory falls back as glibc's would: after a sort, and after
a result is dropped. Arrays below :data:`SMALL` bytes always come from NumPy (glibc's heap keeps
them).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading

import numpy as np

SMALL = 1 << 17  # bytes: smaller arrays from np.empty (below glibc's mmap threshold: no faults)
IDLE_S = 1.0  # seconds without a new buffer after which the pool's free pages go back to the OS
_STATE = {"pid": None, "pool": None, "made": 0, "given": None, "seen": None}
_LOCK = threading.Lock()


def pool():
    """The Arrow memory pool the large arrays come from in this process, or None (NumPy's)."""
    if _STATE["pid"] != os.getpid():  # first use in this process (a forked child decides again)
        with _LOCK:
            if _STATE["pid"] != os.getpid():
                _STATE.update(pool=_worker_pool(), made=0, given=None, seen=None)
                _STATE["pid"] = os.getpid()
    return _STATE["pool"]


def use_pool(arrow_pool) -> None:
    """Make this process's large arrays on ``arrow_pool`` (None: NumPy's), whatever :func:`pool`
    would choose; its free pages are then given back only when asked (:func:`give_back`)."""
    with _LOCK:
        _STATE.update(pid=os.getpid(), pool=arrow_pool, made=0, given=None, seen=None)


def _no_worker():
    return None


# The dask worker whose task runs in this thread, or None. The engine imports no dask: the package
# sets it once (dsort/__init__.py: dsort.collections.remote.this_worker).
find_worker = _no_worker


def _worker_pool():
    """mimalloc's pool in a dask worker whose process has ``MALLOC_TRIM_THRESHOLD_`` set (by its
    nanny), its free pages given back when idle; else None."""
    if "MALLOC_TRIM_THRESHOLD_" not in os.environ:
        return None
    worker = find_worker()
    if worker is None:
        return None
    try:
        import pyarrow as pa

        arrow_pool = pa.mimalloc_memory_pool()
    except (ImportError, NotImplementedError):  # no mimalloc in this pyarrow
        return None
    worker.loop.add_callback(_give_back_when_idle, worker, arrow_pool)
    return arrow_pool


def _give_back_when_idle(worker, arrow_pool) -> None:
    """In the worker's event loop: every :data:`IDLE_S` seconds, where the pool's use (arrays
    made, bytes in use: a result dropped frees some) changed since the last give-back but not in
    the last period, and no task runs, one call per task thread that gives its pages back (a
    thread can give back only its own). Stops with the worker."""
    from tornado.ioloop import PeriodicCallback

    def tick():
        if worker.status.name in ("closing", "closing_gracefully", "closed", "failed"):
            timer.stop()
            return
        use = (_STATE["made"], arrow_pool.bytes_allocated())
        if use == _STATE["seen"] and use != _STATE["given"] and not worker.state.executing_count:
            _STATE["given"] = use  # every thread is free: each takes one call (see the barrier)
            threads = max(int(worker.state.nthreads), 1)
            meet = threading.Barrier(threads)
            try:
                for _ in range(threads):
                    worker.executor.submit(_give_back_in_thread, arrow_pool, meet)
            except RuntimeError:  # the executor is shut down: the worker is closing
                timer.stop()
        _STATE["seen"] = use

    timer = PeriodicCallback(tick, IDLE_S * 1000)
    timer.start()


def _give_back_in_thread(arrow_pool, meet) -> None:
    """This thread's free pages of the pool back to the OS; then a short wait for the other task
    threads, so that each takes one of these calls (one that a task took first is not waited
    for)."""
    arrow_pool.release_unused()
    try:
        meet.wait(timeout=0.05)
    except threading.BrokenBarrierError:
        pass


def give_back() -> None:
    """The pool's free pages that this thread freed back to the OS."""
    if _STATE["pool"] is not None:
        _STATE["pool"].release_unused()


_THREAD = threading.local()


@contextlib.contextmanager
def pooled():
    """Within the block, this thread's large arrays come from the pool (where :func:`pool` gives
    one): the dataframe sort's tasks, where it was measured; elsewhere they are NumPy's."""
    before = getattr(_THREAD, "pooled", False)
    _THREAD.pooled = True
    try:
        yield
    finally:
        _THREAD.pooled = before


def empty(shape, dtype) -> np.ndarray:
    """An uninitialized array of ``shape`` and ``dtype`` (writable, 64-byte aligned)."""
    dtype = np.dtype(dtype)
    shape = (shape,) if np.isscalar(shape) else tuple(shape)
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    arrow_pool = pool() if size >= SMALL and getattr(_THREAD, "pooled", False) else None
    if arrow_pool is None:
        return np.empty(shape, dtype)
    import pyarrow as pa

    buffer = pa.allocate_buffer(size, memory_pool=arrow_pool)
    _STATE["made"] += 1
    return np.frombuffer(buffer, dtype).reshape(shape)


def take(a: np.ndarray, positions) -> np.ndarray:
    """``a[positions]`` along axis 0 (IndexError where a position lies outside ``a``, as there)."""
    positions = np.asarray(positions)
    if len(positions) and (positions.min() < -len(a) or positions.max() >= len(a)):
        raise IndexError(
            f"positions in [{positions.min()}, {positions.max()}] outside an array of {len(a)}"
        )
    out = empty((len(positions),) + a.shape[1:], a.dtype)
    # "raise" would buffer the output: checked above
    return np.take(a, positions, axis=0, out=out, mode="wrap")


def concatenate(arrays, dtype=None) -> np.ndarray:
    """The arrays end to end along axis 0 (of ``dtype``, default the first's)."""
    first = arrays[0]
    out = empty((sum(len(a) for a in arrays),) + first.shape[1:], dtype or first.dtype)
    return np.concatenate(arrays, axis=0, out=out)


def copy(a: np.ndarray, dtype=None) -> np.ndarray:
    """``a`` copied (cast to ``dtype``, default its own)."""
    out = empty(a.shape, dtype or a.dtype)
    np.copyto(out, a, casting="unsafe")
    return out


IOTA = 1 << 18  # positions a block of arange (a columnar sort's piece: one or two blocks)


@functools.cache
def _iota(dtype) -> np.ndarray:
    block = np.arange(IOTA, dtype=dtype)
    block.flags.writeable = False  # shared by every call
    return block


def arange(n: int, dtype=np.int64) -> np.ndarray:
    """``0, 1, ..., n - 1``: a cached block of positions plus each block's first, by NumPy's
    ``add``, which gives the GIL up (``cumsum`` and ``arange`` hold it throughout: with 16
    threads sorting Parquet pieces, 7% of the time the GIL was held went there, BENCHMARKS.md
    section 10)."""
    dtype = np.dtype(dtype)
    out = empty(n, dtype)
    iota = _iota(dtype)
    for at in range(0, n, IOTA):
        m = min(IOTA, n - at)
        np.add(iota[:m], dtype.type(at), out=out[at : at + m])
    return out


HEAP_ARRAYS = 32 << 20  # bytes: glibc's largest mmap threshold (arrays up to this from its heaps)
KEEP_FREED = 256 << 20  # bytes of freed memory glibc keeps at a heap's top (keep_freed_memory)


def keep_freed_memory(keep: int = KEEP_FREED) -> bool:
    """Where this process sorts on its own host (the command line on the CPU): glibc serves arrays
    of up to :data:`HEAP_ARRAYS` bytes from its heaps, and keeps up to ``keep`` bytes of freed
    memory there for the next ones. By default it maps each array of 128 KiB or more afresh and
    unmaps it when freed, so its pages fault in every time: the columnar sort makes thousands of
    such arrays (keys, hashes, takes), and spent most of its system time there (BENCHMARKS.md
    section 10). Arrow's arrays come from the same heaps (its system pool): its default pool,
    mimalloc, gives freed pages back to the system after 10 ms, and they faulted in again at the
    next take (a third of a Parquet sort's CPU time was the system's). Process-wide, so never
    called for a library's caller. False where the C library has no ``mallopt`` (not glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    _arrow_from_heaps()
    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
    return bool(mallopt(M_MMAP_THRESHOLD, HEAP_ARRAYS)) and bool(
        mallopt(M_TRIM_THRESHOLD, int(keep))
    )


def _arrow_from_heaps() -> None:
    """Arrow's default memory pool made its system pool (glibc's heaps): where pyarrow is not
    imported yet, by the variable it reads as it loads (a sort of records never imports it)."""
    import os
    import sys

    if "pyarrow" in sys.modules:
        pa = sys.modules["pyarrow"]
        pa.set_memory_pool(pa.system_memory_pool())
    else:
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
