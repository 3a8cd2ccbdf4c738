"""Key values at the edges of what pandas holds, against pandas' stable sort: a nullable or Arrow
float's NaN (a value there, not a missing one)."""

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from .frame_cases import reference
from dsort.core.frame_keys import encode_keys
from dsort.dataframe import set_index, sort_series, sort_values

ORDERS = [(True, "last"), (True, "first"), (False, "last"), (False, "first")]
LAYOUTS = ["three", "one", "empty"]  # partitions: three; one; three, the middle one empty


def _floats(rng, n, dtype, share=0.2):
    """``n`` floats of ``dtype`` (``Float64``, ``Float32`` or ``arrow``) among NaN (a value), +-inf,
    -0.0 and ties, ``share`` of them missing."""
    x = rng.choice([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.5, -2.5, *rng.normal(0, 3, 3).round(1)], n)
    mask = rng.random(n) < share
    if dtype == "arrow":
        return pd.arrays.ArrowExtensionArray(pa.array(x, mask=mask))
    return pd.arrays.FloatingArray(x.astype(dtype.lower()), mask)


def _filled(dtype, n, missing):
    """``n`` NaN of ``dtype`` as values, or ``n`` missing values."""
    x, mask = np.full(n, np.nan), np.full(n, missing)
    if dtype == "arrow":
        return pd.arrays.ArrowExtensionArray(pa.array(x, mask=mask))
    return pd.arrays.FloatingArray(x.astype(dtype.lower()), mask)


def _order(keys) -> np.ndarray:
    return np.argsort(keys.view(f"S{keys.shape[1]}").ravel(), kind="stable")


def _dask(df, layout):
    if layout == "one":
        return dd.from_pandas(df, npartitions=1, sort=False)
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    return ddf.map_partitions(_drop_middle, meta=ddf._meta) if layout == "empty" else ddf


def _drop_middle(part, partition_info=None):
    return part.iloc[:0] if partition_info["number"] == 1 else part


def _rows(out) -> list:
    return out.compute(scheduler="sync")["row"].tolist()


@pytest.mark.parametrize("dtype", ["Float64", "Float32", "arrow"])
def test_float_nan_that_is_a_value_keys_as_pandas_sorts_it(rng, dtype):
    """A nullable float's NaN sorts above +inf (last ascending, first descending), missing values
    where na_position says; an Arrow float's NaN beside the missing values (pyarrow's order); one
    column and several, directions mixed (the reference: pandas' single-column sorts chained, as
    its own sort of several Arrow columns fails on NaN); all NaN, all missing, no rows."""
    n = 300
    frames = [pd.DataFrame({"k": _floats(rng, n, dtype), "j": rng.integers(0, 3, n), "row": np.arange(n)})]
    for missing in (False, True):  # all NaN, all missing
        frames.append(pd.DataFrame({"k": _filled(dtype, 40, missing), "j": rng.integers(0, 2, 40), "row": np.arange(40)}))
    frames.append(frames[0].iloc[:0])
    for df in frames:
        for ascending, na_position in ORDERS:
            expected = df.sort_values("k", ascending=ascending, na_position=na_position, kind="stable")["row"].to_numpy()
            np.testing.assert_array_equal(df["row"].to_numpy()[_order(encode_keys(df, "k", ascending, na_position))], expected)
            for by, asc in [(["k", "j"], [ascending, not ascending]), (["j", "k"], [True, ascending])]:
                keys = encode_keys(df, by, asc, na_position)
                np.testing.assert_array_equal(df["row"].to_numpy()[_order(keys)], reference(df, by, asc, na_position)["row"].to_numpy())


@pytest.mark.parametrize("strategy", ["memory", "external"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_float_nan_that_is_a_value_sorts_as_pandas(rng, strategy, layout, tmp_path):
    """Through dask, in memory and externally, on three partitions, one, or with an empty one:
    every direction and na_position, and two columns in mixed directions."""
    n = 240
    df = pd.DataFrame({"k": _floats(rng, n, "Float64"), "j": rng.integers(0, 3, n), "row": np.arange(n)})
    ddf = _dask(df, layout)
    df = ddf.compute(scheduler="sync")
    for ascending, na_position in ORDERS:
        out = sort_values(ddf, "k", ascending=ascending, na_position=na_position, strategy=strategy, local_directory=tmp_path)
        assert _rows(out) == df.sort_values("k", ascending=ascending, na_position=na_position, kind="stable")["row"].tolist()
    out = sort_values(ddf, ["j", "k"], ascending=[True, False], na_position="first", strategy=strategy, local_directory=tmp_path)
    assert _rows(out) == reference(df, ["j", "k"], [True, False], "first")["row"].tolist()


def test_float_nan_that_is_a_value_in_sort_series_and_set_index(rng):
    """sort_series orders it as pandas' Series.sort_values; set_index as pandas' stable sort, NaN
    after +inf in the last partition with the missing values, no division NaN, loc finds the values."""
    n = 300
    df = pd.DataFrame({"k": _floats(rng, n, "Float64"), "row": np.arange(n)})
    df.loc[:2, "k"] = np.inf  # values up to +inf, then NaN, then missing ones
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    for ascending, na_position in ORDERS:
        got = sort_series(ddf["k"], ascending=ascending, na_position=na_position).compute(scheduler="sync")
        expected = df["k"].sort_values(ascending=ascending, na_position=na_position, kind="stable")
        pd.testing.assert_series_equal(got, expected)
    out = set_index(ddf, "k", npartitions=3)
    parts = dask.compute(*out.to_delayed(), scheduler="sync")
    expected = df.sort_values("k", kind="stable").set_index("k")
    pd.testing.assert_frame_equal(pd.concat(parts), expected)
    assert out.known_divisions and not any(pd.isna(d) for d in out.divisions) and out.divisions[-1] == np.inf
    assert all(not p.index.isna().any() and not np.isnan(p.index.to_numpy(np.float64, na_value=0)).any() for p in parts[:-1])
    for v in (np.inf, 1.5, -0.0):
        assert out.loc[v].compute(scheduler="sync")["row"].tolist() == expected.loc[expected.index == v, "row"].tolist()
