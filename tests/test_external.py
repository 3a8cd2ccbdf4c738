"""``strategy="external"`` for dask arrays: runs outside dask's memory, bounded memory, nothing left.

The order itself is checked against the reference for every dtype, case and chunking by
``tests/test_array.py`` (it runs each test for every strategy); here are the external sort's own
promises.
"""

import os
import subprocess
import sys
import tracemalloc

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest

import dsort
from dsort.collections import fixed_frames, frame_runs, remote, stores
from dsort.core import run_lifetime as L
from dsort.core import runs as R


def _graph_keys(result, prefix):
    return [k for k in dict(result.__dask_graph__()) if isinstance(k, tuple) and str(k[0]).startswith(prefix)]


def test_runs_on_disk_are_removed_when_the_sort_is_done(tmp_path, rng):
    a = rng.integers(-1000, 1000, 20_000)
    x = da.from_array(a, chunks=3_000)
    s = dsort.sort(x, strategy="external", memory_limit=0, local_directory=tmp_path)
    runs = dask.get(dict(s.__dask_graph__()), sorted(_graph_keys(s, "dsort-run-")))
    assert {r.tier for r in runs} == {"disk"} and all(os.path.isfile(r.path) for r in runs)
    R.drop(runs[0].job)  # those runs were only looked at: start afresh
    got = s.compute(scheduler="threads")
    assert np.array_equal(got, np.sort(a, kind="stable"))
    assert os.listdir(tmp_path) == []


def test_runs_in_memory_within_the_budget(tmp_path, rng):
    a = rng.random(20_000)
    x = da.from_array(a, chunks=5_000)
    budget = 2 * 5_000 * 8  # two runs' worth: the other two go to disk
    s = dsort.sort(x, strategy="external", memory_limit=budget, local_directory=tmp_path)
    runs = dask.get(dict(s.__dask_graph__()), sorted(_graph_keys(s, "dsort-run-")))
    assert sorted(r.tier for r in runs) == ["disk", "disk", "host", "host"]
    R.drop(runs[0].job)
    assert np.array_equal(s.compute(scheduler="sync"), np.sort(a))
    assert os.listdir(tmp_path) == []


def test_stores_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f"dsort-runs-{dead.pid}-0123456789abcdef"
    live = tmp_path / f"dsort-runs-{os.getppid()}-0123456789abcdef"
    other = tmp_path / "dsort-runs-notapid-x"
    for d in (left, live, other):
        d.mkdir()
        (d / "run-000000.bin").write_bytes(b"x" * 10)
    dsort.sort(da.arange(10, chunks=5), strategy="external", local_directory=tmp_path)
    assert not left.exists() and live.exists() and other.exists()


def _peak_of_store(n, chunk, tmp_path):
    """Peak traced memory of ``da.store`` of the external sort of ``n`` random int64 (never
    held whole anywhere: generated per chunk, written to a memory-mapped .npy)."""
    x = da.random.default_rng(1).integers(0, 1 << 62, n, chunks=chunk)
    out = np.lib.format.open_memmap(tmp_path / f"out-{n}.npy", mode="w+", dtype=np.int64, shape=(n,))
    tracemalloc.start()
    try:
        with dask.config.set({"scheduler": "threads", "num_workers": 2, "dsort.scale.external-run": chunk * 8}):
            da.store(dsort.sort(x, strategy="external", memory_limit=0, local_directory=tmp_path), out, lock=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(out[1:] >= out[:-1])
    assert np.array_equal(out[:: n // 97], np.sort(x.compute())[:: n // 97])
    return peak


def test_store_of_a_large_sort_runs_in_bounded_memory(tmp_path):
    """Memory follows the run size (``dsort.scale.external-run``, here one chunk's), not the
    array's: three times the data, about the same peak
    (what the threads happen to hold at once varies), well under the data's size (the in-memory
    graph's peak is above it)."""
    chunk = 250_000
    small = _peak_of_store(16 * chunk, chunk, tmp_path)
    large = _peak_of_store(48 * chunk, chunk, tmp_path)
    assert large < 48 * chunk * 8 / 3
    assert large < 2.2 * small
    assert sorted(os.listdir(tmp_path)) == ["out-12000000.npy", "out-4000000.npy"]


def test_auto_chooses_external_when_the_array_does_not_fit(monkeypatch):
    x = da.arange(100_000, chunks=10_000)
    monkeypatch.setattr(stores, "where_it_runs", lambda: (True, 1 << 40))
    assert not _graph_keys(dsort.sort(x), "dsort-run-")
    monkeypatch.setattr(stores, "where_it_runs", lambda: (True, 4 * x.nbytes - 1))
    s = dsort.sort(x, descending=True)
    assert _graph_keys(s, "dsort-run-")
    assert np.array_equal(s.compute(), np.arange(100_000)[::-1])


def test_on_worker_processes_runs_are_files_all_workers_read(tmp_path, rng):
    distributed = pytest.importorskip("distributed")
    a = rng.integers(0, 50, 30_000)  # many ties: the stable order shows
    x = da.from_array(a, chunks=4_000)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster):
            order = dsort.argsort(x, strategy="external", memory_limit="1GB", local_directory=tmp_path)
            assert order.__dask_graph__()  # built on a multi-process cluster: no memory tier
            got = order.compute()
    assert np.array_equal(got, np.argsort(a, kind="stable"))
    assert os.listdir(tmp_path) == []


def test_a_partial_compute_then_the_whole_result(tmp_path, rng):
    """A compute of part of the result (its merges not all run) leaves its runs; a later compute
    of the whole result counts its own merges only (the earlier one's are not taken for its own,
    which removed the runs before its last merge read them), gives NumPy's order and removes
    everything."""
    a = rng.integers(0, 1000, 40_000)
    with dask.config.set(scheduler="sync"):
        s = dsort.sort(da.from_array(a, chunks=5_000), strategy="external", memory_limit=0, local_directory=tmp_path)
        np.testing.assert_array_equal(s[:5].compute(), np.sort(a)[:5])
        assert os.listdir(tmp_path)  # the runs, until the whole result is made (or this process exits)
        np.testing.assert_array_equal(s.compute(), np.sort(a))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("chunks_of", [(8, 2, 2), (3, 3, 3, 3), (5, 1)])
def test_merges_go_beside_anchors_spread_over_the_workers_that_hold_the_runs(monkeypatch, rng, chunks_of):
    """Input chunks lying unevenly over the workers (``chunks_of``: each worker's count): the
    merges of the external array sort go beside anchors (a run's handle again, under a name that
    no task but those merges takes: not the cuts, whose worker would otherwise hold a copy of
    each), spread evenly over the workers, whatever the share of the input each holds."""
    from dsort.collections import scale

    owners = [f"tcp://w{w}" for w, n in enumerate(chunks_of) for _ in range(n)]
    monkeypatch.setattr(scale, "partition_workers", lambda *a, **k: owners)
    a = rng.integers(-1000, 1000, 1000 * len(owners))
    s = dsort.sort(da.from_array(a, chunks=1000), strategy="external", memory_limit=0)
    dsk = dict(s.__dask_graph__())
    merges = {k: t for k, t in dsk.items() if isinstance(k, tuple) and str(k[0]).startswith("dsort-merge-")}
    cuts = next(t for k, t in dsk.items() if str(k).startswith("dsort-cuts-"))
    runs = {k: t for k, t in dsk.items() if isinstance(k, tuple) and str(k[0]).startswith("dsort-run-")}
    assert runs and merges and not any("anchor" in str(d) for d in cuts.dependencies)
    taken = {}
    for k, t in dsk.items():
        for d in getattr(t, "dependencies", ()):
            taken.setdefault(d, set()).add(k)
    per_worker = dict.fromkeys(set(owners), 0)
    for m in merges.values():
        (anchor,) = [d for d in m.dependencies if "anchor" in str(d[0])]
        assert taken[anchor] <= set(merges), "an anchor is taken by merges only"
        (run,) = dsk[anchor].dependencies
        chunk_keys = [d for d in runs[run].dependencies]
        holders = {owners[d[1]] for d in chunk_keys}
        assert len(holders) == 1, "a run's chunks lie on one worker"
        per_worker[holders.pop()] += 1
    assert max(per_worker.values()) - min(per_worker.values()) <= 1, per_worker
    np.testing.assert_array_equal(s.compute(scheduler="sync"), np.sort(a))


def test_bad_memory_limit_is_refused_at_call_time():
    with pytest.raises(ValueError, match="memory_limit"):
        dsort.sort(da.arange(10, chunks=5), strategy="external", memory_limit="banana")


# -- dataframes ---------------------------------------------------------------------------------


def _frame(rng, n):
    df = pd.DataFrame(
        {
            "k": rng.integers(0, 40, n),
            "f": rng.choice([np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf, 2.0], n),
            "s": rng.choice(["", "a", "ab", "b", "é", None, "a\0"], n),
            "n": pd.array(rng.integers(0, 5, n), dtype="Int64"),
            "c": pd.Categorical(rng.choice(["x", "y", "z"], n)),
            "x": np.arange(n),
        },
        index=rng.permutation(n) + 1000,
    )
    df.loc[df.index[::9], "n"] = pd.NA
    return df


def _chain(df, by, ascending, na_position):
    """The reference: pandas' single-column stable sorts, last key first. (pandas' own several-column
    sort disagrees with that chain for a descending column with missing values first; dsort follows
    the chain, as its dataframe sort always has.)"""
    by = [by] if isinstance(by, str) else by
    ascending = [ascending] * len(by) if isinstance(ascending, bool) else ascending
    for c, a in reversed(list(zip(by, ascending))):
        df = df.sort_values(c, ascending=a, na_position=na_position, kind="stable")
    return df


@pytest.mark.parametrize(
    "by,ascending,na_position",
    [
        ("k", True, "last"),
        ("f", False, "last"),
        ("f", True, "first"),
        (["s", "k"], [True, False], "last"),
        (["n", "f"], [False, True], "first"),
        ("x", False, "last"),
    ],
)
@pytest.mark.parametrize("partitions", ["even", "filtered", "one", "tiny"])
def test_external_frame_sort_equals_pandas(by, ascending, na_position, partitions, rng, tmp_path, monkeypatch):
    from dsort.dataframe import sort_values

    monkeypatch.setattr(frame_runs, "BLOCK_ROWS", 17)  # slices across many row blocks
    dd = pytest.importorskip("dask.dataframe")
    df = _frame(rng, 0 if partitions == "tiny" and rng.random() < 0.5 else int(rng.integers(1, 700)))
    ddf = dd.from_pandas(df, npartitions=1 if partitions == "one" else 7, sort=False)
    if partitions == "filtered":
        ddf = ddf[ddf.x % 5 < 2]  # partitions emptied anywhere
    if partitions == "tiny":
        ddf = dd.from_pandas(df.iloc[: min(len(df), 9)], chunksize=1, sort=False)  # one row each
    got = sort_values(ddf, by, ascending=ascending, na_position=na_position, strategy="external", local_directory=tmp_path)
    assert got.npartitions == ddf.npartitions
    frames = dask.compute(*got.to_delayed(), scheduler="threads")
    pd.testing.assert_frame_equal(pd.concat(frames), _chain(ddf.compute(), by, ascending, na_position))
    sizes = [len(f) for f in frames]
    assert max(sizes) - min(sizes) <= 1  # balanced to within one row
    assert os.listdir(tmp_path) == []


def test_external_frame_to_parquet_on_worker_processes(tmp_path, rng):
    """Written with to_parquet from a multi-process cluster: runs are files every worker reads."""
    distributed = pytest.importorskip("distributed")
    dd = pytest.importorskip("dask.dataframe")
    from dsort.dataframe import sort_values

    df = _frame(rng, 3000).drop(columns=["c"])
    ddf = dd.from_pandas(df, npartitions=5, sort=False)
    runs = tmp_path / "runs"
    runs.mkdir()
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster):
            sort_values(ddf, ["s", "k"], strategy="external", local_directory=runs).to_parquet(tmp_path / "out")
    got = pd.read_parquet(tmp_path / "out").rename_axis(None)  # dask writes an unnamed index under a name of its own
    expected = _chain(ddf.compute(), ["s", "k"], True, "last")
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_index_type=False)
    assert os.listdir(runs) == []


def test_external_frame_refuses_unordered_keys_at_call_time(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    from dsort.dataframe import sort_values

    ddf = dd.from_pandas(pd.DataFrame({"a": [1 + 2j, 3j], "b": [1, 2]}), npartitions=1)
    with pytest.raises(TypeError, match="'a'"):
        sort_values(ddf, "a", strategy="external", local_directory=tmp_path)


def test_external_frame_partitions_stay_balanced_under_skew(rng, tmp_path):
    """90% of the rows share one key: the exact cuts still give partitions within one row of each
    other (approximate quantiles, dask's way, cannot split a run of equal keys), in stable order."""
    dd = pytest.importorskip("dask.dataframe")
    from dsort.dataframe import sort_values

    n = 20_000
    k = np.where(rng.random(n) < 0.9, 7, rng.integers(0, 100, n))
    df = pd.DataFrame({"k": k, "row": np.arange(n)})
    ddf = dd.from_pandas(df, npartitions=8, sort=False)
    out = sort_values(ddf, "k", strategy="external", local_directory=tmp_path)
    frames = dask.compute(*out.to_delayed(), scheduler="threads")
    sizes = [len(f) for f in frames]
    assert max(sizes) - min(sizes) <= 1, sizes
    np.testing.assert_array_equal(pd.concat(frames)["row"].to_numpy(), df.sort_values("k", kind="stable")["row"].to_numpy())


def test_fixed_width_frame_tasks_report_their_stages(tmp_path, rng):
    """On distributed workers every run and merge task of a fixed-width frame's external sort
    sends its seconds per stage as an event (where the time went); the result is still pandas'."""
    distributed = pytest.importorskip("distributed")
    dd = pytest.importorskip("dask.dataframe")
    from dsort.dataframe import sort_values

    n, parts, outputs = int(rng.integers(500, 3000)), 4, 3
    df = pd.DataFrame({"k": rng.integers(-50, 50, n), "v": rng.random(n)})
    ddf = dd.from_pandas(df, npartitions=parts, sort=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            got = sort_values(ddf, "k", strategy="external", npartitions=outputs, local_directory=tmp_path).compute()
            events = [e for _, e in client.get_events(remote.STAGES)]
    pd.testing.assert_frame_equal(got, df.sort_values("k", kind="stable"))
    assert sorted(e["task"] for e in events) == ["cuts"] + ["merge"] * outputs + ["run"] * parts
    for e in events:
        stages = {k: v for k, v in e.items() if isinstance(v, float)}  # distributed adds the worker's address
        assert all(v >= 0 for v in stages.values())
        # the merges settle their own cuts from the cuts task's windows (one host's runs)
        wanted = {"run": {"encode", "sort"}, "cuts": {"samples", "windows"}, "merge": {"read runs", "settle cuts", "merge", "decode"}}
        assert wanted[e["task"]] <= set(stages)
    assert remote.report_stages("run", remote.F.Stopwatch()) is None  # outside a worker: nothing, no error


@pytest.mark.gpu
@pytest.mark.parametrize("na_position", ["last", "first"])
def test_rows_made_on_the_gpu_equal_the_hosts(rng, na_position):
    """A fixed-width frame's run rows built on the GPU (its columns copied as they are, keys and
    rows written there) are byte for byte the rows the host builds, for every number-like dtype
    as key and payload, missing values, both directions, a key naming the index; and the GPU's
    decoding gives the frame back."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import cupy

    from dsort.core.filesort import Stopwatch
    from dsort.core.frame_keys import KeySpec
    from dsort.core.frame_rows import RowCodec

    n = int(rng.integers(0, 3000))
    df = pd.DataFrame(
        {
            "i16": rng.integers(-300, 300, n).astype(np.int16),
            "u32": rng.integers(0, 2**32, n).astype(np.uint32),
            "f32": rng.choice([np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf], n).astype(np.float32),
            "f64": rng.choice([np.nan, -0.0, 2.5, -1e300], n),
            "b": rng.random(n) < 0.5,
            "t": pd.to_datetime(rng.integers(-5, 5, n), unit="D"),
            "d": pd.to_timedelta(rng.integers(-5, 5, n), unit="s"),
        },
        index=pd.Index(rng.integers(-9, 9, n), name="ix"),
    )
    df.loc[df.index[: n // 6], "t"] = pd.NaT
    codec = RowCodec.of(df)
    for by in (["t", "f64"], ["ix", "b", "u32"], ["f32", "d", "i16"]):
        ascending = [bool(a) for a in rng.random(len(by)) < 0.5]
        spec = KeySpec.of(df, by, ascending, na_position)
        kb = spec.width((0,) * len(by))
        job = fixed_frames.FixedFrameJob(spec, codec, 1, layout=R.Layout(kb + codec.row_bytes, kb), spacing=256, store=None, gpu=True)
        host = np.empty((n, kb + codec.row_bytes), np.uint8)
        host[:, :kb] = spec.encode(df)[0]
        codec.encode(df, host, kb)
        got = fixed_frames._device_rows(job, [df.iloc[: n // 3], df.iloc[n // 3 :]], Stopwatch())  # two partitions, joined
        np.testing.assert_array_equal(cupy.asnumpy(got), host)
        pd.testing.assert_frame_equal(codec.frame([cupy.asnumpy(x) for x in codec.pick(got, kb)]), df)


def _held_runs():
    """A worker's jobs with runs still held (stores, shared runs watched, shared runs waiting for
    other processes to close their mappings)."""
    return sorted(L._stores) + sorted(L._watched) + [d for d, _ in L._pending]


@pytest.mark.gpu
def test_on_gpu_worker_processes_runs_stay_on_the_gpu_and_are_freed(tmp_path, rng):
    """Worker processes of one machine sorting on its GPU keep their runs there (no run file is
    written; the other processes copy their slices out through CUDA IPC), the results are pandas'
    and NumPy's, and every worker has freed its runs once the sort is done."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import time

    distributed = pytest.importorskip("distributed")
    dd = pytest.importorskip("dask.dataframe")
    from dsort.dataframe import sort_values

    n = int(rng.integers(20_000, 40_000))
    df = pd.DataFrame({"k": rng.integers(-500, 500, n), "v": rng.random(n)})  # many ties: the stable order shows
    a = rng.integers(0, 100, n)
    # the share counts every process's use of the GPU (other test processes too): allow it all here
    with (
        dask.config.set({"dsort.runs.shared-gpu-fraction": 1.0}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster,
    ):
        with distributed.Client(cluster) as client:
            ddf = dd.from_pandas(df, npartitions=6, sort=False).persist()
            got = sort_values(ddf, "k", strategy="external", npartitions=5, local_directory=tmp_path, device="gpu").compute()
            events = [e for _, e in client.get_events(remote.STAGES)]
            order = dsort.argsort(da.from_array(a, chunks=7_000), strategy="external", device="gpu", local_directory=tmp_path).compute()
            deadline = time.monotonic() + 20
            while any(client.run(_held_runs).values()) and time.monotonic() < deadline:
                time.sleep(0.1)
            held = client.run(_held_runs)
    pd.testing.assert_frame_equal(got, df.sort_values("k", kind="stable"))
    np.testing.assert_array_equal(order, np.argsort(a, kind="stable"))
    runs = [e for e in events if e["task"] == "run"]
    # as many runs as the scale rule makes of 6 partitions on 2 workers (each worker's own), each kept on its GPU
    assert 2 <= len(runs) <= 6 and all("keep run" in e and "write run" not in e for e in runs)
    assert not any(held.values()), held
    assert os.listdir(tmp_path) == []


@pytest.mark.gpu
def test_runs_on_two_gpus_are_read_across_them(tmp_path, rng):
    """dask-cuda's workers, one per GPU (each sees every GPU, its own first): each merge copies
    its slices of the runs kept on the other GPU from there (CUDA IPC, then GPU to GPU)."""
    from dsort.engine import device

    if device.gpu_count() < 2:
        pytest.skip("needs two GPUs")
    dask_cuda = pytest.importorskip("dask_cuda")
    distributed = pytest.importorskip("distributed")
    dd = pytest.importorskip("dask.dataframe")
    from dsort.dataframe import sort_values

    n = int(rng.integers(20_000, 40_000))
    df = pd.DataFrame({"k": rng.integers(-500, 500, n), "v": rng.random(n)})
    # the share of a GPU runs may take counts every process's memory: the GPU tests' other
    # processes on the same GPUs must not push these runs to files
    with (
        dask_cuda.LocalCUDACluster(n_workers=2, threads_per_worker=2, dashboard_address=None) as cluster,
        dask.config.set({"dsort.runs.shared-gpu-fraction": 0.98}),
    ):
        with distributed.Client(cluster) as client:
            ddf = dd.from_pandas(df, npartitions=8, sort=False).persist()
            got = sort_values(ddf, "k", strategy="external", local_directory=tmp_path, device="gpu").compute()
            events = [e for _, e in client.get_events(remote.STAGES)]
    pd.testing.assert_frame_equal(got, df.sort_values("k", kind="stable"))
    runs = [e for e in events if e["task"] == "run"]
    assert len({e["worker"] for e in runs}) == 2, runs
    assert all("keep run" in e for e in runs), runs  # kept on both GPUs


def test_gpu_runs_stay_on_the_gpus_within_the_configured_share(tmp_path):
    """A GPU sort's store keeps runs on the GPUs up to ``dsort.runs.shared-gpu-fraction`` of
    their memory (one machine here); a CPU sort's, or with the fraction at 0, never."""
    on_gpu = stores.store_config("a" * 32, 8, tmp_path, 0, gpu=True)
    assert on_gpu.shared_fraction == dask.config.get("dsort.runs.shared-gpu-fraction") > 0
    assert stores.store_config("b" * 32, 8, tmp_path, 0).shared_fraction == 0
    with dask.config.set({"dsort.runs.shared-gpu-fraction": 0}):
        assert stores.store_config("c" * 32, 8, tmp_path, 0, gpu=True).shared_fraction == 0


@pytest.mark.gpu
def test_shared_runs_stay_within_the_device_memory_limit(tmp_path):
    """``device_memory_limit`` caps the bytes of a store's runs kept on its GPU: runs beyond it
    go to files (no host budget here), and a freed run's bytes make room again."""
    cupy = pytest.importorskip("cupy")
    from dsort.engine import device

    if not device.gpu_count():
        pytest.skip("no GPU")
    with dask.config.set({"dsort.runs.shared-gpu-fraction": 0.98}):
        cfg = stores.store_config("e" * 32, 8, tmp_path, 0, gpu=True, gpu_budget=3 * 8_000)
    store = R.RunStore(cfg)
    try:
        blocks = [cupy.random.randint(0, 256, (1_000, 8), dtype=cupy.uint8) for _ in range(6)]
        runs = [store.put(i, b) for i, b in enumerate(blocks[:5])]
        assert [r.tier for r in runs] == ["shared"] * 3 + ["disk"] * 2
        store.free([1])
        assert store.put(5, blocks[5]).tier == "shared"
        for r, b in zip(runs[:1] + runs[2:], blocks[:1] + blocks[2:5]):
            np.testing.assert_array_equal(store.read(r, 0, 1_000), cupy.asnumpy(b))
    finally:
        store.close()


def test_a_bad_device_memory_limit_is_refused_before_any_work(tmp_path):
    dd = pytest.importorskip("dask.dataframe")
    from dsort.core.errors import LimitError
    from dsort.dataframe import sort_values

    df = dd.from_pandas(pd.DataFrame({"k": np.arange(10)}), npartitions=2)
    for bad in ("banana", "-1GB", 0, "0"):
        with pytest.raises(LimitError, match="device_memory_limit"):
            sort_values(df, "k", strategy="external", local_directory=tmp_path, device_memory_limit=bad)
    assert not list(tmp_path.iterdir())


def test_device_memory_limit_is_a_size_or_a_share_of_each_gpu(monkeypatch, tmp_path):
    """As dask-cuda's limit (and the command line's): a size in bytes, or a share 0 < x <= 1 of
    the GPU, resolved where the runs are kept (the worker's GPU): 1 is the whole of it."""
    from dsort.collections.config import size_or_share
    from dsort.engine import ipc

    assert [size_or_share(v) for v in (0.25, "0.5", 1, "1.0")] == [0.25, 0.5, 1.0, 1.0]
    assert [size_or_share(v) for v in ("8GB", 4096, "2MiB", None, "auto")] == [8 * 10**9, 4096, 2 << 20, None, None]
    monkeypatch.setattr(ipc, "total_memory", lambda gpu: 1000)
    for cap, fits in ((0.25, [True, True, False]), (250, [True, True, False]), (None, [True, True, True])):
        store = R.RunStore(R.StoreConfig("f" * 32, str(tmp_path), 8, shared_fraction=0.9, shared_budget=cap))
        assert [store.shared._within_cap(0, 100, i) for i in range(3)] == fits  # 100 bytes a run, 250 of 1000 allowed


@pytest.mark.parametrize(
    "kind,device,strategy",
    [
        ("numbers", None, "external"),
        ("strings", None, "external"),
        ("strings", None, "memory"),  # the sorted parts are dask's results: dask makes a lost one again
        pytest.param("numbers", "gpu", "external", marks=pytest.mark.gpu),
        pytest.param("cudf", "gpu", "external", marks=pytest.mark.gpu),  # a dask-cudf frame (skipped without dask-cudf)
    ],
)
def test_a_worker_killed_during_the_merges_of_a_frame_sort(tmp_path, rng, kind, device, strategy):
    """On a cluster of two worker processes with nannies, one worker SIGKILLed while the merges of
    an external frame sort run (rows of fixed-width columns in the run store's files, or pickled
    rows beside them; with device="gpu", the runs kept on the one GPU both processes share, read
    across them through CUDA IPC): dask makes what it held again, a merge that finds a run of the
    lost worker gone has it made again (remote.FromGraph), and the result is pandas' stable
    sort, with no run left behind."""
    import signal
    import threading
    import time

    from .conftest import HAS_GPU

    if device == "gpu" and not HAS_GPU:
        pytest.skip("no CUDA device")
    distributed = pytest.importorskip("distributed")
    dd = pytest.importorskip("dask.dataframe")
    if kind == "cudf":
        pytest.importorskip("dask_cudf", reason="dask-cudf is not installed (pip install 'dsort[cudf]')")
    from dsort.dataframe import sort_values

    n = 400_000
    df = pd.DataFrame({"k": rng.integers(0, 1_000, n), "v": np.arange(n)})
    if kind == "strings":
        df["s"] = pd.Series(rng.integers(0, 10**6, n)).astype(str).to_numpy(dtype=object)
    runs = tmp_path / "runs"
    runs.mkdir()
    with (
        dask.config.set({"dsort.runs.shared-gpu-fraction": 1.0}),  # the share counts other test processes' use too
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        ddf = dd.from_pandas(df, npartitions=24, sort=False)
        ddf = (ddf.to_backend("cudf") if kind == "cudf" else ddf).persist()
        distributed.wait(ddf)
        base = _as_pandas(ddf.compute())  # the frame as dask holds it (its strings in dask's dtype)
        pids = list(client.run(os.getpid).values())
        done = {}

        def sort():
            try:
                done["got"] = sort_values(ddf, "k", strategy=strategy, local_directory=runs, npartitions=24, device=device).compute()
            except Exception as e:  # noqa: BLE001 (judged below)
                done["error"] = e

        job = threading.Thread(target=sort)
        job.start()
        killed, deadline = False, time.time() + 60
        while job.is_alive() and time.time() < deadline:
            if any("dsort-merge" in str(k) for keys in client.processing().values() for k in keys):
                os.kill(pids[0], signal.SIGKILL)
                killed = True
                break
            time.sleep(0.005)
        job.join(180)
    assert killed, "the sort ended before a worker could be killed: make it longer"
    assert not job.is_alive(), "the sort did not finish after the worker was lost"
    assert "error" not in done, done.get("error")
    pd.testing.assert_frame_equal(_as_pandas(done["got"]), base.sort_values("k", kind="stable"))
    assert not [p for p in runs.rglob("*") if p.is_file()], "runs left behind"


def _as_pandas(frame):
    return frame.to_pandas() if type(frame).__module__.startswith("cudf") else frame


@pytest.mark.parametrize("kind", ["frame", "array"])
def test_runs_lost_after_the_cuts_are_made_again_through_the_scheduler(tmp_path, rng, kind):
    """On a cluster of two worker processes, the cuts computed and kept, then every run's file
    removed (the disk that held them lost): the merges find their runs gone and have dask make
    them again from their tasks (the runs a merge is placed beside dask makes again itself), and
    the result is still NumPy's or pandas' stable sort, with no run left behind."""
    distributed = pytest.importorskip("distributed")
    dd = pytest.importorskip("dask.dataframe")
    from dask.delayed import Delayed

    from dsort.collections.remote import REMADE_TOPIC
    from dsort.collections.tasks import CUTS

    n = 60_000
    keys = rng.integers(0, 500, n)
    runs = tmp_path / "runs"
    runs.mkdir()
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        if kind == "frame":
            df = pd.DataFrame({"k": keys, "v": np.arange(n)})
            out = dsort.dataframe.sort_values(dd.from_pandas(df, npartitions=12, sort=False), "k", strategy="external",
                                              local_directory=runs, npartitions=2)  # fmt: skip
        else:
            out = dsort.sort_by_key(da.from_array(keys, chunks=n // 12), da.arange(n, chunks=n // 12), strategy="external",
                                    local_directory=runs)[1]  # fmt: skip
        graph = dict(out.__dask_graph__())
        (cut,) = [k for k in graph if isinstance(k, str) and k.startswith(CUTS)]
        kept = Delayed(cut, graph).persist()  # the runs made and cut; their tasks' results released
        distributed.wait(kept)
        files = [p for p in runs.rglob("run-*.bin")]
        assert len(files) >= 3
        for p in files:
            p.unlink()
        client.run(lambda: [s.disk.files.close() for s in list(L._stores.values())])  # no process reads a removed file through its mapping
        got = out.compute()
        remade = [e for _, e in client.get_events(REMADE_TOPIC)]
        del kept
    if kind == "frame":
        pd.testing.assert_frame_equal(got.reset_index(drop=True), df.sort_values("k", kind="stable").reset_index(drop=True))
    else:
        np.testing.assert_array_equal(got, np.argsort(keys, kind="stable"))
    assert remade and all(e["tier"] == "disk" for e in remade), remade
    assert not [p for p in runs.rglob("*") if p.is_file()], "runs left behind"
