"""dsort's dataframe sorts against pandas: sort_values (in memory and external), sort_series,
set_index with exact divisions, the accessor. The reference is always pandas' own stable sort
(single-column sorts chained, last key first: tests/frame_cases.py)."""

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
from .frame_cases import built_by_dsort, frame, frames, reference
from dsort.dataframe import set_index, sort_series, sort_values


@pytest.mark.parametrize("strategy", ["auto", "external"])
@pytest.mark.parametrize("keep", ["middle", "leading", "trailing", "none", "one"])
def test_sort_values_with_empty_partitions(rng, strategy, keep, tmp_path):
    """A filtered frame has empty partitions anywhere: the result has as many partitions, rows
    equal pandas', nothing raised (the in-memory sort used to fail on them, or drop them)."""
    df = frame(rng, 400)
    kept = {"middle": [0, 3, 5], "leading": [2, 3], "trailing": [0, 1], "none": [], "one": [4]}[keep]
    ddf = dd.from_pandas(df, npartitions=6, sort=False)
    ddf = ddf.map_partitions(lambda part, partition_info=None: part if partition_info["number"] in kept else part.iloc[:0], meta=ddf._meta)
    out = sort_values(ddf, ["s", "f"], ascending=[True, False], strategy=strategy, local_directory=tmp_path)
    assert out.npartitions == 6
    got = out.compute(scheduler="sync")
    expected = reference(ddf.compute(scheduler="sync"), ["s", "f"], [True, False])
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
        expected = reference(df, by, ascending, na_position)
        np.testing.assert_array_equal(got.compute(scheduler="sync")["row"].to_numpy(), expected["row"].to_numpy())


def test_categorical_keys_need_known_categories(rng):
    df = pd.DataFrame({"c": pd.Categorical(rng.choice(["a", "b"], 20)), "v": np.arange(20)})
    ddf = dd.from_pandas(df, npartitions=2).astype({"c": "category"})
    unknown = ddf.assign(c=ddf.c.cat.as_unknown())
    with pytest.raises(ValueError, match="categories are not known"):
        sort_values(unknown, "c")


def test_sort_values_on_a_dask_dataframe(rng):
    df = frame(rng, 5000)
    ddf = dd.from_pandas(df, npartitions=5, sort=False)
    with dask.config.set(scheduler="sync"):
        out = sort_values(ddf, ["s", "f"], ascending=[True, False]).compute()
    expected = reference(df, ["s", "f"], [True, False])
    np.testing.assert_array_equal(out["row"].to_numpy(), expected["row"].to_numpy())
    np.testing.assert_array_equal(out.index.to_numpy(), expected.index.to_numpy())
    with pytest.raises(KeyError, match="nope"):
        sort_values(ddf, "nope")


# -- every partitioning, every key type: hypothesis against pandas --------------------------------


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
    pd.testing.assert_frame_equal(pd.concat(parts), reference(df, by, ascending, na_position))


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
        sort_values(ddf.assign(d=ddf.d.astype("complex128")), "d")
    with pytest.raises(KeyError, match="nope"):
        sort_values(ddf, "nope")
    with pytest.raises(ValueError, match="na_position"):
        sort_values(ddf, "k", na_position="middle")
    with pytest.raises(ValueError, match="strategy"):
        sort_values(ddf, "k", strategy="fast")
    with pytest.raises(ValueError, match="device"):
        sort_values(ddf, "k", device="tpu")
    with pytest.raises(ValueError, match=r"Length of ascending=\[True, False\] != length of by"):
        sort_values(ddf, "k", ascending=[True, False])


def test_by_names_an_index_level(rng):
    df = pd.DataFrame({"v": rng.integers(0, 5, 300), "row": np.arange(300)}, index=pd.Index(rng.integers(0, 20, 300), name="idx"))
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    got = sort_values(ddf, ["idx", "v"], ascending=[False, True]).compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, reference(df, ["idx", "v"], [False, True]))
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


@pytest.mark.parametrize("strategy", ["memory", "external", "divisions"])
def test_ignore_index_meta_is_the_partitions_own(rng, strategy, tmp_path):
    """With ignore_index the partitions are indexed by position (a range, unnamed, as pandas'):
    the lazy frame's meta says so too, not the input's index."""
    df = pd.DataFrame({"k": rng.integers(0, 9, 300), "v": np.arange(300)}, index=pd.Index(np.arange(300) * 2, name="ix"))
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    how = dict(divisions=True) if strategy == "divisions" else dict(strategy=strategy, local_directory=tmp_path)
    out = sort_values(ddf, "k", ignore_index=True, **how)
    part = out.partitions[1].compute(scheduler="sync")
    assert out._meta.index.name is None and isinstance(out._meta.index, pd.RangeIndex)
    assert part.index.name == out._meta.index.name and part.index.dtype == out._meta.index.dtype
    assert sort_values(ddf, "k", **({} if strategy == "divisions" else how))._meta.index.name == "ix"
    series = sort_series(ddf.v, ignore_index=True, **how)
    assert series._meta.index.name is None and series.partitions[0].compute(scheduler="sync").index.name is None


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
    expected = ddf.compute(scheduler="sync").sort_values("k", kind="stable").set_index("k")  # dtypes as dask holds them
    got = out.compute(scheduler="sync")
    # (pandas 3 infers "str" where it joins partitions indexed by object strings: the joined frame's
    # index dtype is pandas', each partition's is the meta's, checked below)
    pd.testing.assert_frame_equal(got, expected, check_index_type=kind != "string")
    parts = dask.compute(*out.to_delayed(), scheduler="sync")
    for p, lo, hi in zip(parts, out.divisions[:-1], out.divisions[1:]):  # each partition within its divisions
        assert len(p) and p.index[0] == lo and p.index.max() <= hi
        assert p.index.dtype == out._meta.index.dtype and (p.dtypes == out._meta.dtypes).all()
    for v in expected.index.unique()[::7]:
        assert len(out.loc[v].compute(scheduler="sync")) == (expected.index == v).sum()
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 2 * max((df.k.value_counts()).max(), 1)


@pytest.mark.parametrize("kind", ["float", "datetime", "Int64", "string"])
@pytest.mark.parametrize("share", [0.01, 0.3, 0.9])
def test_set_index_puts_missing_values_last_as_dask_does(rng, kind, share):
    """Missing keys (NaN, NaT, NA, None) all in the last partition, after its values; the divisions
    made of the values (the last one the largest); rows as pandas' stable sort; a key of missing
    values only is refused (dask's own takes it: the switch hands it over)."""
    n = int(rng.integers(2, 800))
    k = rng.integers(0, 40, n)
    gone = rng.random(n) < share
    gone[0] = False  # one value at least
    col = {
        "float": np.where(gone, np.nan, k.astype(float)),
        "datetime": pd.Series(pd.to_datetime(k, unit="h")).mask(gone),
        "Int64": pd.array(np.where(gone, None, k), dtype="Int64"),
        "string": pd.Series([f"v{x:02d}" for x in k], dtype="string").mask(gone),
    }[kind]
    df = pd.DataFrame({"k": col, "row": np.arange(n)})
    ddf = dd.from_pandas(df, npartitions=int(rng.integers(1, 7)), sort=False)
    out = set_index(ddf, "k")
    parts = dask.compute(*out.to_delayed(), scheduler="sync")
    expected = ddf.compute(scheduler="sync").sort_values("k", kind="stable").set_index("k")
    pd.testing.assert_frame_equal(pd.concat(parts), expected)
    assert out.known_divisions and not any(pd.isna(d) for d in out.divisions)
    last = len(parts) - 1
    for i, (p, lo, hi) in enumerate(zip(parts, out.divisions[:-1], out.divisions[1:])):
        values = p.index.dropna()
        assert len(values) and values[0] == lo and values.max() <= hi and (i == last or values.max() < hi)
        assert i == last or len(values) == len(p)  # missing keys only in the last partition
    nothing = dd.from_pandas(pd.DataFrame({"k": [np.nan, np.nan], "v": [1, 2]}), npartitions=2)
    with pytest.raises(ValueError, match="only missing values"):
        set_index(nothing, "k")


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


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("strategy", ["memory", "external"])
def test_keys_sorted_on_the_gpu(rng, strategy, tmp_path):
    df = frame(rng, 5000)
    ddf = dd.from_pandas(df, npartitions=5, sort=False)
    out = sort_values(ddf, ["s", "f", "i"], ascending=[True, False, True], device="gpu", strategy=strategy, local_directory=tmp_path)
    pd.testing.assert_frame_equal(out.compute(scheduler="threads"), reference(df, ["s", "f", "i"], [True, False, True]))


def test_auto_takes_the_external_sort_for_many_pieces(rng, tmp_path):
    """More slices (runs x merge groups) than dsort.dataframe.memory-pieces: "auto" takes the
    external sort (the slices read inside the merges); fewer: the in-memory one (a task each)."""
    from dsort import dataframe as D

    assert D.choose_strategy(8, 8) == "memory" and D.choose_strategy(4096, 4096) == "memory"  # slices: the threads'
    with dask.config.set({"dsort.dataframe.memory-pieces": 3}):
        assert D.choose_strategy(64, 64) == "external" and D.choose_strategy(1, 1) == "memory"
        assert D.choose_strategy(64, 64, divisions=True) == "memory"
    assert D.choose_strategy(8, 8, device="gpu") == "external" and D.choose_strategy(8, 8, True, "gpu") == "memory"
    df = pd.DataFrame({"k": rng.integers(0, 50, 2000), "row": np.arange(2000)})
    ddf = dd.from_pandas(df, npartitions=20, sort=False)
    with dask.config.set({"temporary-directory": str(tmp_path), "dsort.dataframe.memory-pieces": 3}):
        out = sort_values(ddf, "k")
        assert any(k[0].startswith("dsort-run-") for k in out.__dask_graph__() if isinstance(k, tuple))
        pd.testing.assert_frame_equal(out.compute(scheduler="threads"), df.sort_values("k", kind="stable"))
    assert [p for p in tmp_path.iterdir() if p.name.startswith("dsort-runs")] == []


@pytest.mark.parametrize(
    "device", [None, pytest.param("gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")])]
)
@pytest.mark.parametrize("index", ["permuted", "range"])
def test_fixed_width_frames_go_through_the_run_store(rng, tmp_path, device, index):
    """Frames of fixed-width columns only: rows (key bytes, row bytes) in the run store, no
    pickled blocks; the same result as pandas, index kept or positions, empty partitions too. A
    range index (each partition's a range, of a step other than 1 here) is made on the GPU there."""
    n = 3000
    df = pd.DataFrame(
        {"k": rng.integers(0, 40, n), "f": rng.choice([np.nan, 1.0, -2.5], n), "t": pd.to_datetime(rng.integers(0, 5, n), unit="D")},
        index=pd.Index(rng.permutation(n), name="ix") if index == "permuted" else pd.RangeIndex(3 * n + 5, 5, -3, name="ix"),
    )
    ddf = dd.from_pandas(df, npartitions=6, sort=False)
    ddf = ddf.map_partitions(lambda p, partition_info=None: p.iloc[:0] if partition_info["number"] in (1, 4) else p, meta=ddf._meta)
    assert isinstance(ddf.partitions[2].compute(scheduler="sync").index, pd.RangeIndex) == (index == "range")
    df = ddf.compute(scheduler="sync")
    for by, ascending, ignore_index in (("k", True, False), (["t", "f"], [False, True], True), (["f", "ix"], [True, False], False)):
        out = sort_values(
            ddf, by, ascending=ascending, strategy="external", local_directory=tmp_path, device=device, ignore_index=ignore_index
        )
        assert not any(f.name.endswith(".pickles") for f in tmp_path.rglob("*"))
        got = out.compute(scheduler="threads")
        expected = reference(df, [by] if isinstance(by, str) else by, ascending)
        if ignore_index:
            expected = expected.reset_index(drop=True)
        pd.testing.assert_frame_equal(got, expected, check_index_type=not ignore_index)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("index", ["permuted", "range", "mixed"])
def test_many_partitions_of_a_gpu_run_are_copied_there_at_once(rng, tmp_path, index):
    """All partitions in one run (``gpu-runs-per-worker`` 0): each column of them joined as it is
    copied to the GPU (over 4 MiB: through the staging pieces), a range index made there where
    every partition's is a range; the same as pandas, empty partitions too."""
    n, parts = 900_001, 11
    df = pd.DataFrame(
        {
            "k": rng.integers(0, 1000, n),
            "f": rng.choice([np.nan, 1.0, -2.5, np.inf], n),
            "t": pd.to_datetime(rng.integers(0, 5, n), unit="D"),
        },
        index=pd.Index(rng.permutation(n), name="ix") if index == "permuted" else pd.RangeIndex(0, n, name="ix"),
    )
    ddf = dd.from_pandas(df, npartitions=parts, sort=False)

    def change(p, partition_info=None):
        i = partition_info["number"]
        if i in (1, 4):
            return p.iloc[:0]
        return p.set_axis(pd.Index(p.index.to_numpy(), name="ix"), axis=0) if index == "mixed" and i == 7 else p

    ddf = ddf.map_partitions(change, meta=ddf._meta)
    df = ddf.compute(scheduler="sync")
    with dask.config.set({"dsort.scale.gpu-runs-per-worker": 0}):
        out = sort_values(ddf, ["f", "k"], ascending=[False, True], strategy="external", local_directory=tmp_path, device="gpu")
        assert len([k for k in out.__dask_graph__() if isinstance(k, tuple) and k[0].startswith("dsort-run-")]) == 1
        got = out.compute(scheduler="threads")
    pd.testing.assert_frame_equal(got, reference(df, ["f", "k"], [False, True]))


def test_divisions_stay_monotonic_with_more_partitions_than_rows():
    ddf = dd.from_pandas(pd.DataFrame({"a": [3, 1, 2]}), npartitions=1)
    out = sort_values(ddf, "a", divisions=True, npartitions=5)
    assert list(out.divisions) == sorted(out.divisions) and out.divisions[-1] == 2
    assert out.repartition(divisions=[0, 2]).compute(scheduler="sync").a.tolist() == [1, 2, 3]
    assert sort_series(ddf.a, divisions=True, npartitions=2).divisions == (0, 2, 2)


def test_set_index_of_no_rows_and_by_the_index_itself(rng):
    ddf = dd.from_pandas(pd.DataFrame({"a": range(20), "v": range(20)}), npartitions=4)
    empty = set_index(ddf[ddf.a > 100], "a")
    got = empty.compute(scheduler="sync")
    assert len(got) == 0 and got.index.name == "a" and list(got.columns) == ["v"]
    df = pd.DataFrame({"v": np.arange(300)}, index=pd.Index(rng.integers(0, 9, 300), name="ix"))
    out = set_index(dd.from_pandas(df, npartitions=3, sort=False), "ix")
    assert out.known_divisions
    pd.testing.assert_frame_equal(out.compute(scheduler="sync"), df.sort_index(kind="stable"))


def test_results_of_inputs_dask_cannot_hash_can_be_filtered(tmp_path):
    """The result names itself by its own tasks, never by hashing the input's graph (a loader
    that holds a lock cannot be hashed)."""
    import threading

    lock = threading.Lock()

    def load(i):
        with lock:
            return pd.DataFrame({"a": np.arange(10)[::-1] + 10 * i})

    ddf = dd.from_delayed([dask.delayed(load)(i) for i in range(2)], meta=load(0).iloc[:0])
    for strategy in ("memory", "external"):
        out = sort_values(ddf, "a", strategy=strategy, local_directory=tmp_path)
        assert out[out.a > 15].compute(scheduler="sync").a.tolist() == [16, 17, 18, 19]


def test_more_argument_errors_at_the_call():
    ddf = dd.from_pandas(pd.DataFrame({"a": [3, 1, 2], "b": [1, 2, 3]}), npartitions=2)
    assert sort_values(ddf, "a", ascending=0).compute(scheduler="sync").a.tolist() == [3, 2, 1]
    cases = [
        (dict(ascending="yes"), TypeError, "ascending must be a bool"),
        (dict(npartitions=2.5), ValueError, "whole number"),
        (dict(npartitions="3"), ValueError, "whole number"),
    ]
    for options, error, message in cases:
        with pytest.raises(error, match=message):
            sort_values(ddf, "a", **options)
    with pytest.raises(TypeError, match="pandas DataFrame"):
        sort_values(pd.DataFrame({"a": [1]}), "a")
    with pytest.raises(TypeError, match="use sort_series"):
        sort_values(ddf.a, "a")
    with pytest.raises(TypeError, match="sort_series sorts dask Series"):
        sort_series(ddf)
    with pytest.raises(ValueError, match="'b' is not unique"):
        sort_values(dd.from_pandas(pd.DataFrame([[1, 2]], columns=["b", "b"]), npartitions=1), "b")
    with pytest.raises(TypeError, match="column 'z' of type complex128"):
        sort_series(dd.from_pandas(pd.Series([1 + 1j], name="z"), npartitions=1))
    mixed = dd.from_pandas(pd.DataFrame({"o": pd.Series([1, "a"], dtype=object)}), npartitions=1)
    with pytest.raises(TypeError, match="column 'o': it holds values of types int, str, which do not compare"):
        sort_values(mixed, "o").compute(scheduler="sync")


def test_a_tuple_is_one_column_label():
    df = pd.DataFrame({("a", "b"): [3, 1, 2], ("a", "c"): [0, 1, 2]})
    got = sort_values(dd.from_pandas(df, npartitions=2), ("a", "b")).compute(scheduler="sync")
    pd.testing.assert_frame_equal(got, df.sort_values(("a", "b"), kind="stable"))


def test_merges_wait_for_every_parts_slices(rng):
    """Each merge depends on every part's marker (all its slices made), so a worker never runs
    its merges while another waits for its slices."""
    from dask.core import get_dependencies
    from dask.utils import key_split

    from dsort.collections import tasks as T

    d = dd.from_pandas(pd.DataFrame({"k": rng.integers(0, 99, 200)}), npartitions=4)
    out = sort_values(d, "k", npartitions=3, strategy="memory")
    graph = dict(out.__dask_graph__())
    kinds = {k: key_split(k) for k in graph}
    markers = {k for k, v in kinds.items() if v == T.SLICED}
    merges = [k for k, v in kinds.items() if v == T.MERGE]
    assert len(markers) == 4 and len(merges) == 3
    for m in merges:
        assert markers <= set(get_dependencies(graph, m))
    for k in markers:  # a marker depends on its own part's slices only: no data moves for it
        deps = get_dependencies(graph, k)
        assert len(deps) == 3 and {kinds[x] for x in deps} == {T.SLICE} and {x[2] for x in deps} == {k[1]}
    pd.testing.assert_frame_equal(out.compute(), d.compute().sort_values("k", kind="stable"))


def test_number_keys_of_partitions_whose_dtype_is_not_the_metas():
    """A partition of another dtype than the meta says (int32 under int64, an empty object one, as
    dask lets through with verify_meta=False): its keys are made at the meta's dtype, so they
    compare with the others' (they used to be words of its own width, in the wrong order)."""
    meta = pd.DataFrame({"x": np.array([], np.int64)})
    parts = [
        pd.DataFrame({"x": np.array([3, -1, 2], np.int64)}),
        pd.DataFrame({"x": np.array([0, -5], np.int32)}),
        pd.DataFrame({"x": pd.Series([], dtype=object)}),
    ]
    ddf = dd.from_delayed([dask.delayed(p) for p in parts], meta=meta, verify_meta=False)
    got = sort_values(ddf, "x", strategy="memory").compute(scheduler="sync")
    assert got["x"].tolist() == [-5, -1, 0, 2, 3]


@pytest.mark.parametrize("key", ["sum", "shifted", "index", "named"])
def test_set_index_by_a_series_or_the_index_as_pandas_does(rng, key):
    """A dask Series (an expression of columns) or the frame's own index as the key, as dask and
    pandas take one: every column stays, the index takes the key's name; divisions exact and
    Python values, as dask's."""
    df = pd.DataFrame({"x": rng.integers(0, 50, 700), "y": rng.integers(0, 7, 700), "v": np.arange(700)})
    if key == "named":
        df.index = pd.Index(rng.integers(0, 99, 700), name="ix")
    ddf = dd.from_pandas(df, npartitions=5, sort=False)
    theirs, ours = {
        "sum": (df.x + df.y, ddf.x + ddf.y),
        "shifted": ((df.x + 1).rename("x1"), (ddf.x + 1).rename("x1")),
        "index": (df.index, ddf.index),
        "named": (df.index, ddf.index),
    }[key]
    out = set_index(ddf, ours)
    expected = df.set_index(theirs).sort_index(kind="stable")
    pd.testing.assert_frame_equal(out.compute(scheduler="sync"), expected, check_index_type=False)
    assert out.known_divisions and all(type(d) is int for d in out.divisions)
    assert out.divisions[0] == expected.index[0] and out.divisions[-1] == expected.index[-1]


def test_set_index_refuses_what_dask_refuses_with_its_exceptions(rng):
    """Several keys, a frame as the key, frames in a list: dask's own exception types and messages,
    compared with dask's on the same frame; a list of one key is that key."""
    df = pd.DataFrame({"a": rng.integers(0, 9, 50), "b": rng.integers(0, 9, 50)})
    ddf = dd.from_pandas(df, npartitions=3)
    for key in (["a", "b"], ddf[["a", "b"]], [ddf.a, ddf.b]):
        with pytest.raises(Exception) as theirs:
            ddf.set_index(key)
        with pytest.raises(type(theirs.value)) as ours:
            set_index(ddf, key)
        assert str(ours.value) == str(theirs.value)
    pd.testing.assert_frame_equal(set_index(ddf, ["a"]).compute(scheduler="sync"), df.set_index("a").sort_index(kind="stable"))


def test_an_ascending_list_of_the_wrong_length_is_dasks_error():
    ddf = dd.from_pandas(pd.DataFrame({"a": [3, 1, 2], "b": [1, 2, 3]}), npartitions=2)
    with pytest.raises(ValueError) as theirs:
        ddf.sort_values(["a", "b"], ascending=[True])
    with pytest.raises(ValueError) as ours:
        sort_values(ddf, ["a", "b"], ascending=[True])
    assert str(ours.value) == str(theirs.value)


def test_dasks_own_knobs_are_accepted_and_change_nothing(rng):
    """shuffle_method, max_branch, upsample and partition_size choose dask's own machinery: a call
    written for dask runs unchanged and gives the same rows and divisions as without them."""
    df = pd.DataFrame({"k": rng.integers(0, 30, 400), "v": np.arange(400)})
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    knobs = {"shuffle_method": "tasks", "max_branch": 8, "upsample": 2.0, "partition_size": 1e6}
    plain, tuned = sort_values(ddf, "k"), sort_values(ddf, "k", **knobs)
    pd.testing.assert_frame_equal(tuned.compute(scheduler="sync"), plain.compute(scheduler="sync"))
    plain, tuned = set_index(ddf, "k"), ddf.dsort.set_index("k", **knobs)
    assert tuned.divisions == plain.divisions
    pd.testing.assert_frame_equal(tuned.compute(scheduler="sync"), plain.compute(scheduler="sync"))


@pytest.mark.parametrize("kind", ["int", "string", "datetime"])
@pytest.mark.parametrize("bounds", ["inside", "outside", "one", "empty parts"])
def test_set_index_cuts_exactly_at_the_users_divisions(rng, kind, bounds):
    """divisions=[...]: partition i holds the values in [d_i, d_i+1) (the last its upper bound too),
    values below the first boundary in the first partition, above the last in the last; empty
    partitions kept; the rows are pandas' stable sort; the divisions are the user's; nothing runs
    until the result is computed."""
    n = int(rng.integers(0, 600))
    k = rng.integers(0, 50, n)
    as_kind = {
        "int": lambda v: [int(x) for x in v],
        "string": lambda v: [f"v{x:03d}" for x in v],
        "datetime": lambda v: [pd.Timestamp(0) + pd.Timedelta(hours=int(x)) for x in v],
    }[kind]
    col = {"int": k, "string": pd.Series(as_kind(k), dtype="string"), "datetime": pd.to_datetime(k, unit="h")}[kind]
    df = pd.DataFrame({"k": col, "row": np.arange(n)})
    ddf = dd.from_pandas(df, npartitions=int(rng.integers(1, 6)), sort=False)
    points = {"inside": [0, 10, 20, 49], "outside": [5, 6, 30, 40], "one": [10, 20], "empty parts": [-5, 1, 2, 3, 200]}[bounds]
    divisions = as_kind(points)

    def no_compute(*args, **kwargs):
        raise AssertionError("a task ran while the graph was built")

    with dask.config.set(scheduler=no_compute):  # lazy, as dask's: the divisions are the user's
        out = set_index(ddf, "k", divisions=divisions)
    assert out.divisions == tuple(divisions) and out.npartitions == len(divisions) - 1
    parts = dask.compute(*out.to_delayed(), scheduler="sync")
    expected = ddf.compute(scheduler="sync").sort_values("k", kind="stable").set_index("k")
    pd.testing.assert_frame_equal(pd.concat(parts), expected, check_index_type=False)
    for i, p in enumerate(parts):
        if len(p):
            assert i == 0 or p.index.min() >= divisions[i], (i, p.index.min())
            assert i == len(parts) - 1 or p.index.max() < divisions[i + 1], (i, p.index.max())


def test_set_index_sorted_sort_and_append_are_dasks_own(rng):
    """sorted=True (the column already in order: nothing moved), sort=False and append=True
    are dask's own answers; npartitions with sorted=True and unsorted divisions are refused in
    dask's words; a list of one Series is that Series."""
    df = pd.DataFrame({"k": np.arange(100), "v": rng.integers(0, 9, 100)})
    ddf = dd.from_pandas(df, npartitions=4)
    for kwargs in ({"sorted": True}, {"sorted": True, "divisions": [0, 30, 50, 70, 99]}, {"sort": False}, {"append": True}):
        ours, theirs = set_index(ddf, "k", **kwargs), ddf.set_index("k", **kwargs)
        assert ours.divisions == theirs.divisions, kwargs
        pd.testing.assert_frame_equal(ours.compute(scheduler="sync"), theirs.compute(scheduler="sync"))
    for kwargs in ({"sorted": True, "npartitions": 2}, {"divisions": [5, 3]}, {"divisions": [1, 1, 2]}):
        with pytest.raises(ValueError) as theirs:
            ddf.set_index("v", **kwargs)
        with pytest.raises(ValueError) as ours:
            set_index(ddf, "v", **kwargs)
        assert str(ours.value) == str(theirs.value)


def test_sort_function_sorts_each_output_partition_as_dasks_does(rng):
    """sort_function and sort_function_kwargs: each output partition goes through the function
    with dask's keywords (by as a list, ascending, na_position, ignore_index, then the user's)."""
    df = pd.DataFrame({"k": rng.integers(0, 20, 300), "v": rng.integers(0, 5, 300)})
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    seen = []

    def by_v_within(part, **kwargs):
        seen.append(sorted(kwargs))
        return part.sort_values(["v", *kwargs["by"]], kind="stable")

    out = sort_values(ddf, "k", sort_function=by_v_within).compute(scheduler="sync")
    assert seen and all(s == ["ascending", "by", "ignore_index", "na_position"] for s in seen)
    merged = sort_values(ddf, "k").compute(scheduler="sync")
    assert sorted(out.index) == sorted(merged.index) and out.k.max() == merged.k.max()
    parts = dask.compute(*sort_values(ddf, "k", sort_function=by_v_within).to_delayed(), scheduler="sync")
    assert all(p.v.is_monotonic_increasing for p in parts)  # within each partition, the function's order
    down = sort_values(ddf, "k", sort_function_kwargs={"ascending": False}).compute(scheduler="sync")
    for p in dask.compute(*sort_values(ddf, "k", sort_function_kwargs={"ascending": False}).to_delayed(), scheduler="sync"):
        assert p.k.is_monotonic_decreasing
    assert len(down) == len(df)


CASES_IN_ORDER = ["sorted", "sorted strings", "by the index", "tie across partitions", "an empty partition", "one unsorted"]


@pytest.mark.parametrize("case", CASES_IN_ORDER)
def test_set_index_of_data_in_order_moves_nothing(rng, case):
    """Partitions already in order (each sorted, each last value below the next first, none empty,
    nothing missing): indexed where they are, as dask does, in one task per partition after one
    pass over the key; otherwise sorted. Either way pandas' answer and exact divisions."""
    n = 1000
    k = np.sort(rng.integers(0, 10**6, n))
    k = np.unique(k) if case != "tie across partitions" else k
    n = len(k)
    if case == "tie across partitions":
        k[n // 10 - 1 : n // 10 + 1] = k[n // 10 - 1]  # the first partition's last value starts the second
    if case == "one unsorted":
        k[[5, 6]] = k[[6, 5]]
    col = pd.Series([f"{v:07d}" for v in k], dtype="string") if case == "sorted strings" else k
    df = pd.DataFrame({"k": col, "row": np.arange(n)})
    ddf = dd.from_pandas(df, npartitions=10, sort=False)
    if case == "an empty partition":
        ddf = ddf.map_partitions(lambda p, partition_info=None: p.iloc[:0] if partition_info["number"] == 3 else p, meta=ddf._meta)
    if case == "by the index":
        ddf = ddf.set_index("row", sorted=True)  # an index in order: set_index by its name
    key = "row" if case == "by the index" else "k"
    out = set_index(ddf, key)
    moved = built_by_dsort(out)
    assert moved == (case in ("tie across partitions", "an empty partition", "one unsorted")), case
    if not moved:
        assert out.npartitions == ddf.npartitions and len(dict(out.__dask_graph__())) <= 3 * ddf.npartitions
    source = ddf.compute(scheduler="sync")
    expected = source.sort_index(kind="stable") if key == "row" else source.sort_values(key, kind="stable").set_index(key)
    pd.testing.assert_frame_equal(out.compute(scheduler="sync"), expected)
    assert out.known_divisions
    for p, lo, hi in zip(dask.compute(*out.to_delayed(), scheduler="sync"), out.divisions[:-1], out.divisions[1:]):
        assert len(p) and p.index[0] == lo and p.index[-1] <= hi


@pytest.mark.parametrize("ordered", [True, False])
def test_set_index_of_a_categorical_goes_in_category_order(rng, ordered):
    """Categories out of their values' lexical order: sorted, and divided, in the categories' order,
    as pandas sorts and dask divides them; user divisions in that order refused as dask does."""
    cats = ["lo", "mid", "hi", "absent"]
    df = pd.DataFrame({"c": pd.Categorical(rng.choice(cats[:3], 400), categories=cats, ordered=ordered), "row": np.arange(400)})
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    out = set_index(ddf, "c")
    expected = df.sort_values("c", kind="stable").set_index("c")
    pd.testing.assert_frame_equal(out.compute(scheduler="sync"), expected)
    codes = {c: i for i, c in enumerate(cats)}
    assert out.known_divisions and [codes[d] for d in out.divisions] == sorted(codes[d] for d in out.divisions)
    for p, lo in zip(dask.compute(*out.to_delayed(), scheduler="sync"), out.divisions[:-1]):
        assert len(p) and p.index[0] == lo
    with pytest.raises(ValueError) as theirs:  # dask checks the user's divisions by value, and so refuses these
        ddf.set_index("c", divisions=["lo", "mid", "hi"])
    with pytest.raises(ValueError) as ours:
        set_index(ddf, "c", divisions=["lo", "mid", "hi"])
    assert str(ours.value) == str(theirs.value)


def test_set_index_cut_two_ways_gives_two_results(rng):
    """The same frame indexed with the user's divisions and with dsort's own cuts, as many partitions
    each: two results under two names (one found for the other would cut in the wrong places)."""
    df = pd.DataFrame({"k": rng.integers(0, 100, 400), "row": np.arange(400)})
    ddf = dd.from_pandas(df, npartitions=4, sort=False)
    mine, theirs = set_index(ddf, "k", divisions=[0, 10, 99]), set_index(ddf, "k", npartitions=2)
    assert mine._name != theirs._name
    for out in (mine, theirs):
        parts = dask.compute(*out.to_delayed(), scheduler="sync")
        assert parts[1].index.min() >= out.divisions[1] > parts[0].index.max()


def test_set_index_by_its_own_index_or_an_expression_that_moves_it(rng):
    """An expression of the index whose values move (a day later, the day it falls in: dask gives
    it other divisions, or none) sorts as pandas' stable sort of the frame indexed by it; under the
    drop-in, ``set_index(ddf.index)`` is the frame itself, as dask gives it."""
    stamps = pd.date_range("2024-01-01", periods=300, freq="7h")[rng.permutation(300)]
    pdf = pd.DataFrame({"v": np.arange(300)}, index=pd.Index(stamps, name="t"))
    ddf = dd.from_pandas(pdf, npartitions=5, sort=True)
    import dsort

    with dsort.enabled():
        assert ddf.set_index(ddf.index) is ddf
    df = ddf.compute(scheduler="sync")
    for key, local in ((ddf.index + pd.Timedelta(days=1), df.index + pd.Timedelta(days=1)), (ddf.index.dt.floor("D"), df.index.floor("D"))):
        out = set_index(ddf, key)
        assert out.known_divisions
        want = df.set_index(local).sort_index(kind="stable")
        pd.testing.assert_frame_equal(out.compute(scheduler="sync"), want)


@pytest.mark.parametrize("strategy", ["memory", "external"])
def test_object_columns_of_arrays_travel_between_worker_processes(rng, tmp_path, strategy):
    """A list column as pandas reads one from Parquet (an object column of NumPy arrays) beside a
    dict column: the partitions, slices and merge results that move between worker processes
    carry the arrays through Arrow (dsort-wire tasks where each partition is made), and the
    result is pandas' stable sort, each array of its own dtype."""
    distributed = pytest.importorskip("distributed")
    n = 3000
    arrays = np.empty(n, dtype=object)
    for i in range(n):
        arrays[i] = None if i % 11 == 0 else np.arange(i % 4, dtype=np.int32)
    df = pd.DataFrame({"k": rng.integers(0, 30, n), "a": arrays, "d": pd.Series([{"i": i % 3} for i in range(n)], dtype=object)})
    with (
        dask.config.set({"dataframe.convert-string": False}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster),
    ):
        ddf = dd.from_pandas(df, npartitions=6, sort=False)
        out = sort_values(ddf, "k", strategy=strategy, local_directory=tmp_path)
        assert any(isinstance(k, tuple) and k[0].startswith("dsort-wire-") for k in out.__dask_graph__())
        got = out.compute()
    want = df.sort_values("k", kind="stable")
    pd.testing.assert_frame_equal(got, want)
    assert all(x is None if y is None else (x.dtype == np.int32 and np.array_equal(x, y)) for x, y in zip(got["a"], want["a"]))
