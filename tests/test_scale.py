"""dsort.collections.scale and the grouping in dsort.core.plan: a sort's cost follows the data and the workers, not
the number of chunks or partitions. Thousands of small partitions, against NumPy and pandas."""

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split

import dsort
import dsort.dataframe as D
from dsort.core import plan


from dsort.collections import scale, tasks


@pytest.mark.parametrize("trial", range(40))
def test_groups_are_consecutive_cover_every_piece_and_balance_sizes(rng, trial):
    n = int(rng.integers(1, 60))
    sizes = rng.integers(0, 1000, n) * (rng.random(n) < 0.8)  # empty pieces too
    if trial % 5 == 0:
        sizes[:] = 0
    count = int(rng.integers(1, 80))
    got = plan.groups(sizes, count)
    assert got[0][0] == 0 and got[-1][1] == n and all(b > a for a, b in got)
    assert all(got[i][1] == got[i + 1][0] for i in range(len(got) - 1))
    assert len(got) == min(count, n)
    pieces = plan.pieces(sizes, got)
    assert [p[0] for p in pieces] == list(range(n))
    for i, g, lo, hi in pieces:
        a, _ = got[g]
        assert a <= i < got[g][1] and lo == sizes[a:i].sum() and hi - lo == sizes[i]


def test_groups_of_equal_pieces_are_equal():
    assert plan.groups([5] * 12, 4) == [(0, 3), (3, 6), (6, 9), (9, 12)]
    assert plan.groups([1, 1, 100, 1, 1, 1], 3) == [(0, 2), (2, 3), (3, 6)]  # a big piece alone


def test_run_count_follows_the_threads_and_the_bytes_not_the_pieces():
    assert plan.run_count(4096, threads=8, per_thread=2) == 16
    assert plan.run_count(5, threads=8, per_thread=2) == 5  # a piece is never split
    assert plan.run_count(4096, 8, 2, nbytes=10 << 20, min_bytes=8 << 20) == 1
    assert plan.run_count(4096, 8, 2, nbytes=1 << 30, min_bytes=1 << 20, max_bytes=64 << 20) == 16
    assert plan.run_count(4096, 1, 2, nbytes=1 << 34, min_bytes=1 << 20, max_bytes=64 << 20) == 256
    # chunks of a run's worth each are not grouped (each sorted where it lies), up to 4 a thread
    big = dict(min_bytes=64 << 20, whole_bytes=256 << 20)
    assert plan.run_count(8, 2, 2, nbytes=8 << 30, **big) == 8
    assert plan.run_count(64, 2, 2, nbytes=64 << 30, **big) == 8
    assert plan.run_count(8, 2, 2, nbytes=1 << 30, **big) == 4  # 128 MiB chunks: grouped
    for p in (16, 512, 4096):
        assert plan.run_count(p, 2, 2, nbytes=80 << 20, min_bytes=8 << 20) == 4


def _dsort_tasks(collection):
    return {k for k in dict(collection.__dask_graph__()) if key_split(k).startswith("dsort-")}


@pytest.mark.default_scale
def test_the_array_graph_grows_with_the_chunks_not_chunks_times_outputs():
    """Tasks O(P + Q): at 4096 chunks, a few per chunk (its output piece) and a few dozen more,
    for every strategy; a slice per (run, merge group), never per (chunk, output)."""
    x = da.random.default_rng(0).integers(0, 1 << 40, 4096 * 300, chunks=300)
    with dask.config.set({"scheduler": "threads"}):
        for strategy in ("multiway", "tree", "external"):
            small = _dsort_tasks(dsort.sort(x.rechunk(4096 * 300 // 16), strategy=strategy))
            large = _dsort_tasks(dsort.sort(x, strategy=strategy))
            assert len(large) <= 4096 + len(small) + 64, (strategy, len(large))
            slices = [k for k in large if key_split(k) == tasks.SLICE]
            runs = 2 * scale.threads()
            assert len(slices) <= 2 * runs * runs


@pytest.mark.default_scale
def test_the_frame_graph_grows_with_the_partitions_not_partitions_times_outputs():
    df = dd.from_pandas(pd.DataFrame({"k": np.arange(8192)[::-1], "v": 1}), npartitions=2048, sort=False)
    for strategy in ("memory", "external"):
        graph = _dsort_tasks(D.sort_values(df, "k", strategy=strategy))
        assert len(graph) <= 3 * 2048 + 64 * 64, (strategy, len(graph))  # pieces, runs and their slices


@pytest.mark.parametrize("strategy", ["memory", "external"])
@pytest.mark.parametrize("outputs", [64, 3])
def test_a_sorted_frames_partitions_are_dsorts_own_tasks(rng, strategy, outputs):
    """No task a partition around dsort's: the partitions are the tasks that make them, named
    after the result (dask's from_delayed added two a partition); a merge group of one output is
    taken by an alias. What dask users do with such a frame (filters aligned with it) still works."""
    pdf = pd.DataFrame({"k": rng.integers(0, 100, 4000), "v": np.arange(4000)})
    df = dd.from_pandas(pdf, npartitions=64, sort=False)
    out = D.sort_values(df, "k", strategy=strategy, npartitions=outputs)
    assert out.__dask_keys__() == [(out._name, t) for t in range(outputs)] and out._name.startswith(tasks.SORTED)
    graph = dict(out.__dask_graph__())
    theirs = {key_split(k) for k in graph} - {key_split(k) for k in df.__dask_graph__()}
    assert all(name.startswith("dsort-") for name in theirs), theirs
    ours = [k for k in graph if key_split(k) == tasks.SORTED]
    merges = [k for k in graph if key_split(k) == tasks.MERGE]
    assert len(ours) == outputs and len(merges) <= outputs
    with dask.config.set(scheduler="threads"):
        expected = pdf.sort_values("k", kind="stable")
        pd.testing.assert_frame_equal(out.compute(), expected)
        pd.testing.assert_frame_equal(out[out.v % 3 == 0].compute(), expected[expected.v % 3 == 0])
        assert out.npartitions == outputs and len(out.partitions[outputs - 1].compute()) == len(out.get_partition(outputs - 1))


@pytest.mark.parametrize("strategy", ["multiway", "tree", "external"])
def test_thousands_of_small_chunks_sort_like_numpy(rng, strategy):
    n = 40_000
    keys = rng.integers(-50, 50, n).astype(np.float64)
    keys[rng.random(n) < 0.05] = np.nan
    sizes = rng.integers(0, 25, 4000)  # empty chunks too
    sizes[-1] += n - sizes.sum() if sizes.sum() < n else 0
    sizes = np.diff(np.r_[0, np.minimum(np.cumsum(sizes), n)])
    sizes[-1] += n - sizes.sum()
    x = da.from_array(keys, chunks=(tuple(int(s) for s in sizes),))
    with dask.config.set({"scheduler": "threads"}):
        order = dsort.argsort(x, strategy=strategy, descending=True)
        got = order.compute()
    assert order.chunks == x.chunks
    expected = pd.Series(keys).sort_values(ascending=False, kind="stable").index.to_numpy()
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("strategy", ["memory", "external"])
def test_thousands_of_small_partitions_sort_like_pandas(rng, strategy):
    n = 20_000
    pdf = pd.DataFrame({"k": rng.integers(0, 30, n), "s": rng.choice(["a", "bb", "", "dddd"], n), "v": np.arange(n)})
    df = dd.from_pandas(pdf, npartitions=1500, sort=False)
    for by in ("k", ["s", "k"]):
        out = D.sort_values(df, by, strategy=strategy, ascending=False if by == "k" else [True, False])
        got, lengths = dask.compute(out, out.map_partitions(len), scheduler="threads")  # one sort for both
        expected = df.compute().sort_values(by, ascending=False if by == "k" else [True, False], kind="stable")
        pd.testing.assert_frame_equal(got, expected)
        assert out.npartitions == 1500 and lengths.sum() == n
        assert lengths.max() - lengths.min() <= 1


def test_thousands_of_partitions_on_a_cluster_of_processes(rng, tmp_path):
    """Two worker processes: the runs' grouping from their threads, slices travelling between them."""
    from distributed import Client, LocalCluster

    pdf = pd.DataFrame({"k": rng.integers(0, 1000, 30_000), "v": np.arange(30_000)})
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as c, Client(c):
            assert scale.threads() == 2
            df = dd.from_pandas(pdf, npartitions=1024, sort=False).persist()
            for strategy in ("memory", "external"):
                got = D.sort_values(df, "k", strategy=strategy).compute()
                pd.testing.assert_frame_equal(got, pdf.sort_values("k", kind="stable"))
            x = da.from_array(pdf["k"].to_numpy(), chunks=30).persist()
            for strategy in ("multiway", "external"):
                np.testing.assert_array_equal(dsort.sort(x, strategy=strategy).compute(), np.sort(pdf["k"].to_numpy()))


def test_an_external_result_computes_twice(tmp_path):
    """The last merge of the first compute removes the runs' directory; the second makes it again."""
    x = da.random.default_rng(2).integers(0, 100, 5000, chunks=500)
    s = dsort.sort(x, strategy="external", memory_limit=0, local_directory=tmp_path)
    with dask.config.set({"scheduler": "threads"}):
        first, second = s.compute(), s.compute()
    np.testing.assert_array_equal(first, np.sort(x.compute()))
    np.testing.assert_array_equal(second, first)


def test_runs_never_join_partitions_of_two_workers(rng, monkeypatch):
    """Consecutive partitions of different owners end a run there (a partition of unknown owner
    between them too); partitions of unknown owners group as the count says; owners scattered
    so that the runs would grow past the bound leave the runs as they were."""
    monkeypatch.setattr(scale, "threads", lambda: 4)  # 8 runs of 5 partitions
    plain = scale.frame_runs(40, external=False)
    assert len(plain) == 8
    owners = ["a"] * 12 + [None] + ["b"] * 5 + ["a"] * 12 + ["b"] * 10
    runs = scale.frame_runs(40, external=False, owners=owners)
    assert scale.frame_runs(40, external=False, owners=[None] * 40) == plain
    scattered = ["ab"[i % 2] for i in range(40)]
    assert scale.frame_runs(40, external=False, owners=scattered) == plain
    assert [a for a, _ in runs][0] == 0 and runs[-1][1] == 40 and all(b == c for (_, b), (c, _) in zip(runs, runs[1:]))
    assert all(len({owners[i] for i in range(a, b)} - {None}) == 1 for a, b in runs), runs
    assert {a for a, _ in plain} < {a for a, _ in runs} and len(runs) <= 1.5 * len(plain)  # only cut further, within the bound


def test_frames_sorted_on_gpus_take_their_own_runs_per_worker(monkeypatch):
    """``gpu-runs-per-worker`` counts the runs of a frame sorted on GPUs (whatever the workers'
    threads), ``runs-per-thread`` the others'; an external sort's partitions-per-run bound holds
    for both."""
    monkeypatch.setattr(scale, "threads", lambda: 32)
    monkeypatch.setattr(scale, "workers", lambda: 4)
    with dask.config.set({"dsort.scale.runs-per-thread": 2, "dsort.scale.gpu-runs-per-worker": 2}):
        assert len(scale.frame_runs(128, external=False)) == 64 and len(scale.frame_runs(128, external=False, gpu=True)) == 8
        with dask.config.set({"dsort.scale.frame-partitions-per-run": 4}):
            assert len(scale.frame_runs(128, external=True, gpu=True)) == 32
    with dask.config.set({"dsort.scale.gpu-runs-per-worker": 3}):
        assert len(scale.frame_runs(128, external=False, gpu=True)) == 12


def test_chunks_on_the_gpus_take_runs_per_worker_up_to_the_resident_run(monkeypatch):
    """An external sort of chunks already on the GPUs: ``gpu-resident-runs-per-worker`` runs a
    worker (whatever its threads), more where a run would pass ``gpu-resident-run`` bytes, never
    more than the chunks; host chunks sorted on GPUs keep the external rule (``gpu-external-run``)."""
    monkeypatch.setattr(scale, "threads", lambda: 8)
    monkeypatch.setattr(scale, "workers", lambda: 4)
    sizes = [1 << 28] * 16  # 2 GiB chunks of int64 keys, 32 GiB in all
    settings = {"dsort.scale.gpu-resident-runs-per-worker": 1, "dsort.scale.gpu-resident-run": "12GiB", "dsort.scale.runs-per-thread": 2}
    with dask.config.set(settings):
        runs = scale.array_runs(sizes, 8, gpu=True, external=True, host=False)
        assert len(runs) == 4 and [b - a for a, b in runs] == [4] * 4
        with dask.config.set({"dsort.scale.gpu-resident-run": "4GiB"}):  # 8 runs of 4 GiB
            assert len(scale.array_runs(sizes, 8, gpu=True, external=True, host=False)) == 8
        with dask.config.set({"dsort.scale.gpu-resident-runs-per-worker": 2}):
            assert len(scale.array_runs(sizes, 8, gpu=True, external=True, host=False)) == 8
        assert len(scale.array_runs(sizes[:2], 8, gpu=True, external=True, host=False)) == 2  # fewer chunks than workers
        with dask.config.set({"dsort.scale.gpu-external-run": "512MiB"}):  # host chunks: a run a chunk, as before
            assert len(scale.array_runs(sizes, 8, gpu=True, external=True, host=True)) == 16


def test_tasks_beside_keys_spread_over_their_workers_not_over_the_keys():
    """Nine keys on worker a, three on b: twelve tasks beside them go six to each worker, each
    worker's keys taken in turn; without two known owners they spread over the keys as before."""
    keys = [f"run-{i}" for i in range(12)]
    owners = ["a"] * 9 + [None, "b", "b"]
    got = scale.beside_balanced(keys, owners, 12)
    where = [owners[keys.index(k)] for k in got]
    assert where.count("a") == 6 and where.count("b") == 6
    assert [k for k in got if k in keys[:9]] == keys[:6] and set(k for k in got if k in keys[10:]) == set(keys[10:])
    assert scale.beside_balanced(keys, owners, 5) == ["run-0", "run-10", "run-1", "run-11", "run-2"]
    plain = [tasks.beside(keys, t, 7) for t in range(7)]
    assert scale.beside_balanced(keys, None, 7) == plain == scale.beside_balanced(keys, ["a"] * 12, 7)
    assert scale.beside_balanced([], None, 3) == [None] * 3


@pytest.mark.parametrize(
    "strategy, blocks",
    [("external", [2, 12, 2, 16]), ("memory", [2, 12, 2, 16]), ("external", [1, 2, 1, 1, 3, 1, 2, 1, 1, 1, 4, 1, 2, 1, 1, 2, 1, 1, 4, 1])],
)
def test_on_a_cluster_each_run_sorts_partitions_of_one_worker(rng, tmp_path, strategy, blocks):
    """A frame of futures (and a partition-wise step over it) on two worker processes, its 32
    partitions in ``blocks`` on one worker, then the other (in blocks of 2, 12, 2 and 16; or
    scattered, where an external sort's runs still follow the workers): every run task takes
    partitions held by one worker (none moves for it), the external sort's merges go beside runs of
    either worker alike, and the sort is pandas'."""
    distributed = pytest.importorskip("distributed")
    n = 48_000
    df = pd.DataFrame({"k": rng.integers(0, 1_000, n), "v": np.arange(n)})
    with (
        dask.config.set({"distributed.scheduler.work-stealing": False}),  # a stolen task put one partition on the other worker (CI)
        distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        workers = sorted(client.scheduler_info()["workers"])
        at = [workers[b % 2] for b, size in enumerate(blocks) for _ in range(size)]
        parts = [client.scatter(df.iloc[i], workers=[w]) for i, w in zip(np.array_split(np.arange(n), 32), at)]
        ddf = dd.from_delayed(parts, meta=df.iloc[:0], verify_meta=False).persist()  # each partition where its data is
        distributed.wait(ddf)
        held = client.who_has(ddf)  # by the persisted results' keys, (name, partition)
        assert [held[k][0] for k in sorted(held, key=lambda k: k[1])] == at  # the frame as laid out: the test's premise
        step = ddf.map_partitions(lambda p: p.assign(v=p["v"] + 0))
        owners = scale.partition_workers(step)
        assert owners == at
        assert scale.partition_workers(ddf) == owners
        with dask.config.set({"dsort.scale.runs-follow-workers": False}):
            assert scale.partition_workers(step) is None
        out = D.sort_values(step, "k", strategy=strategy, local_directory=tmp_path)
        graph = dict(out.__dask_graph__())
        phase = "dsort-run" if strategy == "external" else "dsort-sort"
        runs = [t for k, t in graph.items() if isinstance(k, tuple) and key_split(k[0]) == phase]
        parts = {k: i for i, k in enumerate(step.__dask_keys__())}
        assert runs and all(len({owners[parts[d]] for d in t.dependencies if d in parts}) == 1 for t in runs)
        if strategy == "external":  # the merges beside runs of either worker alike, though one holds 28 of 32 partitions
            run_owner = {k: owners[parts[next(d for d in t.dependencies if d in parts)]] for k, t in graph.items() if t in runs}
            # a merge goes beside a run's anchor (that run's handle again, under a name of its own)
            anchors = {k: t for k, t in graph.items() if isinstance(k, tuple) and key_split(k[0]) == "dsort-anchor"}
            anchor_owner = {k: run_owner[next(iter(t.dependencies))] for k, t in anchors.items()}
            merges = [t for k, t in graph.items() if isinstance(k, tuple) and key_split(k[0]) == "dsort-merge"]
            near = [next(anchor_owner[d] for d in t.dependencies if d in anchor_owner) for t in merges]
            assert len(merges) >= 2 and abs(near.count(workers[0]) - near.count(workers[1])) <= 1, near
        got = out.compute()
    pd.testing.assert_frame_equal(got.reset_index(drop=True), df.sort_values("k", kind="stable").reset_index(drop=True))


def test_array_runs_keep_each_runs_chunks_on_one_worker():
    """An external array sort's runs (chunk numbers): cut where the owner changes while that stays
    within the bound; chunks scattered past it go by worker (non-consecutive runs, each worker's
    share of the rows) only where equal keys cannot be told apart, else the runs stay as they
    were; every chunk in exactly one run."""
    sizes = [10] * 16
    groups = plan.groups(sizes, 4)
    plain = [tuple(range(a, b)) for a, b in groups]
    assert scale.runs_by_worker(sizes, groups, None, True) == plain == scale.runs_by_worker(sizes, groups, ["a"] * 16, True)
    blocks = ["a"] * 6 + ["b"] * 6 + [None] + ["a"] * 3
    runs = scale.runs_by_worker(sizes, groups, blocks, False)
    assert [i for r in runs for i in r] == list(range(16)) and all(list(r) == list(range(r[0], r[-1] + 1)) for r in runs)
    assert all(len({blocks[i] for i in r} - {None}) == 1 for r in runs) and len(runs) <= 2 * len(plain)
    scattered = ["ab"[i % 2] for i in range(12)] + ["a", "a", "b", "b"]
    assert scale.runs_by_worker(sizes, groups, scattered, False) == plain  # ties seen: consecutive runs only
    runs = scale.runs_by_worker(sizes, groups, scattered, True)
    assert sorted(i for r in runs for i in r) == list(range(16)) and all(len({scattered[i] for i in r}) == 1 for r in runs)
    assert len(runs) == len(plain) and all(list(r) == sorted(r) for r in runs)
    uneven = [40] * 4 + [10] * 12  # worker a holds 160 of 280 rows: 2 of 4 runs
    runs = scale.runs_by_worker(uneven, plan.groups(uneven, 4), ["a"] * 4 + ["ab"[i % 2] for i in range(12)], True)
    assert sum(1 for r in runs if r[0] < 4 or r[0] % 2 == 0) >= 2


def test_on_a_cluster_an_external_array_sorts_runs_of_one_workers_chunks(rng, tmp_path):
    """Chunks of integers laid out on one worker, then the other, in turn; chunks of floats (-0.0,
    +0.0, NaN) in two blocks. Each run task of an external sort of the keys takes chunks of one
    worker (none moves for it); an argsort's runs stay consecutive chunks (equal keys in input
    order), of one worker where the blocks allow; every result is NumPy's stable sort."""
    distributed = pytest.importorskip("distributed")
    with (
        dask.config.set({"distributed.scheduler.work-stealing": False}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        workers = sorted(client.scheduler_info()["workers"])
        for keys, at in (
            (rng.integers(0, 50, 6_000), [workers[i % 2] for i in range(12)]),
            (rng.choice([-0.0, 0.0, np.nan, 1.5, -np.inf], 6_000), [workers[i // 6] for i in range(12)]),
        ):
            pieces = np.array_split(keys, 12)
            futures = [client.scatter(p, workers=[w]) for p, w in zip(pieces, at)]
            x = da.concatenate([da.from_delayed(f, (len(p),), keys.dtype) for f, p in zip(futures, pieces)]).persist()
            distributed.wait(x)
            held = client.who_has(x)
            owners = [held[k][0] for k in x.__dask_keys__()]
            if owners != at:  # the test's premise: the chunks where their data was scattered
                pytest.skip(f"chunks not where scattered: {owners}")
            chunks = {k: i for i, k in enumerate(x.__dask_keys__())}
            for out, want, stable in (
                (dsort.sort(x, strategy="external", local_directory=tmp_path), np.sort(keys, kind="stable"), keys.dtype.kind == "f"),
                (dsort.argsort(x, strategy="external", local_directory=tmp_path), np.argsort(keys, kind="stable"), True),
            ):
                graph = dict(out.__dask_graph__())
                runs = [
                    sorted(chunks[d] for d in t.dependencies if d in chunks) for k, t in graph.items() if key_split(k[0]) == "dsort-run"
                ]
                assert sorted(i for r in runs for i in r) == list(range(12))
                if stable:
                    assert all(r == list(range(r[0], r[-1] + 1)) for r in runs), runs
                if not stable or at[0] == at[5]:
                    assert all(len({owners[i] for i in r}) == 1 for r in runs), runs
                got = out.compute()
                np.testing.assert_array_equal(got, want)
                np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_external_frame_runs_follow_scattered_workers_up_to_a_count(monkeypatch):
    """Partitions scattered over the workers: an in-memory sort's runs stay as the count makes
    them (its merges grow with its runs), an external sort's follow the workers while they are at
    most ``EXTERNAL_RUNS_FOLLOWING_WORKERS`` (its merges do not), each run of one worker's
    consecutive partitions; past that they stay as the count makes them."""
    monkeypatch.setattr(scale, "threads", lambda: 4)
    monkeypatch.setattr(scale, "workers", lambda: 2)
    rng = np.random.default_rng(5)
    few = scale.EXTERNAL_RUNS_FOLLOWING_WORKERS // 2
    owners = [str(o) for o in rng.integers(0, 4, few)]
    plain = scale.frame_runs(few, external=True, gpu=True)
    assert scale.frame_runs(few, external=False, owners=owners) == scale.frame_runs(few, external=False)
    runs = scale.frame_runs(few, external=True, owners=owners, gpu=True)
    assert len(runs) > 1.5 * len(plain) and runs[0][0] == 0 and runs[-1][1] == few
    assert all(b == c for (_, b), (c, _) in zip(runs, runs[1:])) and all(len({owners[i] for i in range(a, b)}) == 1 for a, b in runs)
    many = 4 * scale.EXTERNAL_RUNS_FOLLOWING_WORKERS
    alternating = ["ab"[i % 2] for i in range(many)]
    assert scale.frame_runs(many, external=True, owners=alternating, gpu=True) == scale.frame_runs(many, external=True, gpu=True)
