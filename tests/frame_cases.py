"""Frames for the dataframe tests: every kind of sort column, hypothesis strategies over kinds and
partitionings, and the reference order (pandas' own stable single-column sorts, chained)."""

import numpy as np
import pandas as pd
from hypothesis import strategies as st


def frame(rng, n):
    df = pd.DataFrame(
        {
            "i": rng.integers(-3, 3, n),
            "u": rng.integers(0, 3, n).astype(np.uint16),
            "f": rng.choice([-1.5, -0.0, 0.0, 2.0, np.inf, np.nan], n),
            "s": rng.choice(["", "a", "ab", "b", "é", None], n),
            "t": pd.to_datetime(rng.integers(0, 3, n), unit="D"),
            "b": rng.random(n) < 0.5,
            "n": pd.array(rng.integers(0, 3, n), dtype="Int64"),
            "row": np.arange(n),
        }
    )
    df.loc[rng.random(n) < 0.1, "t"] = pd.NaT
    df.loc[rng.random(n) < 0.1, "n"] = pd.NA
    return df


def reference(df, by, ascending, na_position="last"):
    """Stable single-column sorts, last column first: a lexicographic stable sort. (pandas'
    own multi-column sort ties NaN with numbers in later columns under na_position="first")."""
    ascending = [ascending] * len(by) if isinstance(ascending, bool) else ascending
    for c, a in reversed(list(zip(by, ascending))):
        df = df.sort_values(c, ascending=a, na_position=na_position, kind="stable")
    return df


KINDS = ["int", "uint8", "float", "string", "pystring", "bool", "Int64", "datetime", "datetime_tz", "category"]
KINDS += ["arrow_int", "arrow_ts", "arrow_decimal", "arrow_bool", "arrow_binary", "arrow_string", "timedelta"]


def column_of(kind, rng, n):
    small = rng.integers(-2, 3, n)
    missing = rng.random(n) < 0.15
    if kind == "int":
        return small
    if kind == "uint8":
        return small.astype(np.uint8)
    if kind == "float":
        return rng.choice([-np.inf, -1.5, -0.0, 0.0, 2.0, np.inf, np.nan], n)
    if kind in ("string", "pystring"):
        values = np.array(["", "a", "ab", "b", "é", "a\x00", "zzzzzzzz"], dtype=object)[rng.integers(0, 7, n)]
        values[missing] = None
        return pd.Series(values, dtype="string" if kind == "string" else object)
    if kind == "bool":
        return small > 0
    if kind == "Int64":
        return pd.array(np.where(missing, None, small), dtype="Int64")
    if kind in ("datetime", "datetime_tz"):
        t = pd.Series(pd.to_datetime(small, unit="D"))
        t[missing] = pd.NaT
        return t.dt.tz_localize("UTC").dt.tz_convert("Europe/Paris") if kind == "datetime_tz" else t
    if kind in ("category", "category_ordered", "category_unordered"):
        ordered = {"category": bool(rng.integers(2)), "category_ordered": True, "category_unordered": False}[kind]
        return pd.Categorical(np.array(["x", "b", "m"], dtype=object)[small % 3], categories=["x", "b", "m"], ordered=ordered)
    if kind == "timedelta":
        return pd.to_timedelta(small, unit="h")
    if kind == "arrow_string":
        return pd.array([None if m else f"s{v}" for v, m in zip(small, missing)], dtype="string[pyarrow]")
    if kind == "arrow_int":
        return pd.array(np.where(missing, None, small), dtype="int64[pyarrow]")
    if kind == "arrow_decimal":
        import decimal

        import pyarrow as pa

        values = [None if m else decimal.Decimal(int(v)).scaleb(-2) for v, m in zip(rng.integers(-300, 300, n), missing)]
        return pd.array(values, dtype=pd.ArrowDtype(pa.decimal128(9, 2)))
    if kind == "arrow_binary":
        import pyarrow as pa

        values = [None if m else bytes([v % 4, 0][: 1 + int(v > 0)]) for v, m in zip(small, missing)]
        return pd.array(values, dtype=pd.ArrowDtype(pa.binary()))
    if kind == "arrow_bool":
        return pd.array(np.where(missing, None, small > 0), dtype="bool[pyarrow]")
    if kind == "arrow_ts":
        return pd.Series(pd.to_datetime(small, unit="s")).astype("timestamp[ms][pyarrow]")
    raise AssertionError(kind)


@st.composite
def frames(draw):
    """A frame of 1 to 3 key columns of any kinds, a row number, and a partitioning: its lengths
    (zeros anywhere, one row each, one partition)."""
    seed = draw(st.integers(0, 2**32 - 1))
    kinds = draw(st.lists(st.sampled_from(KINDS), min_size=1, max_size=3))
    lengths = draw(st.lists(st.integers(0, 40) | st.just(0) | st.just(1), min_size=1, max_size=7))
    rng = np.random.default_rng(seed)
    n = sum(lengths)
    df = pd.DataFrame({f"c{i}": column_of(k, rng, n) for i, k in enumerate(kinds)})
    df["row"] = np.arange(n)
    ascending = draw(st.lists(st.booleans(), min_size=len(kinds), max_size=len(kinds)))
    return df, lengths, [f"c{i}" for i in range(len(kinds))], ascending, draw(st.sampled_from(["last", "first"]))


def built_by_dsort(collection) -> bool:
    """Whether a dask collection's graph holds dsort's tasks (not only dask's own)."""
    return any("dsort" in str(k) for k in dict(collection.__dask_graph__()))
