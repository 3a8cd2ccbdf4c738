"""dsort.engine.ipc: device arrays shared between a host's processes (CUDA IPC); the counting of
opened mappings and the visibility of another machine's arrays on any machine (CUDA IPC stood in
for), the sharing itself on a device."""

import contextlib

import numpy as np
import pytest

from dsort.engine import ipc


def test_opening_no_shared_arrays_needs_no_gpu():
    with ipc.opened([]) as got:
        assert got == []


def test_a_shared_array_of_another_machine_is_not_visible_here():
    """PCI bus ids repeat from machine to machine: a handle of another machine's GPU is never
    opened here, whatever its bus id."""
    other = ipc.Shared(b"", (1,), "u1", "0000:00:00.0", "elsewhere/" + ipc.host_id(), "p")
    assert ipc.local_device(other) is None and ipc.host_id() == ipc.host_id()


_CHILD = """
import pickle, sys
import numpy as np
from dsort.engine import device, ipc
import cupy
shared, ranges, use = pickle.loads(sys.stdin.buffer.read())
cupy.cuda.Device(use).use()
with ipc.opened([shared]) as [(x, d)]:
    whole = device.to_host(x)
    parts = device.slices_to_host(x, d, ranges)
sys.stdout.buffer.write(pickle.dumps((d, whole, parts)))
"""


@pytest.mark.gpu
@pytest.mark.parametrize("reader", [0, 1])
def test_a_shared_device_array_is_read_by_another_process(rng, reader):
    """A device array shared by this process is opened by another (CUDA IPC), by its GPU's PCI
    bus id, and read whole and in slices; the owner's copy is its own allocation. A reader whose
    current GPU is another one (``reader`` 1, on a machine of two GPUs or more) maps it into that
    GPU where the two GPUs have peer access."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import pickle
    import subprocess
    import sys

    import cupy

    if reader >= cupy.cuda.runtime.getDeviceCount():
        pytest.skip("one GPU")

    n = int(rng.integers(1, 5000))
    x = cupy.asarray(rng.integers(0, 256, (n, 7), dtype=np.uint8))
    own, shared = ipc.share(x)
    assert shared.owner == ipc.PROCESS and shared.shape == (n, 7) and ipc.local_device(shared) == x.device.id
    assert own.data.ptr != x.data.ptr and bool((own == x).all())
    cuts = np.sort(rng.integers(0, n + 1, 6))
    ranges = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], input=pickle.dumps((shared, ranges, reader)), capture_output=True, timeout=120, check=True
    )
    d, whole, parts = pickle.loads(child.stdout)
    host = cupy.asnumpy(x)
    assert d == (reader if cupy.cuda.runtime.deviceCanAccessPeer(reader, x.device.id) or reader == x.device.id else x.device.id)
    np.testing.assert_array_equal(whole, host)
    for (a, b), got in zip(ranges, parts):
        np.testing.assert_array_equal(got, host[a:b])


@pytest.mark.gpu
def test_shortfall_counts_the_gpus_used_memory():
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    cached = cupy.get_default_memory_pool().free_bytes()
    assert ipc.shortfall(0, 0, 1.0) <= 0 and ipc.shortfall(0, 0, 0.0) > 0
    # 1 MiB past what is free: short by about that (other processes may take or give some meanwhile)
    assert 0 < ipc.shortfall(0, free + cached + (1 << 20), 1.0) <= 2 << 20


@pytest.mark.gpu
def test_blocks_the_pool_holds_free_are_room_and_a_share_takes_them():
    """A worker's CuPy pool keeps the blocks of its last sort: they count as room for a shared
    run (counted as used, a repeated sort's runs left the GPU), and a shared copy that CUDA has no
    room for gives them back to CUDA and is made."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import cupy

    pool, mib = cupy.get_default_memory_pool(), 1 << 20
    # the pool a sort's arrays come from (dsort.engine.pools.own_pool), whatever allocator CuPy has
    # now: importing cudf (another test, in this process) makes RMM's CuPy's
    with cupy.cuda.using_allocator(pool.malloc):
        a = cupy.empty(256 * mib, np.uint8)
        del a  # its block stays in the pool, free
        free, total = cupy.cuda.runtime.memGetInfo()
        cached = pool.free_bytes()
        assert cached >= 256 * mib
        fraction = (total - free - cached + 256 * mib) / total  # room for 256 MiB more, the cached blocks not counted
        assert ipc.shortfall(0, 255 * mib, fraction) <= 0 < ipc.shortfall(0, 257 * mib, fraction)

        x = cupy.arange(16 * mib, dtype=np.int64)  # 128 MiB
        free = cupy.cuda.runtime.memGetInfo()[0]
        big = cupy.empty(free - 32 * mib, np.uint8)  # CUDA left with 32 MiB, the rest in the pool once freed
        del big
        assert cupy.cuda.runtime.memGetInfo()[0] < x.nbytes <= pool.free_bytes()
        got = ipc.share(x)
        assert got is not None
        own, handle = got
        assert handle.shape == x.shape and bool((own == x).all())
        del own, got
        pool.free_all_blocks()


@pytest.fixture
def fake_ipc(monkeypatch):
    """CUDA IPC stood in for by a table of open mappings (the counting of opens can be tested on
    any machine): ``{handle: times opened and not closed}``; handle ``b"gone"`` cannot be opened."""
    import sys
    import types

    mapped = {}

    class Refused(Exception):
        pass

    def open_handle(handle):
        if handle == b"gone":  # CuPy's words for a handle whose process has ended
            raise Refused("cudaErrorInvalidResourceHandle: invalid resource handle")
        if handle == b"full":
            raise Refused("cudaErrorMemoryAllocation: out of memory")
        assert handle not in mapped, "a mapping opened twice in one process"
        mapped[handle] = 1
        return 4096 * (len(mapped) + 1)

    def close_handle(ptr):
        handle = next(h for h, p in opened_at.items() if p == ptr)
        del mapped[handle]

    opened_at = {}

    def tracked_open(handle):
        opened_at[handle] = open_handle(handle)
        return opened_at[handle]

    rt = types.SimpleNamespace(
        CUDARuntimeError=Refused, ipcOpenMemHandle=tracked_open, ipcCloseMemHandle=close_handle, deviceCanAccessPeer=lambda a, b: 1
    )

    class Device(contextlib.nullcontext):
        def __init__(self, d=0):
            super().__init__()
            self.id = d

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=rt, Device=Device)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return mapped


def _shared(handle):
    return ipc.Shared(handle, (4,), "u1", "0000:01:00.0", ipc.host_id(), "another process")


def test_threads_opening_one_shared_array_share_one_mapping(fake_ipc):
    """Opens of one array by several readers of a process map it once; the last close unmaps it;
    an array that cannot be opened (its process gone) fails with SharedGone, another failure as
    it is, and nothing stays mapped."""
    a, b = _shared(b"a"), _shared(b"b")
    p = ipc._open(a, 0)
    assert ipc._open(a, 0) == p and fake_ipc == {b"a": 1}
    assert ipc._open(a, 1) == p and p[1] == 0  # mapped once, where the first reader mapped it
    ipc._close(a.handle)
    ipc._open(b, 0)
    ipc._close(a.handle)
    assert set(fake_ipc) == {b"a", b"b"}
    ipc._close(a.handle)
    ipc._close(b.handle)
    assert fake_ipc == {} and ipc._opened == {}
    with pytest.raises(ipc.SharedGone, match="could not be opened"):
        ipc._open(_shared(b"gone"), 0)
    with pytest.raises(Exception, match="out of memory") as e:  # not a lost array: no run is made again for it
        ipc._open(_shared(b"full"), 0)
    assert not isinstance(e.value, ipc.SharedGone)
    assert fake_ipc == {} and ipc._opened == {}


def test_kept_mappings_stay_open_counted_once_until_closed(fake_ipc):
    """A reader that keeps its mappings (a store of a job) opens each array once however often it
    reads it; other readers of the process share that mapping and their closes leave it open;
    close_kept unmaps what the last of them no longer uses."""
    a, b = _shared(b"a"), _shared(b"b")
    kept = set()
    p = ipc._open(a, 0, kept)
    assert ipc._open(a, 0, kept) == p and ipc._open(b, 0, kept) and kept == {b"a", b"b"}
    assert ipc._opened[b"a"][2] == 1  # counted once for the kept set
    ipc._open(a, 0)  # another reader, not keeping it
    ipc._close(a.handle)
    assert set(fake_ipc) == {b"a", b"b"}  # still mapped: kept
    ipc._open(b, 0)  # another reader still reading b when the keeper closes
    ipc.close_kept(kept)
    assert kept == set() and set(fake_ipc) == {b"b"}
    ipc._close(b.handle)
    assert fake_ipc == {} and ipc._opened == {}
