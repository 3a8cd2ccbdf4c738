"""A key names one value in every graph that holds it (dask's first rule), for every sort dsort
builds: a sorted frame or array computed in one ``dask.compute`` beside its own partitions
(``to_delayed()``), a column, a reduction, a ``persist()`` of itself, a second sort of the same
input, and the input's own partitions, then again across calls, on the synchronous, threaded and
distributed schedulers; every value compared with pandas' or NumPy's stable sort.

(A graph with a task no output takes had that task's value come back as a frame's partition:
dask, computing a frame beside delayed objects, takes the graph's leaves for its partitions.)

The collections go to ``dask.compute`` frames (and arrays) first, delayed objects last: dask
2026.8 (``dask._expr._HLGExprSequence._tune_down``) regroups a mixed sequence by optimizer and
hands results back in the regrouped order, so a delayed object between two frames gets the second
frame's value, and that frame the delayed object's, for dask's own ``sort_values`` alike."""

import warnings

import dask
import dask.array as da
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dsort as A
import dsort.dataframe as D

from .frame_cases import reference

SCHEDULERS = ["sync", "threads", "distributed"]
FRAMES = {  # name: (by, the sort's options, columns)
    "memory": ("k", dict(strategy="memory"), "numbers"),
    "external": ("k", dict(strategy="external"), "strings"),  # a string column rides along: pickled rows
    "fixed-width": ("k", dict(strategy="external"), "numbers"),  # numbers only: rows in the run store
    "strings": (["s", "k"], dict(strategy="memory"), "strings"),
    "strings-external": (["s", "k"], dict(strategy="external"), "strings"),
}
ARRAYS = ["multiway", "tree", "external"]


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=2, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster, set_as_default=False) as c,
    ):
        yield c


@pytest.fixture
def compute(request, client):
    """``dask.compute`` on the scheduler the test names."""
    scheduler = request.node.callspec.params["scheduler"]

    def run(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # dask's warning on mixing frames and delayed objects
            if scheduler == "distributed":
                with client.as_current(), dask.config.set(scheduler=client):
                    return dask.compute(*args)
            return dask.compute(*args, scheduler=scheduler)

    return run


def _frame(rng, n, columns):
    df = pd.DataFrame({"k": rng.integers(0, 7, n), "v": rng.random(n), "row": np.arange(n)})
    if columns == "strings":
        df["s"] = rng.choice(["", "a", "ab", "b", None], n)
    return df


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("kind", list(FRAMES))
@pytest.mark.parametrize("npartitions", [1, 3, 12])
def test_a_sorted_frame_beside_its_own_partitions_and_more(rng, tmp_path, compute, scheduler, kind, npartitions):
    by, options, columns = FRAMES[kind]
    df = _frame(rng, 240, columns)
    ddf = dd.from_pandas(df, npartitions=npartitions, sort=False)
    df = ddf.compute(scheduler="sync")  # as dask holds it (strings as pandas' "string": dask's convert-string)
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        res = D.sort_values(ddf, by, **options)
        again = D.sort_values(ddf, by, **options)  # the same sort built twice: the same keys, the same values
        other = D.sort_values(ddf, "row", ascending=False, **options)  # another sort of the same input
        want = reference(df, [by] if isinstance(by, str) else by, True)
        parts = res.to_delayed()
        out, total, column, again_out, other_out, parts_out, inputs = compute(
            res, res["v"].sum(), res["row"], again, other, parts, ddf.to_delayed()
        )
        pd.testing.assert_frame_equal(out, want)
        pd.testing.assert_frame_equal(again_out, want)
        pd.testing.assert_frame_equal(other_out, df.iloc[::-1])
        pd.testing.assert_series_equal(column, want["row"])
        assert np.isclose(total, df["v"].sum())
        assert all(isinstance(p, pd.DataFrame) for p in parts_out)
        pd.testing.assert_frame_equal(pd.concat(parts_out), want)
        pd.testing.assert_frame_equal(pd.concat(inputs), df)
        # across calls, a persisted result among them
        kept = res.persist(scheduler="sync") if scheduler != "distributed" else None
        (alone,) = compute(parts[-1])
        pd.testing.assert_frame_equal(alone, parts_out[-1])
        if kept is not None:
            got, first = compute(kept, kept.to_delayed()[0])
            pd.testing.assert_frame_equal(got, want)
            pd.testing.assert_frame_equal(first, parts_out[0])


@pytest.mark.parametrize("scheduler", SCHEDULERS)
@pytest.mark.parametrize("strategy", ARRAYS)
@pytest.mark.parametrize("chunks", [300, 100, 23])
def test_a_sorted_array_beside_its_own_chunks_and_more(rng, tmp_path, compute, scheduler, strategy, chunks):
    x = rng.integers(0, 50, 300).astype(np.float64)
    x[rng.random(300) < 0.1] = np.nan
    v = np.arange(300)
    dx, dv = da.from_array(x, chunks=chunks), da.from_array(v, chunks=chunks)
    opts = dict(strategy=strategy, local_directory=tmp_path)
    keys, values = A.sort_by_key(dx, dv, **opts)
    order = A.argsort(dx, **opts)
    alone = A.sort(dx, **opts)
    down = A.sort(dx, descending=True, **opts)
    want = np.argsort(x, kind="stable")
    got = compute(keys, values, order, alone, down, keys.sum(), values.to_delayed().ravel().tolist(), dx.to_delayed().ravel().tolist())
    k, vals, pos, s, d, total, value_chunks, inputs = got
    np.testing.assert_array_equal(k, x[want])
    np.testing.assert_array_equal(vals, v[want])
    np.testing.assert_array_equal(pos, want)
    np.testing.assert_array_equal(s, x[want])
    expected_down = np.concatenate([np.sort(x[~np.isnan(x)])[::-1], x[np.isnan(x)]])
    np.testing.assert_array_equal(d, expected_down)
    assert np.isnan(total) == np.isnan(x).any()
    np.testing.assert_array_equal(np.concatenate(value_chunks), v[want])
    np.testing.assert_array_equal(np.concatenate(inputs), x)
    (first,) = compute(values.to_delayed().ravel()[0])
    np.testing.assert_array_equal(first, value_chunks[0])
