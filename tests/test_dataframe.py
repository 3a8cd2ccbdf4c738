"""dsort's dataframe sorts against pandas: sort_values (in memory and external), sort_series,
set_index with exact divisions, the accessor; key encoding (dsort.frame_keys) and the per-partition
functions (dsort.frame_chunk). The reference is always pandas' own stable sort (single-column
sorts chained, last key first)."""

import subprocess
import sys

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .conftest import HAS_GPU
from dsort import frame_chunk as FC
from dsort.dataframe import encode_keys, set_index, sort_series, sort_values
from dsort.frame_keys import KeySpec, common_widths, widen


def _frame(rng, n):
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


@pytest.mark.parametrize(
    "by,ascending",
    [
        (["i"], True),
        (["f"], False),
        (["s"], True),
        (["t", "i"], [False, True]),
        (["n", "s", "f"], [True, False, False]),
        (["b", "u"], False),
    ],
)
@pytest.mark.parametrize("na_position", ["last", "first"])
@pytest.mark.parametrize("backend", ["numpy", "pyarrow"])
def test_encoded_keys_order_like_pandas(rng, by, ascending, na_position, backend):
    """Also Arrow-backed columns (``pd.ArrowDtype``, as dsort reads Parquet), against pandas'
    order of the NumPy-backed frame."""
    df = _frame(rng, 3000)
    keys = encode_keys(df if backend == "numpy" else df.convert_dtypes(dtype_backend="pyarrow"), by, ascending, na_position)
    order = np.argsort(keys.view(f"S{keys.shape[1]}").ravel(), kind="stable")
    np.testing.assert_array_equal(df["row"].to_numpy()[order], _reference(df, by, ascending, na_position)["row"].to_numpy())


@pytest.mark.parametrize("ascending", [True, False])
def test_strings_with_trailing_nuls_sort_after_their_prefix(ascending):
    df = pd.DataFrame({"s": ["a\x00", "a", "a\x00b", "a", "", "\x00"]})
    keys = encode_keys(df, ["s"], ascending)
    order = np.argsort(keys.view(f"S{keys.shape[1]}").ravel(), kind="stable")
    np.testing.assert_array_equal(order, df.sort_values("s", ascending=ascending, kind="stable").index.to_numpy())


def _reference(df, by, ascending, na_position="last"):
    """Stable single-column sorts, last column first: a lexicographic stable sort. (pandas'
    own multi-column sort ties NaN with numbers in later columns under na_position="first")."""
    ascending = [ascending] * len(by) if isinstance(ascending, bool) else ascending
    for c, a in reversed(list(zip(by, ascending))):
        df = df.sort_values(c, ascending=a, na_position=na_position, kind="stable")
    return df


@pytest.mark.parametrize("strategy", ["auto", "external"])
@pytest.mark.parametrize("keep", ["middle", "leading", "trailing", "none", "one"])
def test_sort_values_with_empty_partitions(rng, strategy, keep, tmp_path):
    """A filtered frame has empty partitions anywhere: the result has as many partitions, rows
    equal pandas', nothing raised (the in-memory sort used to fail on them, or drop them)."""
    df = _frame(rng, 400)
    kept = {"middle": [0, 3, 5], "leading": [2, 3], "trailing": [0, 1], "none": [], "one": [4]}[keep]
    ddf = dd.from_pandas(df, npartitions=6, sort=False)
    ddf = ddf.map_partitions(lambda part, partition_info=None: part if partition_info["number"] in kept else part.iloc[:0], meta=ddf._meta)
    out = sort_values(ddf, ["s", "f"], ascending=[True, False], strategy=strategy, local_directory=tmp_path)
    assert out.npartitions == 6
    got = out.compute(scheduler="sync")
    expected = _reference(ddf.compute(scheduler="sync"), ["s", "f"], [True, False])
    np.testing.assert_array_equal(got["row"].to_numpy(), expected["row"].to_numpy())
    sizes = list(out.map_partitions(len).compute(scheduler="sync"))
    assert sum(sizes) == len(expected) and max(sizes) - min(sizes) <= 1  # balanced to within one row


def test_sort_values_is_called_as_in_pandas(rng, tmp_path):
    """Options after ``by`` are keywords (in dask the third positional argument is npartitions);
    NumPy's bools and integer column labels work; ``dsort.dataframe`` is there after ``import
    dsort``; ``npartitions`` with the external sort, balanced."""
    import dsort

    df = pd.DataFrame({0: rng.integers(0, 9, 300), "v": np.arange(300)})
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    with pytest.raises(TypeError):
        dsort.dataframe.sort_values(ddf, 0, False)
    got = dsort.dataframe.sort_values(ddf, 0, ascending=np.False_).compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, df.sort_values(0, ascending=False, kind="stable"))
    out = dsort.dataframe.sort_values(ddf, [0], ascending=[np.True_], strategy="external", npartitions=7, local_directory=tmp_path)
    assert out.npartitions == 7
    parts = [len(p) for p in dask.compute(*out.to_delayed(), scheduler="sync")]
    assert sum(parts) == 300 and max(parts) - min(parts) <= 1
    out = dsort.dataframe.sort_values(ddf, 0, npartitions=5)
    assert out.npartitions == 5
    parts = [len(p) for p in dask.compute(*out.to_delayed(), scheduler="sync")]
    assert sum(parts) == 300 and max(parts) - min(parts) <= 1
    with pytest.raises(ValueError, match="npartitions"):
        dsort.dataframe.sort_values(ddf, 0, npartitions=0)


@pytest.mark.parametrize("strategy", ["auto", "external"])
@pytest.mark.parametrize("ordered", [False, True])
def test_categorical_keys_sort_in_category_order(rng, strategy, ordered, tmp_path):
    """As pandas: by the categories' order (not the values'), ordered or not, missing values as
    na_position says; boolean categories too (they used to sort as booleans)."""
    n = 600
    cats = ["zebra", "apple", "mango", "kiwi"]  # not in lexical order
    df = pd.DataFrame(
        {
            "c": pd.Categorical(rng.choice(cats + [None], n), categories=cats, ordered=ordered),
            "b": pd.Categorical(rng.choice([True, False], n), categories=[True, False]),
            "row": np.arange(n),
        }
    )
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    cases = ((["c"], [True], "last"), (["c", "row"], [False, True], "first"), (["b", "row"], [True, False], "last"))
    for by, ascending, na_position in cases:
        got = sort_values(ddf, by, ascending=ascending, na_position=na_position, strategy=strategy, local_directory=tmp_path)
        expected = _reference(df, by, ascending, na_position)
        np.testing.assert_array_equal(got.compute(scheduler="sync")["row"].to_numpy(), expected["row"].to_numpy())


def test_categorical_keys_need_known_categories(rng):
    df = pd.DataFrame({"c": pd.Categorical(rng.choice(["a", "b"], 20)), "v": np.arange(20)})
    ddf = dd.from_pandas(df, npartitions=2).astype({"c": "category"})
    unknown = ddf.assign(c=ddf.c.cat.as_unknown())
    with pytest.raises(ValueError, match="categories are not known"):
        sort_values(unknown, "c")


def test_sort_values_on_a_dask_dataframe(rng):
    df = _frame(rng, 5000)
    ddf = dd.from_pandas(df, npartitions=5, sort=False)
    with dask.config.set(scheduler="sync"):
        out = sort_values(ddf, ["s", "f"], ascending=[True, False]).compute()
    expected = _reference(df, ["s", "f"], [True, False])
    np.testing.assert_array_equal(out["row"].to_numpy(), expected["row"].to_numpy())
    np.testing.assert_array_equal(out.index.to_numpy(), expected.index.to_numpy())
    with pytest.raises(KeyError, match="nope"):
        sort_values(ddf, "nope")


# -- every partitioning, every key type: hypothesis against pandas --------------------------------

KINDS = ["int", "uint8", "float", "string", "pystring", "bool", "Int64", "datetime", "datetime_tz", "category", "arrow_int", "arrow_ts"]


def _column(kind, rng, n):
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
    if kind == "category":
        return pd.Categorical(np.array(["x", "b", "m"], dtype=object)[small % 3], categories=["x", "b", "m"], ordered=bool(rng.integers(2)))
    if kind == "arrow_int":
        return pd.array(np.where(missing, None, small), dtype="int64[pyarrow]")
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
    df = pd.DataFrame({f"c{i}": _column(k, rng, n) for i, k in enumerate(kinds)})
    df["row"] = np.arange(n)
    ascending = draw(st.lists(st.booleans(), min_size=len(kinds), max_size=len(kinds)))
    return df, lengths, [f"c{i}" for i in range(len(kinds))], ascending, draw(st.sampled_from(["last", "first"]))


@pytest.fixture(autouse=True)
def _dtypes_as_given():
    """pandas' dtypes as the frames have them (dask would turn object strings into Arrow strings)."""
    with dask.config.set({"dataframe.convert-string": False}):
        yield


def _partitioned(df, lengths):
    """A dask frame of exactly these partition lengths."""
    bounds = np.cumsum([0] + lengths)
    parts = [dask.delayed(df.iloc[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
    return dd.from_delayed(parts, meta=df.iloc[:0], verify_meta=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=frames(), strategy=st.sampled_from(["memory", "external"]), npartitions=st.none() | st.integers(1, 5))
def test_sort_values_equals_pandas_for_any_keys_and_partitions(case, strategy, npartitions, tmp_path_factory):
    df, lengths, by, ascending, na_position = case
    ddf = _partitioned(df, lengths)
    out = sort_values(
        ddf,
        by,
        ascending=ascending,
        na_position=na_position,
        npartitions=npartitions,
        strategy=strategy,
        local_directory=tmp_path_factory.mktemp("runs"),
    )
    parts = dask.compute(*out.to_delayed(), scheduler="sync")
    assert len(parts) == (npartitions or len(lengths))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    pd.testing.assert_frame_equal(pd.concat(parts), _reference(df, by, ascending, na_position))


@settings(max_examples=40, deadline=None)
@given(case=frames())
def test_keys_widened_equal_keys_encoded_wide(case):
    """Each partition encodes its string keys at its own widths; brought to the common widths,
    they equal the keys encoded at those widths (so partitions compare without a widths pass)."""
    df, lengths, by, ascending, na_position = case
    spec = KeySpec.of(df, by, ascending, na_position)
    bounds = np.cumsum([0] + lengths)
    parts = [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    encoded = [spec.encode(p) for p in parts]
    want = common_widths([w for _, w in encoded])
    for p, (keys, have) in zip(parts, encoded):
        np.testing.assert_array_equal(widen(spec, keys, have, want), spec.encode(p, want)[0])


def test_building_runs_nothing_and_the_input_is_read_once(tmp_path):
    """Lazy: the call reads no partition (string keys too); compute reads each once."""
    reads = tmp_path / "reads"
    reads.mkdir()

    def load(i):
        (reads / f"{i}-{len(list(reads.iterdir()))}").touch()
        rng = np.random.default_rng(i)
        return pd.DataFrame({"s": rng.choice(["a", "bb", "ccc"], 50), "k": rng.integers(0, 9, 50), "part": i})

    ddf = dd.from_delayed([dask.delayed(load)(i) for i in range(4)], meta=load(99).iloc[:0], verify_meta=False)
    for f in reads.iterdir():
        f.unlink()
    for strategy in ("memory", "external"):
        out = sort_values(ddf, ["s", "k"], strategy=strategy, local_directory=tmp_path / "runs")
        assert list(reads.iterdir()) == []
        got = out.compute(scheduler="sync")
        assert sorted(int(f.name.split("-")[0]) for f in reads.iterdir()) == [0, 1, 2, 3]
        for f in reads.iterdir():
            f.unlink()
        expected = pd.concat([load(i) for i in range(4)]).sort_values(["s", "k"], kind="stable")
        pd.testing.assert_frame_equal(got, expected)
        for f in reads.iterdir():
            f.unlink()


def test_argument_and_type_errors_come_at_the_call():
    df = pd.DataFrame({"k": [1, 2], "o": [object(), object()], "d": [1.5, 2.5]})
    ddf = dd.from_pandas(df, npartitions=1)
    with pytest.raises(TypeError, match="cannot sort by column 'd'"):
        sort_values(ddf.assign(d=ddf.d.astype(pd.ArrowDtype(__import__("pyarrow").decimal128(5, 2)))), "d")
    with pytest.raises(KeyError, match="nope"):
        sort_values(ddf, "nope")
    with pytest.raises(ValueError, match="na_position"):
        sort_values(ddf, "k", na_position="middle")
    with pytest.raises(ValueError, match="strategy"):
        sort_values(ddf, "k", strategy="fast")
    with pytest.raises(ValueError, match="device"):
        sort_values(ddf, "k", device="tpu")
    with pytest.raises(ValueError, match="ascending has 2 entries"):
        sort_values(ddf, "k", ascending=[True, False])


def test_by_names_an_index_level(rng):
    df = pd.DataFrame({"v": rng.integers(0, 5, 300), "row": np.arange(300)}, index=pd.Index(rng.integers(0, 20, 300), name="idx"))
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    got = sort_values(ddf, ["idx", "v"], ascending=[False, True]).compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, _reference(df, ["idx", "v"], [False, True]))
    with pytest.raises(ValueError, match="ambiguous"):
        sort_values(dd.from_pandas(df.assign(idx=1), npartitions=2), "idx")


@pytest.mark.parametrize("ascending", [True, False])
def test_series_sort_and_ignore_index(rng, ascending):
    s = pd.Series(rng.choice([3.0, np.nan, -1.0, 2.5], 500), name="x", index=rng.permutation(500))
    ds = dd.from_pandas(s, npartitions=6, sort=False)
    got = sort_series(ds, ascending=ascending, na_position="first").compute(scheduler="sync")
    pd.testing.assert_series_equal(got, s.sort_values(ascending=ascending, na_position="first", kind="stable"))
    got = sort_series(ds, ignore_index=True, npartitions=3).compute(scheduler="sync")
    pd.testing.assert_series_equal(got, s.sort_values(kind="stable", ignore_index=True), check_index_type=False)


def test_divisions_true_gives_known_positional_divisions(rng):
    df = pd.DataFrame({"k": rng.integers(0, 5, 1001), "row": np.arange(1001)})
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    out = sort_values(ddf, "k", divisions=True, npartitions=3)
    assert out.known_divisions and out.divisions == (0, 334, 668, 1000)
    expected = df.sort_values("k", kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(out.compute(scheduler="sync"), expected, check_index_type=False)
    pd.testing.assert_frame_equal(out.loc[500:502].compute(scheduler="sync"), expected.loc[500:502], check_index_type=False)


@pytest.mark.parametrize("kind", ["int", "string", "datetime"])
def test_set_index_has_exact_divisions_and_loc_finds_every_row(rng, kind):
    n = 2000
    k = rng.integers(0, 40, n)
    col = {"int": k, "string": pd.Series([f"v{x:03d}" for x in k], dtype=object), "datetime": pd.to_datetime(k, unit="h")}[kind]
    df = pd.DataFrame({"k": col, "row": np.arange(n)})
    ddf = dd.from_pandas(df, npartitions=5, sort=False)
    out = set_index(ddf, "k")
    assert out.known_divisions
    expected = df.sort_values("k", kind="stable").set_index("k")
    got = out.compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, expected, check_dtype=False, check_index_type=False)
    parts = dask.compute(*out.to_delayed(), scheduler="sync")
    for p, lo, hi in zip(parts, out.divisions[:-1], out.divisions[1:]):  # each partition within its divisions
        assert len(p) and p.index[0] == lo and p.index.max() <= hi
    for v in expected.index.unique()[::7]:
        assert len(out.loc[v].compute(scheduler="sync")) == (expected.index == v).sum()
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 2 * max((df.k.value_counts()).max(), 1)


def test_set_index_refuses_missing_values():
    ddf = dd.from_pandas(pd.DataFrame({"k": [1.0, np.nan, 2.0], "v": [1, 2, 3]}), npartitions=2)
    with pytest.raises(ValueError, match="missing values"):
        set_index(ddf, "k")


def test_skewed_keys_balanced_where_dask_is_not(rng):
    """90% of the rows share one key: dsort's partitions stay within one row of balanced (and
    set_index's hold the heavy key in one partition, as divisions need); dask's own are not."""
    n = 20000
    df = pd.DataFrame({"k": np.where(rng.random(n) < 0.9, 5, rng.integers(0, 1000, n)), "row": np.arange(n)})
    ddf = dd.from_pandas(df, npartitions=8, sort=False)
    ours = [len(p) for p in dask.compute(*sort_values(ddf, "k").to_delayed(), scheduler="sync")]
    assert max(ours) - min(ours) <= 1
    theirs = [len(p) for p in dask.compute(*ddf.sort_values("k").to_delayed(), scheduler="sync")]
    assert max(theirs) - min(theirs) > n // 8  # what the test shows: dask's partitions are badly unbalanced
    out = set_index(ddf, "k")
    sizes = [len(p) for p in dask.compute(*out.to_delayed(), scheduler="sync")]
    heavy = int((df.k == 5).sum())
    assert max(sizes) < heavy + n // 8 and len(out.loc[5].compute(scheduler="sync")) == heavy


def test_accessor_after_import_in_either_order():
    for code in (
        "import dsort, dask.dataframe as dd",
        "import dask.dataframe as dd, dsort",
    ):
        probe = (
            f"{code}; import pandas as pd; "
            "d = dd.from_pandas(pd.DataFrame({'a': [3, 1, 2], 'b': [0, 1, 2]}), npartitions=2); "
            "assert d.dsort.sort_values('a').compute().a.tolist() == [1, 2, 3]; "
            "assert d.a.dsort.sort_values(ascending=False).compute().tolist() == [3, 2, 1]; "
            "assert d.dsort.set_index('a').known_divisions"
        )
        subprocess.run([sys.executable, "-c", probe], check=True, timeout=120)


def test_frame_chunk_functions_without_dask(rng):
    """The per-partition functions alone: sort, plan, samples, windows, cuts, slices, merges give
    pandas' order, for parts with different string widths."""
    df = pd.DataFrame({"s": rng.choice(["a", "bbbb", "", "cc"], 300), "k": rng.integers(0, 4, 300)})
    parts = [df.iloc[:0], df.iloc[:100].assign(s="x"), df.iloc[100:300]]
    spec = KeySpec.of(df, ["s", "k"], [False, True])
    done = [FC.sort_part(p, spec) for p in parts]
    plan = FC.make_plan(4, *map(FC.info, done))
    assert plan.out_sizes == (75, 75, 75, 75) and plan.widths == (4, 0)
    wins = FC.bounds(plan, *[FC.sample(spec, d, plan) for d in done])
    cut = FC.cuts(plan, wins, *[FC.window(spec, d, plan, wins, q) for q, d in enumerate(done)])
    out = [FC.merge(df.iloc[:0], cut, t, False, None, *[FC.take(spec, d, plan, cut, t, q) for q, d in enumerate(done)]) for t in range(4)]
    pd.testing.assert_frame_equal(pd.concat(out), _reference(pd.concat(parts), ["s", "k"], [False, True]))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("strategy", ["memory", "external"])
def test_keys_sorted_on_the_gpu(rng, strategy, tmp_path):
    df = _frame(rng, 5000)
    ddf = dd.from_pandas(df, npartitions=5, sort=False)
    out = sort_values(ddf, ["s", "f", "i"], ascending=[True, False, True], device="gpu", strategy=strategy, local_directory=tmp_path)
    pd.testing.assert_frame_equal(out.compute(scheduler="threads"), _reference(df, ["s", "f", "i"], [True, False, True]))


def test_auto_takes_the_external_sort_for_many_pieces(rng, tmp_path):
    """Many partitions x outputs: one task per piece would cost more than the data, so "auto"
    takes the external sort (one task per partition and per output); few: the in-memory one."""
    from dsort import dataframe as D

    assert D.choose_strategy(8, 8) == "memory" and D.choose_strategy(64, 64) == "external"
    assert D.choose_strategy(64, 64, divisions=True) == "memory"
    df = pd.DataFrame({"k": rng.integers(0, 50, 2000), "row": np.arange(2000)})
    ddf = dd.from_pandas(df, npartitions=20, sort=False)
    with dask.config.set({"temporary-directory": str(tmp_path)}):
        out = sort_values(ddf, "k")
        assert any(k[0].startswith("dsort-run-") for k in out.__dask_graph__() if isinstance(k, tuple))
        pd.testing.assert_frame_equal(out.compute(scheduler="threads"), df.sort_values("k", kind="stable"))
    assert [p for p in tmp_path.iterdir() if p.name.startswith("dsort-runs")] == []
