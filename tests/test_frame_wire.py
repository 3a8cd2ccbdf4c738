"""dsort.core.frame_wire: a frame's slice pickled (moved between workers, spilled, written as a
run's rows) comes back equal, its object columns of NumPy arrays carried through Arrow and the
other columns as pandas pickles them."""

import pickle

import numpy as np
import pandas as pd
import pytest

from dsort.core.frame_wire import Wired, _as_arrow, unwire, wire


def _arrays(rng, n, dtype, nulls=True):
    out = np.empty(n, dtype=object)
    for i in range(n):
        if nulls and i % 7 == 3:
            out[i] = None
        else:
            out[i] = (rng.random(int(rng.integers(0, 5))) * 100).astype(dtype)
    return out


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a, b)
    for c in range(a.shape[1]):
        if a.dtypes.iloc[c] == np.dtype(object):
            for x, y in zip(a.iloc[:, c], b.iloc[:, c]):
                assert type(x) is type(y)
                if isinstance(x, np.ndarray):
                    assert x.dtype == y.dtype and np.array_equal(x, y)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float64", "float32", "bool"])
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_object_columns_of_arrays_come_back_as_the_same_arrays(rng, dtype, n):
    df = pd.DataFrame(
        {"k": rng.random(n), "a": _arrays(rng, n, dtype), "s": rng.choice(["x", None, "yz"], n).astype(object), "t": np.arange(n)},
        index=pd.Index(rng.permutation(n) + 5, name="ix"),
    )
    df.attrs["note"] = "kept"
    w = wire(df)
    assert isinstance(w, Wired) and w.frame is df and len(w) == n
    back = unwire(pickle.loads(pickle.dumps(w, protocol=5)))
    _same(back, df)
    assert back.attrs == df.attrs
    if n > 1:
        assert _as_arrow(df["a"].to_numpy()) is not None and _as_arrow(df["s"].to_numpy()) is None


def test_columns_arrow_cannot_hold_exactly_pickle_as_they_are(rng):
    """Python lists, dicts, 2-d arrays, arrays of several dtypes, datetimes, mixed values: left to
    pickle (exact), as are duplicate and non-string column labels."""
    n = 50
    several = np.empty(n, dtype=object)
    for i in range(n):
        several[i] = np.arange(i % 3, dtype=np.int64 if i % 2 else np.int32)
    cols = {
        "lists": pd.Series([list(range(i % 4)) for i in range(n)], dtype=object),
        "dicts": pd.Series([{"a": i} for i in range(n)], dtype=object),
        "2d": pd.Series([np.zeros((2, 2))] * n, dtype=object),
        "several": several,
        "dates": pd.Series([np.array(["2024-01-01"], dtype="datetime64[s]")] * n, dtype=object),
        "mixed": pd.Series([1, "a", None, 2.5, b"x"] * 10, dtype=object),
        "arrays": _arrays(rng, n, "int64"),
    }
    df = pd.DataFrame(cols)
    df.columns = ["lists", "dicts", 3, "several", "dates", "mixed", "lists"]  # a duplicate, a number
    for c in range(df.shape[1] - 1):
        assert _as_arrow(df.iloc[:, c].to_numpy()) is None, df.columns[c]
    assert _as_arrow(df.iloc[:, -1].to_numpy()) is not None
    _same(unwire(pickle.loads(pickle.dumps(wire(df), protocol=5))), df)
    plain = pd.DataFrame({"k": np.arange(3), "s": pd.Series(["a", "b", None], dtype="string")})
    assert wire(plain) is plain and unwire(plain) is plain  # no object column: nothing to do
    assert unwire(pickle.loads(pickle.dumps(wire(df.iloc[:0])))).shape == (0, 7)


def test_a_wired_frame_counts_its_arrays_bytes(rng):
    import sys

    from dask.sizeof import sizeof

    df = pd.DataFrame({"a": _arrays(rng, 2000, "float64", nulls=False)})
    nbytes = sum(x.nbytes for x in df["a"])
    assert sizeof(wire(df)) >= nbytes and sys.getsizeof(wire(df)) < 10 * (nbytes + df.memory_usage().sum())


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "float64", "bool"])
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_carried_columns_move_as_arrow_and_come_back_as_the_same_arrays(rng, dtype, n):
    """:func:`carry` holds object columns of arrays as Arrow list columns (taken, sliced, joined
    and pickled as Arrow), leaves other columns as they are; :func:`restore` against the input's
    meta gives back the same arrays (dtype, values, None where None) in the new row order, and
    leaves a column that was an Arrow list column in the meta as it is."""
    from dsort.core.frame_wire import carry, restore

    df = pd.DataFrame(
        {
            "k": rng.random(n),
            "a": _arrays(rng, n, dtype),
            "d": pd.Series([{"x": i} for i in range(n)], dtype=object),
            "t": np.arange(n),
        },
        index=pd.Index(rng.permutation(n) + 5, name="ix"),
    )
    c = carry(df)
    if n:
        assert isinstance(c.dtypes["a"], pd.ArrowDtype) and c.dtypes["d"] == np.dtype(object)
    order = rng.permutation(n)
    halves = [c.take(order[: n // 2]), c.take(order[n // 2 :])]
    moved = pickle.loads(pickle.dumps(pd.concat(halves), protocol=5))
    back = restore(moved, df.iloc[:0])
    _same(back, df.take(order))
    assert restore(df, df.iloc[:0]) is df and carry(df[["k", "t"]]) is not None
    if n:  # a frame whose own meta has the Arrow list column: left as Arrow
        assert isinstance(restore(moved, c.iloc[:0]).dtypes["a"], pd.ArrowDtype)


def test_a_frame_of_array_columns_sorts_on_two_workers_like_pandas(rng):
    """On two worker processes the partitions' object columns of arrays are carried as Arrow to
    the runs and merges (partitions of int arrays and of float arrays among them) and come back as
    object columns of the same arrays: the result is pandas' stable sort, value for value, in
    memory and external."""
    distributed = pytest.importorskip("distributed")
    import dask.dataframe as dd

    from dsort.dataframe import sort_values

    import dask

    n = 3000
    a = _arrays(rng, n, "int64")
    a[1000:1500] = _arrays(rng, 500, "float64")  # partitions of float arrays: another Arrow list type there
    df = pd.DataFrame({"k": rng.integers(0, 40, n), "a": a, "f": rng.random(n)})
    with (
        dask.config.set({"dataframe.convert-string": False}),  # the arrays stay objects, as read from Parquet
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        ddf = dd.from_pandas(df, npartitions=6, sort=False)
        for strategy in ("memory", "external"):
            got = sort_values(ddf, "k", strategy=strategy).compute()
            _same(got, df.sort_values("k", kind="stable"))
