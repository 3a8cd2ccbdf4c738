"""The file sort's first merge pass: more runs than one merge takes (``dsort.file-sort.max-runs``)
are merged in groups into chained runs, which the final pass merges: the same stable sort, on
every tier, and with a worker lost on a cluster."""

import math
import os

import dask
import numpy as np
import pandas as pd
import pytest

from dsort import limits
from dsort.io import gen
from dsort.service import LimitError, Resources, bounded_fan_in, merge_groups

from .test_filesort import ENGINES, TIERS, _on_cluster, _sort, records_reference

MIB = 1 << 20


def test_runs_past_one_pass_are_grouped_evenly_and_past_two_refused():
    with dask.config.set({"dsort.file-sort.max-runs": 10}):
        assert merge_groups(10) == ()
        assert merge_groups(11) == ((0, 3), (3, 6), (6, 9), (9, 11))  # about sqrt(11) groups of sqrt(11)
        for runs, count, sizes in [(95, 10, {9, 10}), (70, 9, {7, 8}), (100, 10, {10})]:
            groups = merge_groups(runs)
            assert len(groups) == count and groups[0][0] == 0 and groups[-1][1] == runs
            assert all(b == c for (_, b), (c, _) in zip(groups, groups[1:]))
            assert {b - a for a, b in groups} == sizes
        res = Resources(threads=2, host_budget=64 * MIB)
        # an explicit --chunk-size of 100 rows: 10,000 rows make 100 runs, two passes
        assert bounded_fan_in(10_000, 100, 100, res, 10_000, 0)[0] == 100
        with pytest.raises(
            LimitError, match=r"makes 101 runs; dsort merges at most 10 in one pass and 100 in two: .*--chunk-size here is 9.86 kiB"
        ):
            bounded_fan_in(10_001, 100, 100, res, 10_000, 0)
        # the memory allows blocks of ~10 MiB: the blocks grow to that, no further, and merge in two passes
        rows, range_rows = bounded_fan_in(2_000_000, 100, 1000, res, None, 0)
        room = (res.host_budget - limits.host_run_bytes(res, 2_000_000 * 100)) // 2 // 3 // 100
        runs = -(-2_000_000 // rows)
        assert rows == room and range_rows <= room and 10 < runs <= 100 and len(merge_groups(runs)) == math.isqrt(runs - 1) + 1
        with pytest.raises(LimitError, match=r"raise --memory-limit so that each of 2 tasks holds three blocks of"):
            bounded_fan_in(10**8, 100, 1000, res, None, 0)


def _two_passes(report):
    assert any(s.startswith("first pass: merge") for s in report.stages), report.stages  # the first pass ran


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("tier", list(TIERS))
@pytest.mark.parametrize("n,descending", [(30_011, False), (9_999, True)])
def test_records_merged_in_two_passes_every_tier(tmp_path, engine, tier, n, descending, rng):
    """Skewed keys (many ties) in blocks of 512 records: 59 or 20 runs, merged in groups of at
    most 8 then together; ties keep their input order; nothing of the runs is left."""
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(n, src, seed=int(rng.integers(1 << 30)), skew=True)
    with dask.config.set({"dsort.file-sort.max-runs": 8}):
        r = _sort(src, out, engine, tier, 51_200, descending=descending)
    _two_passes(r)
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), records_reference(data, descending=descending))
    assert r.input_summary.checksum == r.output_summary.checksum
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "out.bin"]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("dtype,descending", [("float64", False), ("float32", True), ("int16", False)])
def test_npy_merged_in_two_passes(tmp_path, engine, dtype, descending, rng):
    """NaN last, infinities, signed zeros and ties through two passes, against pandas' stable sort."""
    n = 20_000
    if dtype.startswith("float"):
        x = rng.choice([-np.inf, -1.5, -0.0, 0.0, 2.5, np.inf, np.nan], n).astype(dtype)
        x[::7] = rng.standard_normal(len(x[::7]))
    else:
        x = rng.integers(-50, 50, n).astype(dtype)
    src, out = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(src, x)
    with dask.config.set({"dsort.file-sort.max-runs": 5}):
        r = _sort(src, out, engine, "disk", 1000 * x.itemsize, descending=descending)  # 20 runs: groups of 4 or 5
    _two_passes(r)
    want = pd.Series(x).sort_values(ascending=not descending, kind="stable", na_position="last").to_numpy()
    u = f"u{x.itemsize}"
    np.testing.assert_array_equal(np.load(out).view(u), want.astype(x.dtype).view(u))


@pytest.mark.parametrize("moment", ["first pass", "final merges"])
def test_two_passes_on_a_cluster_with_a_worker_lost(tmp_path, moment):
    """Two worker processes, each reading the other's runs and pieces through it (two machines);
    one killed during the first pass (the group merges make its runs again from their blocks) or
    during the final merges (its pieces made again from their group's blocks): the same stable
    sort, no runs left."""
    phase = "dsort-group-merge" if moment == "first pass" else "dsort-merge"

    def now(client):
        return any(str(k).startswith(f"('{phase}") for keys in client.processing().values() for k in keys)

    with dask.config.set({"dsort.file-sort.max-runs": 12}):  # 100 runs: 10 groups
        report, keys = _on_cluster(tmp_path, now, everywhere=True)
    assert any("dsort-group-merge" in k for k in keys) and any("dsort-chain" in k for k in keys)


def test_a_lost_piece_is_made_again_the_same_from_its_groups_blocks(tmp_path, rng):
    """What a merge does for a piece whose worker is gone: its group's blocks sorted and cut again
    and its range merged give the same rows and sample as the first pass did."""
    import uuid

    from dsort.collections.tasks import CHAIN
    from dsort.compute import compute_threads
    from dsort.core import filesort as F, plan, runs as R
    from dsort.io import _fixed

    src = tmp_path / "in.bin"
    gen.records(5_000, src, seed=int(rng.integers(1 << 30)), skew=True)
    blocks = _fixed.plan_blocks([src], [0], [5_000], 100, 300)  # 17 runs
    with dask.config.set({"dsort.file-sort.max-runs": 5}):
        groups = merge_groups(len(blocks))
    group_ranges = tuple(plan.ranges(sum(b[2] for b in blocks[a:z]), 700) for a, z in groups)
    store = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), 100)
    job = F.Job(store.job, blocks, str(tmp_path / "out"), 0, layout=R.Layout(100, 10), range_rows=plan.ranges(5_000, 700),
                spacing=7, store=store, groups=groups, group_ranges=group_ranges)  # fmt: skip
    dsk, _, chain_keys, _ = _fixed.graph(job)
    assert len(chain_keys) == len(groups) == 5 and all(k[0].startswith(CHAIN) for k in chain_keys)  # 17 runs
    try:
        (chains,) = compute_threads(dsk, [chain_keys], 2, None)
        s = R.store(store)
        for g, t in [(0, 0), (2, 1), (4, len(group_ranges[4]) - 1)]:
            piece = chains[g][0].pieces[t]
            before = s.read(piece, 0, piece.rows).copy()
            again = job.remake(job.piece_index(g, t), None)
            assert again.index == piece.index and again.rows == piece.rows
            np.testing.assert_array_equal(s.read(again, 0, again.rows), before)
            np.testing.assert_array_equal(again.sample, piece.sample)
    finally:
        R.drop(store.job, store.directory)


def _group_merges(result) -> int:
    return sum(1 for k in dict(result.__dask_graph__()) if isinstance(k, tuple) and str(k[0]).startswith("dsort-group-merge"))


@pytest.mark.parametrize("kind", ["sort", "argsort", "sort_by_key"])
@pytest.mark.parametrize("memory_limit", [0, "1GB"])
@pytest.mark.parametrize("descending", [False, True])
def test_external_arrays_merged_in_two_passes(tmp_path, rng, kind, memory_limit, descending):
    """An external array sort of more runs than one pass takes (30 runs, at most 4 a pass): groups
    of runs merged into chains first; NumPy's stable order (NaN last), runs on disk or in memory,
    nothing left."""
    import dask.array as da

    import dsort

    a = rng.choice([np.nan, -np.inf, 1.5, 2.5, np.inf, -0.0], 30_000)
    a[::5] = rng.integers(0, 50, len(a[::5]))  # many ties
    v = np.arange(len(a), dtype=np.int32)
    x, y = da.from_array(a, chunks=1_000), da.from_array(v, chunks=1_000)
    run = {"sort": 8_000, "argsort": 16_000, "sort_by_key": 12_000}[kind]  # one chunk's rows a run
    with dask.config.set({"dsort.file-sort.max-runs": 4, "dsort.scale.external-run": run, "scheduler": "threads"}):
        kw = dict(strategy="external", memory_limit=memory_limit, local_directory=tmp_path, descending=descending)
        if kind == "sort":
            got = dsort.sort(x, **kw)
        elif kind == "argsort":
            got = dsort.argsort(x, **kw)
        else:
            got = dsort.sort_by_key(x, y, **kw)[1]
        assert _group_merges(got) >= 8
        got = got.compute()
    order = pd.Series(a).sort_values(ascending=not descending, kind="stable", na_position="last").index.to_numpy()
    want = {"sort": a[order], "argsort": order, "sort_by_key": v[order]}[kind]
    np.testing.assert_array_equal(got, want)
    assert os.listdir(tmp_path) == []


def test_external_arrays_in_two_passes_on_worker_processes(tmp_path, rng):
    """The same on two worker processes (runs and pieces are files every worker reads)."""
    import dask.array as da
    import distributed

    import dsort

    a = rng.integers(0, 50, 30_000)
    with (
        dask.config.set({"dsort.file-sort.max-runs": 4, "dsort.scale.external-run": 16_000}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        order = dsort.argsort(da.from_array(a, chunks=1_000), strategy="external", memory_limit="1GB", local_directory=tmp_path)
        assert _group_merges(order) >= 8
        got = order.compute()
    np.testing.assert_array_equal(got, np.argsort(a, kind="stable"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("by,ascending,na_position", [("k", True, "last"), (["f", "k"], [False, True], "first"), ("t", False, "last")])
@pytest.mark.parametrize("rows,keep", [(0, None), (5, None), (3_000, None), (3_000, 4)])
def test_fixed_width_frames_merged_in_two_passes(tmp_path, rng, by, ascending, na_position, rows, keep):
    """An external sort of a frame of fixed-width columns in 40 partitions, a run each, at most 6
    runs a pass: 7 groups merged first (ranges sized from the runs' rows when they are known: some
    empty where a group has fewer rows than ranges), then their chains; pandas' stable sort,
    balanced partitions, nothing left."""
    import dask.dataframe as dd

    df = pd.DataFrame(
        {
            "k": rng.integers(0, 30, rows),
            "f": rng.choice([np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf], rows),
            "t": pd.to_datetime(rng.integers(0, 50, rows), unit="D"),
            "x": np.arange(rows),
        },
        index=rng.permutation(rows) + 7,
    )
    ddf = dd.from_pandas(df, npartitions=40, sort=False) if rows >= 40 else dd.from_pandas(df, chunksize=1, sort=False)
    if keep is not None:  # 4 rows left in 40 partitions: groups with fewer rows than ranges, empty pieces
        ddf, df = ddf[ddf.x < keep], df[df.x < keep]
    _check_two_pass_frame(tmp_path, ddf, df, by, ascending, na_position)


def _check_two_pass_frame(tmp_path, ddf, df, by, ascending, na_position, ignore_index=False):
    """``ddf`` (``df``'s rows) sorted externally at most 6 runs a pass, a run each partition, on
    threads: pandas' stable sort of ``df``, balanced partitions, a first pass where there are more
    than 6 partitions, nothing left in ``tmp_path``."""
    from dsort.dataframe import sort_values

    config = {"dsort.file-sort.max-runs": 6, "dsort.scale.frame-partitions-per-run": 1, "dataframe.convert-string": False}
    with dask.config.set(config):
        got = sort_values(
            ddf, by, ascending=ascending, na_position=na_position, ignore_index=ignore_index, strategy="external", local_directory=tmp_path
        )
        names = [str(k[0]) for k in dict(got.__dask_graph__()) if isinstance(k, tuple)]
        frames = dask.compute(*got.to_delayed(), scheduler="threads")
    if ddf.npartitions > 6:
        assert any(n.startswith("dsort-group-merge") for n in names)
    want = df
    for c, a in reversed(list(zip([by] if isinstance(by, str) else by, [ascending] if isinstance(ascending, bool) else ascending))):
        want = want.sort_values(c, ascending=a, na_position=na_position, kind="stable")
    if ignore_index:
        want = want.reset_index(drop=True)
    pd.testing.assert_frame_equal(pd.concat(frames) if frames else df.iloc[:0], want)
    sizes = [len(f) for f in frames]
    assert not sizes or max(sizes) - min(sizes) <= 1
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("by,ascending,na_position", [("s", True, "last"), (["s", "k"], [False, True], "first"), ("k", False, "last")])
@pytest.mark.parametrize("rows,keep,ignore_index", [(0, None, False), (3_000, None, False), (3_000, None, True), (3_000, 4, False)])
def test_frames_of_strings_and_objects_merged_in_two_passes(tmp_path, rng, by, ascending, na_position, rows, keep, ignore_index):
    """An external sort of a frame with strings (of widths that differ from run to run: the keys
    are widened to each group's, then to all chains') and Python objects in 40 partitions, a run
    each, at most 6 runs a pass: its rows are pickled into the chains' pieces as into runs;
    pandas' stable sort, balanced partitions, nothing left."""
    import dask.dataframe as dd

    words = np.array(["", "a", "b", "ab", "ba", "zzzzzzzz", "a\u00e9", "long " * 7, None], dtype=object)
    df = pd.DataFrame(
        {
            "s": words[rng.integers(0, len(words), rows)],
            "k": rng.choice([np.nan, -0.0, 1.5, -np.inf], rows),
            "o": [(i % 3, str(i)) for i in range(rows)],
            "c": pd.Categorical(rng.choice(["x", "y"], rows)),
            "x": np.arange(rows),
        },
        index=rng.permutation(rows) + 7,
    )
    with dask.config.set({"dataframe.convert-string": False}):  # the strings as they are: objects
        ddf = dd.from_pandas(df, npartitions=40, sort=False) if rows >= 40 else dd.from_pandas(df, chunksize=1, sort=False)
    if keep is not None:  # a few rows left in 40 partitions: groups with fewer rows than ranges, empty pieces
        ddf, df = ddf[ddf.x < keep], df[df.x < keep]
    _check_two_pass_frame(tmp_path, ddf, df, by, ascending, na_position, ignore_index)


def test_frames_of_strings_in_two_passes_on_worker_processes(tmp_path, rng):
    """A frame of strings in two passes on two worker processes: pieces (pickled rows and keys)
    are files every worker reads; the output is pandas' stable sort and nothing is left."""
    import dask.dataframe as dd
    import distributed

    from dsort.dataframe import sort_values

    rows = 4_000
    df = pd.DataFrame({"s": [f"w{v}" * (v % 4) for v in rng.integers(0, 60, rows)], "x": np.arange(rows)})
    with (
        dask.config.set({"dsort.file-sort.max-runs": 5, "dsort.scale.frame-partitions-per-run": 1, "dataframe.convert-string": False}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        got = sort_values(dd.from_pandas(df, npartitions=24, sort=False), "s", strategy="external", local_directory=tmp_path)
        assert any(str(k[0]).startswith("dsort-group-merge") for k in dict(got.__dask_graph__()) if isinstance(k, tuple))
        out = got.compute()
    pd.testing.assert_frame_equal(out, df.sort_values("s", kind="stable"))
    assert os.listdir(tmp_path) == []


def test_external_array_chunks_are_owned_and_writable(tmp_path):
    """Output chunks of an external sort are arrays of their own, never views of a run (a file's
    read-only mapping): a chunk merged from one slice (input already in order) too."""
    import dask.array as da

    import dsort

    a = np.arange(30_000.0)
    with dask.config.set({"dsort.scale.external-run": 8_000 * 8, "dsort.scale.min-run": 8_000 * 8, "scheduler": "threads"}):
        s = dsort.sort(da.from_array(a, chunks=4_000), strategy="external", memory_limit=0, local_directory=tmp_path)

        def bump(block):
            assert block.flags.writeable
            block += 1
            return block

        np.testing.assert_array_equal(s.map_blocks(bump).compute(), a + 1)
    assert os.listdir(tmp_path) == []
