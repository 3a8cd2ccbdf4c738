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
