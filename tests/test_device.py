"""dsort.engine.device on a machine without CuPy's GPU: the array module of NumPy arrays, no GPUs,
host copies that own their memory (the GPU paths run in tests/test_gpu_kernels.py on a device)."""

import contextlib

import numpy as np
import pytest

from dsort.engine import device


def test_numpy_arrays_are_host_arrays():
    x = np.arange(6).reshape(2, 3)
    assert device.xp_of(x) is np and device.xp_of([1, 2]) is np and not device.is_device_array(x)


def test_gpu_count_matches_cupy():
    try:
        import cupy

        expected = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        expected = 0
    assert device.gpu_count() == expected and device.has_gpu() == (expected > 0)


@pytest.mark.parametrize("shape", [(0,), (5,), (3, 4)])
def test_to_host_of_a_host_array_is_a_copy(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    y = device.to_host(x)
    np.testing.assert_array_equal(y, x)
    assert not np.shares_memory(x, y)


def test_staging_pools_are_one_per_device():
    assert device.staging(0) is device.staging(0) and device.staging(0) is not device.staging(1)


@pytest.fixture
def fake_locks(monkeypatch):
    """CUDA's page-locking stood in for by a table of locked byte ranges (the registry's rules can
    be tested on any machine): ``{first byte: end byte}``."""
    import sys
    import types

    locked = {}

    class Refused(Exception):
        pass

    def register(ptr, nbytes, flags):
        if any(lo < ptr + nbytes and ptr < hi for lo, hi in locked.items()):
            raise Refused("already locked")  # as CUDA refuses pages locked twice
        locked[ptr] = ptr + nbytes

    rt = types.SimpleNamespace(CUDARuntimeError=Refused, getLastError=lambda: None, hostRegister=register, hostUnregister=locked.pop)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=rt)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return locked


def _locked_bytes_of(locked, a, span):
    """Bytes of ``a`` outside its own locked ``span`` that lie in some lock: CUDA copies them as
    pageable memory, so they must lie in none (a copy whose lock is refused goes through the
    staging buffers instead, read by the CPU)."""
    ptr = a.ctypes.data
    parts = [(ptr, ptr + span[0]), (ptr + span[1], ptr + a.nbytes)]
    return sum(max(0, min(end, hi) - max(start, lo)) for start, end in parts for lo, hi in locked.items())


def test_page_locks_never_cover_another_copys_pageable_bytes(fake_locks):
    """Views of one buffer copied at once (threads): the partial pages each locked copy reads as
    pageable memory lie in no lock while both run; views that meet nobody's locked pages are both
    locked (the same view: one lock, shared)."""
    page = device._OS_PAGE
    buf = np.zeros(64 * page + 8 * page, np.uint8)
    base = -(-buf.ctypes.data // page) * page - buf.ctypes.data  # buf[base:] starts on a page
    edge = base + 40 * page
    views = {
        "overlapping": (buf[base : edge + 100], buf[edge - 50 : edge - 50 + 20 * page]),
        "adjacent": (buf[base : edge + 100], buf[edge + 100 : edge + 100 + 20 * page]),
        "same": (buf[base + 7 : edge + 9], buf[base + 7 : edge + 9]),
        "covering": (buf[edge - 50 : edge - 50 + 20 * page], buf[base : edge + 3 * page]),
    }
    for case, (a, b) in views.items():
        with device._pinned(a, read_only=True) as span_a, device._pinned(b, read_only=True) as span_b:
            assert span_a is not None, case
            for x, span in ((a, span_a), (b, span_b)):
                assert span is None or _locked_bytes_of(fake_locks, x, span) == 0, case
            if case in ("adjacent", "same"):  # nothing to refuse: both are locked (the same lock, shared)
                assert span_b is not None, case
        assert fake_locks == {}, case  # every lock released by its last user


def test_opening_no_shared_arrays_needs_no_gpu():
    with device.opened([]) as got:
        assert got == []


def test_a_shared_array_of_another_machine_is_not_visible_here():
    """PCI bus ids repeat from machine to machine: a handle of another machine's GPU is never
    opened here, whatever its bus id."""
    other = device.Shared(b"", (1,), "u1", "0000:00:00.0", "elsewhere/" + device.host_id(), "p")
    assert device.local_device(other) is None and device.host_id() == device.host_id()


_CHILD = """
import pickle, sys
import numpy as np
from dsort.engine import device
shared, ranges = pickle.loads(sys.stdin.buffer.read())
with device.opened([shared]) as [(x, d)]:
    whole = device.to_host(x)
    parts = device.slices_to_host(x, d, ranges)
sys.stdout.buffer.write(pickle.dumps((d, whole, parts)))
"""


@pytest.mark.gpu
def test_a_shared_device_array_is_read_by_another_process(rng):
    """A device array shared by this process is opened by another (CUDA IPC), on the same GPU by
    its PCI bus id, and read whole and in slices; the owner's copy is its own allocation."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import pickle
    import subprocess
    import sys

    import cupy

    n = int(rng.integers(1, 5000))
    x = cupy.asarray(rng.integers(0, 256, (n, 7), dtype=np.uint8))
    own, shared = device.share(x)
    assert shared.owner == device.PROCESS and shared.shape == (n, 7) and device.local_device(shared) == x.device.id
    assert own.data.ptr != x.data.ptr and bool((own == x).all())
    cuts = np.sort(rng.integers(0, n + 1, 6))
    ranges = [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:])]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD], input=pickle.dumps((shared, ranges)), capture_output=True, timeout=120, check=True
    )
    d, whole, parts = pickle.loads(child.stdout)
    host = cupy.asnumpy(x)
    assert d == x.device.id
    np.testing.assert_array_equal(whole, host)
    for (a, b), got in zip(ranges, parts):
        np.testing.assert_array_equal(got, host[a:b])


@pytest.mark.gpu
def test_room_counts_the_gpus_used_memory():
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import cupy

    free, total = cupy.cuda.runtime.memGetInfo()
    assert device.room(0, 0, 1.0) and not device.room(0, free + 1, 1.0) and not device.room(0, 0, 0.0)


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
        if handle == b"gone":
            raise Refused("invalid resource handle")
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

    rt = types.SimpleNamespace(CUDARuntimeError=Refused, ipcOpenMemHandle=tracked_open, ipcCloseMemHandle=close_handle)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=rt, Device=lambda d: contextlib.nullcontext())
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    return mapped


def _shared(handle):
    return device.Shared(handle, (4,), "u1", "0000:01:00.0", device.host_id(), "another process")


def test_threads_opening_one_shared_array_share_one_mapping(fake_ipc):
    """Opens of one array by several readers of a process map it once; the last close unmaps it;
    an array that cannot be opened fails with SharedGone, and nothing stays mapped."""
    a, b = _shared(b"a"), _shared(b"b")
    p = device._open(a, 0)
    assert device._open(a, 0) == p and fake_ipc == {b"a": 1}
    device._open(b, 0)
    device._close(a.handle)
    assert set(fake_ipc) == {b"a", b"b"}
    device._close(a.handle)
    device._close(b.handle)
    assert fake_ipc == {} and device._opened == {}
    with pytest.raises(device.SharedGone, match="could not be opened"):
        device._open(_shared(b"gone"), 0)
    assert fake_ipc == {} and device._opened == {}
