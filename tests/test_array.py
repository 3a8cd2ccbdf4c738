"""dsort.sort / argsort / sort_by_key on dask arrays against the reference stable order.

Most tests use the synchronous scheduler; some run on a distributed LocalCluster (threads, and
one with worker processes). GPU tests (``-m gpu``) run the same checks on CuPy chunks, on a
``dask_cuda.LocalCUDACluster`` over the visible GPUs.
"""

import os

import dask
import dask.array as da
import numpy as np
import pytest
from dask.utils import key_split

import dsort

from . import reference as R
from .conftest import HAS_GPU

STRATEGIES = ["multiway", "tree", "external"]


def chunking(n, p, rng):
    """``p`` chunk sizes summing to ``n``, with empty and one-element chunks mixed in."""
    cuts = np.sort(rng.integers(0, n + 1, p - 1))
    sizes = np.diff(np.concatenate([[0], cuts, [n]]))
    if p >= 4 and n >= 2:
        i, j = rng.choice(p, 2, replace=False)
        sizes[i] += sizes[j]
        sizes[j] = 0  # an empty chunk
        k = int(np.argmax(sizes))
        if sizes[k] > 1:
            sizes[k] -= 1
            sizes[j] += 1  # ... turned into a one-element chunk
    return tuple(int(s) for s in sizes)


def to_dask(x, sizes):
    return da.from_array(x, chunks=(sizes,) + x.shape[1:])


def check_sorted(x, got, descending=False, na_position="last"):
    order = R.argsort(x, descending, na_position)
    expected = x[order]
    if x.dtype.kind == "f":
        assert np.array_equal(got, expected, equal_nan=True)
    else:
        assert np.array_equal(got, expected)
    return order


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", R.CASES)
@pytest.mark.parametrize("dtype", R.DTYPES)
def test_every_dtype_and_case(dtype, case, strategy, rng):
    n = int(rng.integers(0, 300))
    p = int(rng.integers(1, 12))
    descending = bool(rng.integers(0, 2))
    na_position = "first" if rng.random() < 0.3 else "last"
    x = R.make_keys(dtype, case, n, rng)
    dx = to_dask(x, chunking(n, p, rng))
    s = dsort.sort(dx, descending=descending, na_position=na_position, strategy=strategy)
    a = dsort.argsort(dx, descending=descending, na_position=na_position, strategy=strategy)
    assert s.chunks == dx.chunks and a.chunks == (dx.chunks[0],)
    assert s.dtype == x.dtype and a.dtype == np.int64
    got_s, got_a = dask.compute(s, a, scheduler="sync")
    assert type(got_s) is np.ndarray and got_s.dtype == x.dtype
    order = check_sorted(x, got_s, descending, na_position)
    assert np.array_equal(got_a, order)


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("p", [1, 2, 3, 7, 16, 33, 64])
def test_many_chunks(p, strategy, rng):
    n = int(rng.integers(p, 40 * p))
    x = rng.integers(0, 20, n).astype(np.int32)
    dx = to_dask(x, chunking(n, p, rng))
    got = dsort.argsort(dx, strategy=strategy).compute(scheduler="sync")
    assert np.array_equal(got, np.argsort(x, kind="stable"))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_skewed_chunks(strategy, rng):
    """One chunk holds every small key, another is huge and all equal, some are empty."""
    x = np.concatenate([np.full(500, 7.0), np.arange(300.0)[::-1], [], np.full(50, np.nan), rng.random(20) + 6.5])
    sizes = (500, 0, 300, 1, 49, 0, 20)
    for descending in (False, True):
        got = dsort.argsort(to_dask(x, sizes), descending=descending, strategy=strategy).compute(scheduler="sync")
        assert np.array_equal(got, R.argsort(x, descending))


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_sort_by_key_records(strategy, rng):
    """The file front end's spelling: 10-byte keys as (n, 10) uint8 rows, 90-byte payloads."""
    n = 700
    keys = R.make_keys("rows10", "dups", n, rng)
    values = rng.integers(0, 256, (n, 90), dtype=np.uint8)
    sizes = chunking(n, 9, rng)
    # Values chunked differently from the keys (and along axis 1): rechunked to the keys' chunks.
    dk, dv = to_dask(keys, sizes), da.from_array(values, chunks=(128, 45))
    sk, sv = dsort.sort_by_key(dk, dv, strategy=strategy)
    assert sk.chunks == dk.chunks and sv.chunks == (sizes, (90,))
    got_k, got_v = dask.compute(sk, sv, scheduler="sync")
    order = R.argsort(keys)
    assert np.array_equal(got_k, keys[order]) and np.array_equal(got_v, values[order])


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("descending,na_position", [(False, "last"), (True, "last"), (False, "first"), (True, "first")])
def test_sort_by_key_wide_values_nan_keys(strategy, descending, na_position, rng):
    """Rows of values wider than 8 bytes ride through the merges as positions and are gathered
    once: float keys with NaN, -0.0 and heavy ties, many runs, every order."""
    n = 900
    keys = R.make_keys("float64", "special", n, rng)
    values = rng.random((n, 3))
    sizes = chunking(n, 13, rng)
    sk, sv = dsort.sort_by_key(
        to_dask(keys, sizes), to_dask(values, sizes), descending=descending, na_position=na_position, strategy=strategy
    )
    got_k, got_v = dask.compute(sk, sv, scheduler="sync")
    order = check_sorted(keys, got_k, descending, na_position)
    assert np.array_equal(got_v, values[order])


def test_sort_by_key_1d_values_descending(rng):
    keys = rng.integers(0, 5, 400).astype(np.uint16)
    values = rng.random(400)
    sizes = chunking(400, 6, rng)
    sk, sv = dsort.sort_by_key(to_dask(keys, sizes), to_dask(values, sizes), descending=True)
    got_k, got_v = dask.compute(sk, sv, scheduler="sync")
    order = np.argsort(~keys, kind="stable")  # descending and stable: ties keep input order
    assert np.array_equal(got_k, keys[order]) and np.array_equal(got_v, values[order])


def test_unknown_chunk_sizes(rng):
    x = rng.integers(0, 100, 500)
    dx = to_dask(x, (100, 150, 250))
    filtered = dx[dx > 30]
    assert np.isnan(filtered.chunks[0][0])
    s = dsort.sort(filtered)
    assert not any(np.isnan(c) for c in s.chunks[0])
    assert np.array_equal(s.compute(scheduler="sync"), np.sort(x[x > 30]))


def test_building_the_graph_computes_nothing(rng):
    calls = []

    def spy(block):
        calls.append(len(block))
        return block

    dx = to_dask(rng.random(100), (30, 30, 40)).map_blocks(spy, dtype=float, meta=np.empty(0))
    for strategy in STRATEGIES:
        dsort.sort(dx, strategy=strategy)
        dsort.argsort(dx, strategy=strategy)
        dsort.sort_by_key(dx, dx, strategy=strategy)
    assert calls == []


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_task_names_by_phase(strategy):
    dx = to_dask(np.arange(100)[::-1].copy(), (25, 25, 25, 25))
    s = dsort.sort(dx, strategy=strategy)
    phases = {key_split(k) for k in dict(s.__dask_graph__())}
    if strategy == "external":
        expected = ("dsort-run", "dsort-cuts", "dsort-merge")
    else:
        expected = ("dsort-sort", "dsort-sample", "dsort-bounds", "dsort-window", "dsort-splitters", "dsort-slice", "dsort-merge")
    for phase in expected:
        assert phase in phases
    assert s.name.startswith("dsort-sorted-keys-")


def test_same_input_same_graph():
    dx = to_dask(np.arange(10), (5, 5))
    assert dsort.sort(dx).name == dsort.sort(dx).name
    assert dsort.sort(dx).name != dsort.sort(dx, descending=True).name


def test_bad_input():
    dx = to_dask(np.arange(10), (5, 5))
    with pytest.raises(TypeError, match="dask arrays"):
        dsort.sort(np.arange(3))
    with pytest.raises(TypeError, match="unsupported"):
        dsort.sort(da.ones(4, dtype=complex))
    with pytest.raises(ValueError, match="1-D"):
        dsort.sort(da.ones((4, 2)))
    with pytest.raises(ValueError, match="1-D"):
        dsort.sort(da.ones((4, 2, 2), dtype=np.uint8))
    with pytest.raises(ValueError, match="one row per key"):
        dsort.sort_by_key(dx, da.ones(11))
    with pytest.raises(TypeError, match="dask array"):
        dsort.sort_by_key(dx, np.ones(10))
    with pytest.raises(ValueError, match="na_position"):
        dsort.sort(dx, na_position="middle")
    with pytest.raises(ValueError, match="strategy"):
        dsort.argsort(dx, strategy="bogus")
    for device in ("cpu", "GPU", "cuda"):
        with pytest.raises(ValueError, match="device"):
            dsort.sort(dx, device=device)


@pytest.mark.skipif(HAS_GPU, reason="checks the error where the workers have no GPU")
def test_device_gpu_without_a_gpu():
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed: the error would be CUDA's own")
    dx = to_dask(np.arange(10)[::-1].copy(), (5, 5))
    s = dsort.sort(dx, device="gpu")  # building the graph needs no GPU
    with pytest.raises(RuntimeError, match="device='gpu' needs CuPy"):
        s.compute(scheduler="sync")


# ---- distributed -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["int64", "float64", "rows10"])
def test_local_cluster(client, dtype, strategy, rng):
    n = 3000
    x = R.make_keys(dtype, "random" if dtype != "int64" else "dups", n, rng)
    dx = to_dask(x, chunking(n, 13, rng))
    s, a = dsort.sort(dx, strategy=strategy), dsort.argsort(dx, descending=True, strategy=strategy)
    got_s, got_a = client.compute([s, a], sync=True)
    check_sorted(x, got_s)
    assert np.array_equal(got_a, R.argsort(x, descending=True))


def test_worker_processes(rng):
    distributed = pytest.importorskip("distributed")
    keys = R.make_keys("rows10", "random", 2000, rng)
    values = rng.integers(0, 256, (2000, 90), dtype=np.uint8)
    sizes = chunking(2000, 8, rng)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        with distributed.Client(cluster) as c:
            for strategy in STRATEGIES:
                sk, sv = dsort.sort_by_key(to_dask(keys, sizes), to_dask(values, sizes), strategy=strategy)
                got_k, got_v = c.compute([sk, sv], sync=True)
                order = R.argsort(keys)
                assert np.array_equal(got_k, keys[order]) and np.array_equal(got_v, values[order])


# ---- GPU: CuPy chunks ------------------------------------------------------------------------


def gpu_test(test):
    return pytest.mark.gpu(pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")(test))


def _to_cupy(dx):
    import cupy

    return dx.map_blocks(cupy.asarray, dtype=dx.dtype, meta=cupy.empty((0,) * dx.ndim, dx.dtype))


@pytest.fixture(scope="module")
def cuda_client():
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    from dsort.cluster import ucx_options

    # DSORT_TEST_PROTOCOL=ucx runs these over UCX (GPU to GPU), as scripts/gpu-run ucx does
    extra = ucx_options(os.environ.get("DSORT_TEST_PROTOCOL"), "4GB")
    with dask_cuda.LocalCUDACluster(dashboard_address=":0", **extra) as cluster:
        with distributed.Client(cluster) as c:
            yield c


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["int64", "float64", "uint8", "rows10"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("where", ["sync", "cluster"])
@gpu_test
def test_gpu_cupy_chunks(where, descending, dtype, strategy, rng, request):
    import cupy

    client = request.getfixturevalue("cuda_client") if where == "cluster" else None
    n = 20000
    x = R.make_keys(dtype, "dups" if dtype == "uint8" else "random", n, rng)
    dx = _to_cupy(to_dask(x, chunking(n, 11, rng)))
    s = dsort.sort(dx, descending=descending, strategy=strategy)
    a = dsort.argsort(dx, descending=descending, na_position="first", strategy=strategy)
    assert isinstance(s._meta, cupy.ndarray) and s.chunks == dx.chunks
    got_s, got_a = client.compute([s, a], sync=True) if client else dask.compute(s, a, scheduler="sync")
    assert isinstance(got_s, cupy.ndarray)
    check_sorted(x, cupy.asnumpy(got_s), descending)
    assert np.array_equal(cupy.asnumpy(got_a), R.argsort(x, descending, "first"))


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("dtype", ["int64", "float64", "rows10"])
@pytest.mark.parametrize("where", ["sync", "cluster"])
@gpu_test
def test_gpu_host_chunks(where, dtype, strategy, rng, request):
    """device="gpu": NumPy chunks sorted on the GPUs come back as NumPy chunks. Chunk sizes straddle
    the engine's page-locked copy threshold (just under and over it), with an empty and a small one."""
    from dsort.engine import device as dv

    client = request.getfixturevalue("cuda_client") if where == "cluster" else None
    row = 10 if dtype == "rows10" else np.dtype(dtype).itemsize
    per = dv.PINNED_MIN_BYTES // row
    sizes = (per - 1, 0, per + 1, 3)
    n = sum(sizes)
    x = R.make_keys(dtype, "random", n, rng)
    dx = to_dask(x, sizes)
    descending = bool(rng.integers(0, 2))
    values = rng.integers(0, 256, (n, 24), dtype=np.uint8)
    s = dsort.sort(dx, descending=descending, strategy=strategy, device="gpu")
    a = dsort.argsort(dx, descending=descending, strategy=strategy, device="gpu")
    sk, sv = dsort.sort_by_key(dx, to_dask(values, sizes), descending=descending, strategy=strategy, device="gpu")
    assert isinstance(s._meta, np.ndarray) and s.chunks == dx.chunks
    outs = [s, a, sk, sv]
    got = client.compute(outs, sync=True) if client else dask.compute(*outs, scheduler="sync")
    assert all(type(g) is np.ndarray for g in got)
    order = check_sorted(x, got[0], descending)
    assert np.array_equal(got[1], order)
    assert x[order].tobytes() == got[2].tobytes() and np.array_equal(got[3], values[order])
    blocks = list(s.to_delayed().ravel())
    parts = client.compute(blocks, sync=True) if client else dask.compute(*blocks, scheduler="sync")
    assert [len(p) for p in parts] == list(sizes) and all(type(p) is np.ndarray and p.flags.writeable for p in parts)


@pytest.mark.parametrize("strategy", STRATEGIES)
@gpu_test
def test_gpu_sort_by_key_records(strategy, rng, cuda_client):
    import cupy

    n = 50000
    keys = R.make_keys("rows10", "dups", n, rng)
    values = rng.integers(0, 256, (n, 90), dtype=np.uint8)
    sizes = chunking(n, 16, rng)
    sk, sv = dsort.sort_by_key(_to_cupy(to_dask(keys, sizes)), _to_cupy(to_dask(values, sizes)), strategy=strategy)
    got_k, got_v = cuda_client.compute([sk, sv], sync=True)
    order = np.argsort(keys.view("S10").ravel(), kind="stable")  # NumPy orders S10 as memcmp
    assert np.array_equal(cupy.asnumpy(got_k), keys[order]) and np.array_equal(cupy.asnumpy(got_v), values[order])


@pytest.mark.parametrize("workers, device, expected", [(2, "gpu", "external"), (1, "gpu", "auto"), (2, None, "auto")])
def test_auto_takes_the_external_sort_for_gpus_of_several_workers_of_one_host(workers, device, expected):
    """Keys sorted on the GPUs of several worker processes of one host: the runs stay on their
    GPUs and the merges read them through CUDA IPC (the in-memory graph would move them through
    host memory and TCP); one worker, or CPU keys, keep the in-memory graph's own choice."""
    distributed = pytest.importorskip("distributed")
    from dsort.collections.array import _options

    x = da.arange(1000, chunks=100)
    with (
        distributed.LocalCluster(n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        assert _options(x, None, "last", "auto", device, None, "auto")["strategy"] == expected
    with dask.config.set(scheduler="threads"):  # dask's local scheduler: this process
        assert _options(x, None, "last", "auto", device, None, "auto")["strategy"] == "auto"
