"""dsort.engine.host: the host's large arrays, NumPy's or on Arrow's pool, equal to NumPy's own."""

import numpy as np
import pytest

from dsort.engine import host


def _same(x, y) -> bool:
    """Equal shapes, dtypes and bytes (NaN payloads and void rows compare too)."""
    return x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes()


@pytest.fixture(params=["numpy", "mimalloc"])
def pooled(request):
    """This process's large arrays from NumPy, then from Arrow's mimalloc pool (as in a worker)."""
    import pyarrow as pa

    host.use_pool(None if request.param == "numpy" else pa.mimalloc_memory_pool())
    with host.pooled():
        yield host.pool()
    host.use_pool(None)


@pytest.mark.parametrize("n", [0, 1, 7, host.SMALL // 8 - 1, host.SMALL // 8, 100_003])
@pytest.mark.parametrize("dtype", ["int64", "uint64", "int32", "float64", "bool", "V3"])
def test_host_arrays_are_numpys(rng, pooled, n, dtype):
    dtype = np.dtype(dtype)
    a = rng.integers(0, 256, n * dtype.itemsize, dtype=np.uint8).view(dtype)
    e = host.empty(n, dtype)
    assert e.shape == (n,) and e.dtype == dtype and e.flags.writeable and e.flags.c_contiguous
    on_pool = pooled is not None and n * dtype.itemsize >= host.SMALL
    assert (e.base is not None) == on_pool  # from the pool only where big: NumPy's own below
    positions = rng.integers(0, max(n, 1), 2 * n) if n else np.arange(0)
    if n:
        assert _same(host.take(a, positions), a[positions])
    assert _same(host.concatenate([a, a[: n // 2], a[:0]]), np.concatenate([a, a[: n // 2]]))
    c = host.copy(a)
    assert _same(c, a) and not np.shares_memory(c, a)
    if dtype.kind in "iu":
        assert _same(host.copy(a, np.uint64), a.astype(np.uint64))
        assert _same(host.arange(n, dtype), np.arange(n, dtype=dtype))


@pytest.mark.parametrize("n", [host.IOTA - 1, host.IOTA, host.IOTA + 1, 2 * host.IOTA + 5])
@pytest.mark.parametrize("dtype", ["int64", "uint64", "int32"])
def test_host_arange_across_its_blocks(pooled, n, dtype):
    """Positions are made a block at a time: around and across the blocks' bounds, NumPy's."""
    assert _same(host.arange(n, np.dtype(dtype)), np.arange(n, dtype=dtype))


def test_host_take_refuses_positions_outside(pooled):
    a = np.arange(10)
    assert _same(host.take(a, np.array([-10, -1, 0, 9])), a[[-10, -1, 0, 9]])
    for bad in ([10], [-11], [0, 3, 12]):
        with pytest.raises(IndexError):
            host.take(a, np.array(bad))
    with pytest.raises(IndexError):
        host.take(np.arange(0), np.array([0]))


def test_host_take_of_rows_and_empty_shapes(rng, pooled):
    rows = rng.integers(0, 9, (50_000, 3))
    positions = rng.permutation(50_000)
    assert _same(host.take(rows, positions), rows[positions])
    assert host.empty((0, 4), np.uint8).shape == (0, 4)
    assert host.empty((40_000, 4), np.uint8).shape == (40_000, 4)


def test_outside_a_worker_the_arrays_are_numpys():
    import pyarrow as pa

    host.use_pool(None)
    host._STATE["pid"] = None  # choose again, as a new process would: here no worker, so NumPy's
    with host.pooled():
        assert host.pool() is None and host.empty(1 << 20, np.uint8).base is None
    host.use_pool(pa.mimalloc_memory_pool())  # a worker's, but outside the dataframe sort's tasks: NumPy's
    try:
        assert host.empty(1 << 20, np.uint8).base is None
        with host.pooled():
            assert host.empty(1 << 20, np.uint8).base is not None
    finally:
        host.use_pool(None)


def test_the_pools_free_pages_go_back_when_asked():
    """Freed arrays' pages stay in the pool for the next arrays until give_back, in the thread
    that made them."""
    from concurrent.futures import ThreadPoolExecutor

    import psutil
    import pyarrow as pa

    me = psutil.Process()
    arrow_pool = pa.mimalloc_memory_pool()
    host.use_pool(arrow_pool)
    try:
        host.give_back()
        base = me.memory_info().rss

        def some():
            with host.pooled():
                arrays = [host.empty(1 << 22, np.uint8) for _ in range(32)]  # 128 MiB
            for a in arrays:
                a.fill(1)
            return arrays

        with ThreadPoolExecutor(1) as thread:  # made in a thread, as a worker's tasks are
            arrays = thread.submit(some).result()
            assert arrow_pool.bytes_allocated() >= 128 << 20
            del arrays
            assert me.memory_info().rss > base + (96 << 20)  # kept, for the next arrays
            thread.submit(host.give_back).result()
            assert me.memory_info().rss < base + (32 << 20)
    finally:
        host.use_pool(None)


def _make_and_drop():
    """In a worker: the pool chosen, a sort's worth of arrays made and dropped; the memory before
    and after (kept, for the next arrays)."""
    import psutil

    me = psutil.Process()
    chosen = host.pool()
    host.give_back()
    base = me.memory_info().rss
    with host.pooled():  # as the dataframe sort's tasks
        arrays = [host.empty(1 << 22, np.uint8) for _ in range(32)]
    for a in arrays:
        a.fill(1)
    del a, arrays
    return chosen.backend_name if chosen is not None else None, base, me.memory_info().rss


def _make_drop_and_stay(seconds):
    """Arrays made and dropped, then this task thread busy for a while (not giving them back)."""
    import time

    _make_and_drop()
    time.sleep(seconds)


def _kept():
    """A result of pool arrays, which the worker holds until the client drops it."""
    with host.pooled():
        arrays = [host.empty(1 << 22, np.uint8) for _ in range(32)]
    for a in arrays:
        a.fill(1)
    return arrays


def _memory():
    import psutil

    return psutil.Process().memory_info().rss


def test_a_workers_arrays_come_from_mimalloc_and_go_back_when_idle():
    """In a dask worker (its nanny sets MALLOC_TRIM_THRESHOLD_) the large arrays are on mimalloc's
    pool, and once the pool's use stays still for a while its task threads give the free pages
    back: those of arrays a task dropped (again after a second sort that ends where the first did,
    and where the thread stayed busy past the first chance), and those of a result the client dropped."""
    import time

    import pyarrow as pa
    from distributed import Client, LocalCluster

    try:
        pa.mimalloc_memory_pool()
    except NotImplementedError:
        pytest.skip("this pyarrow has no mimalloc")
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=":0") as cluster, Client(cluster) as client:
        name, base, kept = client.submit(_make_and_drop, pure=False).result()
        time.sleep(3 * host.IDLE_S)
        after = client.submit(_memory, pure=False).result()
        again = client.submit(_make_and_drop, pure=False).result()[2]  # a second sort ends where the first did
        time.sleep(3 * host.IDLE_S)
        after_again = client.submit(_memory, pure=False).result()
        busy = client.submit(_make_drop_and_stay, 2 * host.IDLE_S, pure=False)  # its thread busy past a tick
        busy.result()
        time.sleep(3 * host.IDLE_S)
        after_busy = client.submit(_memory, pure=False).result()
        result = client.submit(_kept, pure=False)  # held by the worker, then dropped by the client
        result.result()
        time.sleep(3 * host.IDLE_S)
        held = client.submit(_memory, pure=False).result()
        del result
        time.sleep(3 * host.IDLE_S)
        dropped = client.submit(_memory, pure=False).result()
    assert name == "mimalloc"
    assert kept > base + (96 << 20) and after < base + (32 << 20)
    assert again > base + (96 << 20) and after_again < base + (32 << 20)
    assert after_busy < base + (32 << 20)
    assert held > after + (96 << 20) and dropped < after + (32 << 20)


_MAPPED = """
import ctypes, sys
import numpy as np
from dsort.engine import host

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    names = "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
    _fields_ = [(f, ctypes.c_size_t) for f in names.split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
if sys.argv[1] == "keep":
    assert host.keep_freed_memory()
before = libc.mallinfo2().hblkhd
a = np.ones(16 << 20, np.uint8)  # 16 MiB
print(libc.mallinfo2().hblkhd - before >= 16 << 20)
"""


def test_keeping_freed_memory_serves_arrays_from_the_heap():
    """In a process of its own (the setting is process-wide): a 16 MiB array is a mapping of its
    own by default, and comes from glibc's heap once :func:`host.keep_freed_memory` ran."""
    import ctypes
    import subprocess
    import sys

    if not hasattr(ctypes.CDLL(None), "mallinfo2"):
        pytest.skip("not glibc 2.33 or later")
    said = [
        subprocess.run([sys.executable, "-c", _MAPPED, how], capture_output=True, text=True, check=True).stdout.split()
        for how in ("default", "keep")
    ]
    assert said == [["True"], ["False"]]


_ARROW_POOL = """
import sys
from dsort.engine import host
if sys.argv[1] == "before":
    import pyarrow
assert host.keep_freed_memory()
import pyarrow as pa
print(pa.default_memory_pool().backend_name, pa.array(range(1000)).sum().as_py())
"""


@pytest.mark.parametrize("imported", ["before", "after"])
def test_keeping_freed_memory_gives_arrow_the_same_heaps(imported):
    """Arrow's arrays come from glibc's heaps too once :func:`host.keep_freed_memory` ran, whether
    pyarrow was imported before it or after (its pool chosen by the variable it reads)."""
    import ctypes
    import os
    import subprocess
    import sys

    if not hasattr(ctypes.CDLL(None), "mallopt"):
        pytest.skip("not glibc")
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    said = subprocess.run([sys.executable, "-c", _ARROW_POOL, imported], capture_output=True, text=True, check=True, env=env)
    assert said.stdout.split() == ["system", str(sum(range(1000)))]
