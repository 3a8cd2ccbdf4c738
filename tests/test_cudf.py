"""dask-cudf frames (cudf partitions in GPU memory) sorted where they live (issue 28): the result
keeps cudf partitions, balanced, and equals pandas' stable sort of the same rows. These tests need
cudf and dask-cudf and a GPU (the device machine: scripts/device-cudf); elsewhere they skip, saying
why. Without cudf, a pandas frame's sort never imports it."""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from .conftest import HAS_GPU

needs_cudf = pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")


def _cudf():
    cudf = pytest.importorskip("cudf", reason="cudf is not installed (pip install 'dsort[cudf]')")
    dask_cudf = pytest.importorskip("dask_cudf", reason="dask-cudf is not installed (pip install 'dsort[cudf]')")
    return cudf, dask_cudf


def _frame(rng, n, dup=50):
    """Keys with many duplicates, NaN and infinities among the floats, every fixed-width kind."""
    f = rng.normal(size=n)
    f[rng.random(n) < 0.1] = np.nan
    f[rng.random(n) < 0.02] = np.inf
    f[rng.random(n) < 0.02] = -np.inf
    return pd.DataFrame(
        {
            "k": rng.integers(0, dup, n),
            "f": f,
            "i32": rng.integers(-5, 5, n).astype(np.int32),
            "b": rng.random(n) < 0.5,
            "t": pd.to_datetime(rng.integers(0, 10**6, n), unit="s"),
            "v": np.arange(n),
        },
        index=pd.Index(rng.permutation(n), name="ix"),
    )


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize(
    "by,ascending,na_position",
    [("k", True, "last"), ("f", False, "first"), (["b", "f"], [True, False], "last"), (["t", "i32"], True, "first"), ("v", False, "last")],
)
@pytest.mark.parametrize("n,parts,out", [(0, 1, 1), (1, 1, 1), (7, 2, 9), (5_000, 7, 7), (20_011, 16, 5), (3_000, 3, 9)])
def test_sort_values_equals_pandas_and_keeps_cudf_partitions(rng, by, ascending, na_position, n, parts, out):
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    pdf = _frame(rng, n)
    gdf = dask_cudf.from_cudf(cudf.from_pandas(pdf, nan_as_null=False), npartitions=parts, sort=False)
    res = dd_sort.sort_values(gdf, by, ascending=ascending, na_position=na_position, npartitions=out)
    assert type(res._meta).__module__.startswith("cudf")
    got = res.compute()
    assert type(got).__module__.startswith("cudf")
    assert not any(got[c].has_nulls for c in got.columns), "NaN came back as null"
    want = pdf.sort_values(by, ascending=ascending, na_position=na_position, kind="stable")
    pd.testing.assert_frame_equal(got.to_pandas(), want)
    sizes = res.map_partitions(len).compute().to_numpy() if n else np.zeros(1)
    assert res.npartitions == out and sizes.max() - sizes.min() <= 1


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("parts,out", [(6, None), (40, 40), (9, 70)])
def test_accessor_and_ignore_index(rng, parts, out):
    """Also with many outputs to each merge group (made apart by the merge): positions run on
    across them, every output balanced."""
    import dsort  # noqa: F401  (the accessor)

    cudf, dask_cudf = _cudf()
    pdf = _frame(rng, 4_000, dup=7)
    gdf = dask_cudf.from_cudf(cudf.from_pandas(pdf, nan_as_null=False), npartitions=parts, sort=False)
    res = gdf.dsort.sort_values("k", ignore_index=True, npartitions=out)
    got = res.compute().to_pandas()
    want = pdf.sort_values("k", kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(got, want, check_index_type=False)
    sizes = res.map_partitions(len).compute().to_numpy()
    assert len(sizes) == (out or parts) and sizes.max() - sizes.min() <= 1


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("ascending,na_position", [(True, "last"), (False, "first")])
def test_sort_series_keeps_a_cudf_series(rng, ascending, na_position):
    """A dask-cudf series sorts by its values as pandas' stable sort_values (index labels and name
    kept, NaN where na_position says) and stays a dask-cudf series; sort_values refuses it,
    naming sort_series."""
    import dsort.dataframe as dd_sort
    from dsort.core.errors import UnsupportedType

    cudf, dask_cudf = _cudf()
    pdf = _frame(rng, 3_000, dup=9)
    gs = dask_cudf.from_cudf(cudf.from_pandas(pdf, nan_as_null=False), npartitions=5, sort=False)["f"]
    res = dd_sort.sort_series(gs, ascending=ascending, na_position=na_position, npartitions=3)
    assert type(res._meta).__module__.startswith("cudf") and res.npartitions == 3
    got = res.compute().to_pandas()
    pd.testing.assert_series_equal(got, pdf["f"].sort_values(ascending=ascending, na_position=na_position, kind="stable"))
    with pytest.raises(UnsupportedType, match="use sort_series"):
        dd_sort.sort_values(gs, "f")


@pytest.mark.gpu
@needs_cudf
def test_refusals_name_the_problem(rng):
    import dsort.dataframe as dd_sort
    from dsort.core.errors import UnsupportedType

    cudf, dask_cudf = _cudf()
    pdf = _frame(rng, 100)
    gdf = dask_cudf.from_cudf(cudf.from_pandas(pdf, nan_as_null=False), npartitions=2, sort=False)
    lists = cudf.DataFrame({"l": cudf.Series([[1, 2], [0]]), "v": [1, 2]})
    with pytest.raises(UnsupportedType, match="column 'l' of type list"):  # at the call, before any work
        dd_sort.sort_values(dask_cudf.from_cudf(lists, npartitions=1), "l")
    with pytest.raises(KeyError, match="no column"):
        dd_sort.sort_values(gdf, "nope")


def test_pandas_sorts_never_import_cudf():
    """cudf is imported only when a cudf frame arrives: a pandas frame's sort, both strategies."""
    code = (
        "import sys, numpy as np, pandas as pd, dask.dataframe as dd, dsort.dataframe as d\n"
        "df = dd.from_pandas(pd.DataFrame({'k': np.arange(1000)[::-1], 'v': np.arange(1000)}), npartitions=4)\n"
        "for s in ('memory', 'external'):\n"
        "    assert d.sort_values(df, 'k', strategy=s).compute()['k'].is_monotonic_increasing\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('cudf', 'dask_cudf')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("host_budget", ["1KiB", "64KiB"])
def test_runs_beyond_the_gpus_share_go_to_host_memory_and_files(rng, tmp_path, host_budget):
    """A dask-cudf frame bigger than the GPU memory the runs may use (here none: the share at 0)
    sorts through runs in host memory (none fit in 1 KiB) and then files, nothing lost, the files removed after."""
    import dask

    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    pdf = _frame(rng, 30_000)
    gdf = dask_cudf.from_cudf(cudf.from_pandas(pdf, nan_as_null=False), npartitions=12, sort=False)
    with dask.config.set({"dsort.runs.shared-gpu-fraction": 0}):
        got = dd_sort.sort_values(gdf, ["b", "f"], local_directory=tmp_path, memory_limit=host_budget).compute()
    want = pdf.sort_values(["b", "f"], kind="stable")
    pd.testing.assert_frame_equal(got.to_pandas(), want)
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "runs left behind"


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("na_position", ["last", "first"])
def test_nulls_sort_as_pandas_missing_values_and_come_back(rng, na_position):
    """Nulls in cudf columns (keys and not) sort as pandas' missing values do (by na_position,
    stable among themselves, both directions) and come back as nulls, NaN staying NaN."""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    n = 6_000
    pdf = pd.DataFrame(
        {
            "I": pd.array(rng.integers(-5, 5, n), dtype="Int64"),
            "F": pd.array(rng.choice([-1.5, 0.0, 2.25, np.inf], n), dtype="Float64"),
            "B": pd.array(rng.random(n) < 0.5, dtype="boolean"),
            "t": pd.to_datetime(rng.integers(0, 50, n), unit="D"),
            "v": np.arange(n),
        }
    )
    for c in ("I", "F", "B", "t"):
        pdf.loc[rng.random(n) < 0.2, c] = pd.NaT if c == "t" else pd.NA
    g = cudf.from_pandas(pdf, nan_as_null=False).astype({"I": "int64", "F": "float64", "B": "bool"})  # NumPy dtypes, nulls kept
    gdf = dask_cudf.from_cudf(g, npartitions=5, sort=False)
    for by, ascending in ((["I"], True), (["F", "I"], [False, True]), (["B", "t"], [True, False])):
        got = dd_sort.sort_values(gdf, by, ascending=ascending, na_position=na_position, npartitions=4).compute()
        back = pd.DataFrame({c: got[c].to_pandas(nullable=c in "IFB") for c in got.columns})  # datetimes: NaT; v has no nulls
        back.index = got.index.to_pandas()
        want = pdf.sort_values(by, ascending=ascending, na_position=na_position, kind="stable")
        pd.testing.assert_frame_equal(back, want, check_index_type=False)


def _other_types(cudf, rng, n):
    """A cudf frame of the columns the GPU-side rows cannot hold (strings with nulls, empty and
    non-ASCII ones; a categorical with known categories and nulls; decimals; pandas' nullable
    integers), beside a float with NaN: ``(cudf frame, the same rows as pandas)``."""
    import decimal

    import pyarrow as pa

    words = np.array(["", "a", "a\x00", "ab", "b", "é", "ß", "z" * 40, "Zebra", "mid"], dtype=object)
    s = words[rng.integers(0, len(words), n)]
    s[rng.random(n) < 0.1] = None
    cats = pd.Categorical.from_codes(rng.integers(-1, 4, n), categories=["lo", "mid", "hi", "top"])  # -1: missing
    d = [None if r < 0.1 else decimal.Decimal(int(x)).scaleb(-2) for r, x in zip(rng.random(n), rng.integers(-50_000, 50_000, n))]
    i = pd.array(rng.integers(-3, 3, n), dtype="Int64")
    i[rng.random(n) < 0.15] = pd.NA
    f = rng.choice([-1.0, 0.0, 2.5, np.nan], n)
    g = cudf.DataFrame(
        {
            "s": cudf.Series(s.tolist(), dtype="str"),
            "c": cudf.Series(cats),
            "d": cudf.Series(pa.array(d, pa.decimal128(12, 2))).astype(cudf.Decimal64Dtype(12, 2)),
            "i": cudf.from_pandas(pd.Series(i)),
            "f": cudf.Series(f, nan_as_null=False),
            "v": np.arange(n),
        }
    )
    g.index = cudf.Index(rng.permutation(n), name="ix")
    return g, _as_pandas(g)


def _as_pandas(g) -> pd.DataFrame:
    """A cudf frame as pandas, its decimals as Arrow's 128-bit decimals (pandas sorts those, not
    the 32- and 64-bit ones)."""
    import pyarrow as pa

    def plain(p):  # cudf gives pandas' str or string dtype by the column's history: compared as objects, None missing
        if pd.api.types.is_string_dtype(p.dtype) and not isinstance(p.dtype, pd.CategoricalDtype):
            values = np.array([None if pd.isna(x) else x for x in p], dtype=object)
            return pd.Index(values, name=p.name, dtype=object) if isinstance(p, pd.Index) else pd.Series(values, p.index, object, p.name)
        return p

    def column(s):
        if "Decimal" not in type(s.dtype).__name__:
            return plain(s.to_pandas())
        return s.to_pandas(arrow_type=True).astype(pd.ArrowDtype(pa.decimal128(s.dtype.precision, s.dtype.scale)))

    out = pd.DataFrame({c: column(g[c]) for c in g.columns})
    out.index = plain(g.index.to_pandas())
    return out


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize(
    "by,ascending,na_position",
    [
        ("s", True, "last"),
        (["c", "s"], [False, True], "first"),
        ("d", False, "last"),
        (["i", "d"], True, "first"),
        (["f", "s", "i"], [True, False, True], "last"),
    ],
)
@pytest.mark.parametrize("n,parts,out", [(0, 1, 1), (1, 1, 1), (7, 2, 9), (3_000, 5, 3), (6_001, 7, 11)])
@pytest.mark.parametrize("strategy", ["external", "auto"])  # auto: in memory, for these columns
def test_other_column_types_sort_as_pandas_and_stay_cudf(rng, by, ascending, na_position, n, parts, out, strategy):
    """Strings, categoricals, decimals and nullable integers (keys and not): the keys encoded from
    the key columns, the rows gathered by cudf; equal to pandas' stable sort of the same rows,
    nulls last or first, every partition cudf, balanced."""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    g, pdf = _other_types(cudf, rng, n)
    gdf = dask_cudf.from_cudf(g, npartitions=parts, sort=False)
    res = dd_sort.sort_values(gdf, by, ascending=ascending, na_position=na_position, npartitions=out, strategy=strategy)
    got = res.compute()
    assert type(got).__module__.startswith("cudf") and str(got["c"].dtype) == "category"
    want = pdf.sort_values(by, ascending=ascending, na_position=na_position, kind="stable")
    pd.testing.assert_frame_equal(_as_pandas(got), want)
    sizes = res.map_partitions(len).compute().to_numpy() if n else np.zeros(1)
    assert res.npartitions == out and sizes.max() - sizes.min() <= 1


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("numbers", [False, True])
def test_divisions_known_by_position(rng, numbers):
    """divisions=True (the in-memory sort): positions as the index, the divisions where each
    partition starts, and loc finds rows by them; a frame of numbers only too."""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    if numbers:
        pdf = _frame(rng, 4_000, dup=11)
        g = cudf.from_pandas(pdf, nan_as_null=False)
    else:
        g, pdf = _other_types(cudf, rng, 4_000)
    by = "f" if numbers else ["s", "v"]
    res = dd_sort.sort_values(dask_cudf.from_cudf(g, npartitions=6, sort=False), by, divisions=True, npartitions=4)
    assert res.known_divisions and res.divisions[0] == 0 and res.divisions[-1] == len(pdf) - 1
    want = pdf.sort_values(by, kind="stable", ignore_index=True)
    pd.testing.assert_frame_equal(_as_pandas(res.compute()), want, check_index_type=False)
    row = int(res.divisions[2]) + 3
    pd.testing.assert_frame_equal(_as_pandas(res.loc[row:row].compute()), want.iloc[row : row + 1], check_index_type=False)


@pytest.mark.gpu
@needs_cudf
def test_other_types_beyond_memory_leave_nothing(rng, tmp_path):
    """With a GPU limit the general path sorts externally: its rows go through files under
    local_directory (keys in 1 KiB of host memory: none fit), nothing lost, every file removed
    after; a series of strings too."""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    g, pdf = _other_types(cudf, rng, 20_000)
    gdf = dask_cudf.from_cudf(g, npartitions=9, sort=False)
    options = dict(local_directory=tmp_path, memory_limit="1KiB", device_memory_limit="1MiB", npartitions=5)
    got = dd_sort.sort_values(gdf, ["s", "d"], **options).compute()
    pd.testing.assert_frame_equal(_as_pandas(got), pdf.sort_values(["s", "d"], kind="stable"))
    assert not [p for p in tmp_path.rglob("*") if p.is_file()], "runs left behind"
    got = _as_pandas(dd_sort.sort_series(gdf["s"], ascending=False, npartitions=3).compute().to_frame())["s"]
    want = pdf["s"].sort_values(ascending=False, kind="stable")
    assert [None if pd.isna(x) else x for x in got] == [None if pd.isna(x) else x for x in want]
    np.testing.assert_array_equal(got.index.to_numpy(), want.index.to_numpy())


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("key", ["s", "f", "i", "v"])
@pytest.mark.parametrize("parts,out", [(5, None), (7, 3), (2, 6)])
def test_set_index_of_a_cudf_frame_has_known_divisions(rng, key, parts, out):
    """set_index by a column of strings, floats with NaN, nullable integers or unique integers:
    pandas' stable sort by it, indexed by it, missing values last (in the last partition); the
    divisions known and every partition's values within its own."""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    g, pdf = _other_types(cudf, rng, 3_000)
    res = dd_sort.set_index(dask_cudf.from_cudf(g, npartitions=parts, sort=False), key, npartitions=out)
    assert res.known_divisions and type(res._meta).__module__.startswith("cudf")
    want = pdf.sort_values(key, kind="stable").set_index(key)
    pd.testing.assert_frame_equal(_as_pandas(res.compute()), want, check_index_type=False)
    div = res.divisions
    for i in range(res.npartitions):
        index = _as_pandas(res.partitions[i].compute()).index
        present = index[index.notna()]
        last = i == res.npartitions - 1
        assert all(div[i] <= x and (x <= div[i + 1] if last else x < div[i + 1]) for x in present), (i, div)
        assert last or len(present) == len(index), "missing values before the last partition"


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("na_position", ["last", "first"])
@pytest.mark.parametrize(
    "by,ascending", [(["s", "v"], True), (["c", "d", "v"], [False, True, True]), (["i", "s", "v"], [True, False, False])]
)
def test_equals_cudfs_own_sort_of_the_whole_frame(rng, by, ascending, na_position):
    """Against cudf's own sort_values of the whole frame (a unique last key, so that its order
    is one whatever its stability): strings, categoricals, decimals and integers with nulls.
    (Floats are left out: cudf orders NaN as a value above every number, pandas and dsort as a
    missing value, by na_position.)"""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    g, _ = _other_types(cudf, rng, 5_000)
    gdf = dask_cudf.from_cudf(g, npartitions=6, sort=False)
    got = dd_sort.sort_values(gdf, by, ascending=ascending, na_position=na_position, npartitions=4).compute()
    want = g.sort_values(by, ascending=ascending, na_position=na_position)
    pd.testing.assert_frame_equal(_as_pandas(got), _as_pandas(want))


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("by,ascending,na_position", [(["k", "v"], True, "last"), (["t", "b", "v"], [False, True, True], "first")])
def test_numbers_equal_cudfs_own_sort(rng, by, ascending, na_position):
    """The frame of numbers, booleans and datetimes (its rows kept on the GPU as bytes) against
    cudf's own sort_values of the whole frame, with a unique last key."""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    g = cudf.from_pandas(_frame(rng, 5_000, dup=20), nan_as_null=False)
    got = dd_sort.sort_values(dask_cudf.from_cudf(g, npartitions=6, sort=False), by, ascending=ascending, na_position=na_position)
    pd.testing.assert_frame_equal(got.compute().to_pandas(), g.sort_values(by, ascending=ascending, na_position=na_position).to_pandas())


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("how", ["sort_values", "set_index"])
def test_an_index_key_with_nulls_in_some_partitions_and_unknown_categories(rng, how):
    """By an integer index level whose nulls lie in some partitions only (each partition's keys
    encoded alike: as integers, not as floats where a partition has nulls), beside a string column
    and a categorical column of categories dask does not know: its values come back, none null."""
    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    n = 4_000
    ix = pd.array(rng.integers(-(2**60), 2**60, n), dtype="Int64")  # beyond 2^53: floats would round them
    ix[: n // 8] = pd.NA  # the first partitions only
    pdf = pd.DataFrame({"s": [f"w{v % 97}" for v in range(n)], "v": np.arange(n)}, index=pd.Index(ix, name="ix"))
    gdf = dask_cudf.from_cudf(cudf.from_pandas(pdf), npartitions=8, sort=False)
    gdf = gdf.assign(c=gdf["s"].astype("category"))  # dask's meta: categories unknown
    want = pdf.assign(c=pdf["s"].astype("category")).sort_values("ix", kind="stable")
    if how == "sort_values":
        got = dd_sort.sort_values(gdf, "ix", npartitions=5).compute().to_pandas()
    else:
        res = dd_sort.set_index(gdf, "ix", npartitions=5)
        assert res.known_divisions
        got = res.compute().to_pandas()
    assert [None if pd.isna(x) else int(x) for x in got.index] == [None if pd.isna(x) else int(x) for x in want.index]
    np.testing.assert_array_equal(got["v"].to_numpy(), want["v"].to_numpy())
    assert got["c"].notna().all() and (got["c"].astype(str).to_numpy() == want["s"].to_numpy()).all()


@pytest.mark.gpu
@needs_cudf
@pytest.mark.parametrize("convert_string", [True, False])
@pytest.mark.parametrize("by", ["f", "s"])
@pytest.mark.parametrize("n,parts,out", [(0, 1, 1), (1, 1, 2), (3_000, 5, 3)])
@pytest.mark.parametrize("strategy", ["external", "memory", "auto"])
def test_a_sort_gives_back_the_dtypes_it_was_given(rng, by, n, parts, out, strategy, convert_string):
    """Dtypes in, dtypes out (issue 43): string columns made four ways (cudf's ``str``, from
    pandas' ``string``, from pandas' object strings, numbers cast to strings), which cudf turns
    into pandas' ``str`` or ``string`` by their history, come back as the collection's partitions
    hold them (dask's ``dataframe.convert-string`` makes them ``string`` as the frame becomes a
    collection; without it they stay as they were made), as dask-cudf's own sort gives them back
    and as they convert to pandas; every other column too, and the rows are pandas'."""
    import dask

    import dsort.dataframe as dd_sort

    cudf, dask_cudf = _cudf()
    g, _ = _other_types(cudf, rng, n)
    words = [None if r < 0.1 else f"w{x}" for r, x in zip(rng.random(n), rng.integers(0, 30, n))]
    g["s_string"] = cudf.from_pandas(pd.Series(words, dtype="string"))
    g["s_object"] = cudf.from_pandas(pd.Series(words, dtype=object))
    g["s_cast"] = g["v"].astype(str)
    with dask.config.set({"dataframe.convert-string": convert_string}):
        gdf = dask_cudf.from_cudf(g, npartitions=parts, sort=False)
        given = gdf.compute()
        got = dd_sort.sort_values(gdf, by, npartitions=out, strategy=strategy).compute()
        theirs = gdf.sort_values(by).compute() if n else given
    assert type(got).__module__.startswith("cudf")
    for c in g.columns:
        want = (str(given[c].dtype), str(theirs[c].dtype), given[c].to_pandas().dtype)
        assert (str(got[c].dtype), str(got[c].dtype), got[c].to_pandas().dtype) == want, (c, got[c].dtype, want)
    if not convert_string:
        assert [str(given[c].dtype) for c in g.columns] == [str(d) for d in g.dtypes]  # the premise: kept as made
    assert got.index.to_pandas().dtype == given.index.to_pandas().dtype
    pd.testing.assert_frame_equal(_as_pandas(got), _as_pandas(given).sort_values(by, kind="stable"))
