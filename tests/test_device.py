"""dsort.engine.device on a machine without CuPy's GPU: the array module of NumPy arrays, no GPUs,
host copies that own their memory (the GPU paths run in tests/test_gpu_kernels.py on a device)."""

import time

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

    rt = types.SimpleNamespace(CUDARuntimeError=Refused, hostRegister=register, hostUnregister=locked.pop)
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


class _CUDARuntimeError(RuntimeError):
    def __init__(self, status, name):
        super().__init__(f"{name}: ...")
        self.status = status


def _fake_peer_runtime(monkeypatch, enabled_before=(), too_many=()):
    """A CuPy whose runtime enables peer access as CUDA does: per (current device, peer), once; a
    second enable fails with cudaErrorPeerAccessAlreadyEnabled (704), a refused one with
    cudaErrorTooManyPeers (711). Every enable call is counted, and a barrier makes the threads
    of a test enter together."""
    import sys
    import threading
    import types

    current = threading.local()
    enabled = set(enabled_before)
    calls = []

    class Device:
        def __init__(self, d):
            self.d = d

        def __enter__(self):
            self.was = getattr(current, "d", 0)
            current.d = self.d

        def __exit__(self, *exc):
            current.d = self.was

    def enable(peer):
        pair = (getattr(current, "d", 0), peer)
        calls.append(pair)
        time.sleep(0.01)  # widen the race
        if pair in too_many:
            raise _CUDARuntimeError(711, "cudaErrorTooManyPeers")
        if pair in enabled:
            raise _CUDARuntimeError(704, "cudaErrorPeerAccessAlreadyEnabled")
        enabled.add(pair)

    rt = types.SimpleNamespace(CUDARuntimeError=_CUDARuntimeError, deviceCanAccessPeer=lambda d, p: 1, deviceEnablePeerAccess=enable)
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=rt, Device=Device)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(device, "_peers", {})
    return calls


def test_peer_access_is_enabled_once_per_pair_from_many_threads(monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    calls = _fake_peer_runtime(monkeypatch)
    pairs = [(d, s) for d in range(4) for s in range(4)] * 8
    with ThreadPoolExecutor(16) as pool:
        got = list(pool.map(lambda p: device.peer_access(*p), pairs))
    assert all(got)
    assert sorted(calls) == sorted({(d, s) for d, s in pairs if d != s})  # once each, none for a GPU and itself


def test_peer_access_enabled_by_another_library_is_a_yes_and_too_many_peers_a_no(monkeypatch):
    calls = _fake_peer_runtime(monkeypatch, enabled_before={(0, 1)}, too_many={(0, 2)})
    assert device.peer_access(0, 1) and device.peer_access(0, 1)
    assert not device.peer_access(0, 2) and not device.peer_access(0, 2)
    assert calls == [(0, 1), (0, 2)]


@pytest.mark.parametrize("sizes", [[0], [5, 0, 7], [1, 1, 1], [1000, 3, 0, 4093, 1], [0, 0]])
@pytest.mark.parametrize("piece", [1, 8, 4096, 1 << 20])
def test_joined_fill_writes_the_arrays_bytes_one_after_the_other(sizes, piece):
    rng = np.random.default_rng(sum(sizes) + piece)
    arrays = [rng.integers(-(2**40), 2**40, n) for n in sizes]
    nbytes, fill = device.joined_fill(arrays)
    want = np.concatenate(arrays).view(np.uint8)
    assert nbytes == want.size
    got = np.full(nbytes, 0xAB, np.uint8)
    for off in range(0, nbytes, piece):  # as upload fills its staging pieces
        buf = np.full(min(piece, nbytes - off), 0xCD, np.uint8)
        fill(buf, off)
        got[off : off + len(buf)] = buf
    np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
@pytest.mark.skipif(not device.has_gpu(), reason="no CUDA device")
@pytest.mark.parametrize("sizes", [[3], [5, 0, 7], [1_300_001, 0, 700_003, 2_500_000], [17] * 600])
def test_host_arrays_joined_on_the_gpu_are_their_concatenation(sizes):
    rng = np.random.default_rng(len(sizes))
    arrays = [rng.integers(-(2**62), 2**62, n) for n in sizes]
    got = device.from_host_joined(arrays)
    assert device.is_device_array(got) and got.dtype == np.int64
    np.testing.assert_array_equal(got.get(), np.concatenate(arrays))
    with pytest.raises(TypeError, match="one dtype"):
        device.from_host_joined([arrays[0], arrays[0].astype(np.int32)])
