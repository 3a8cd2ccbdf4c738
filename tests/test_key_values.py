"""Key values at the edges of what pandas holds, against pandas' stable sort: a nullable or Arrow
float's NaN (a value there, not a missing one), lone surrogates in strings, and object columns of
numbers (sorted) or of values that do not compare, in one partition or across partitions (refused,
as pandas refuses them)."""

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from .conftest import HAS_GPU
from .frame_cases import built_by_dsort, reference
from dsort.core.errors import Incomparable, UnsupportedType
from dsort.core.frame_keys import KeySpec, encode_keys, join_kinds
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


def _same(got, expected) -> bool:
    """The same values, of the same types (NaN equal to NaN, -0.0 apart from 0): what a sort's
    output must hold of its input's (pickled by the external sort)."""
    return [(type(v), repr(v)) for v in got] == [(type(v), repr(v)) for v in expected]


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


SURROGATES = ["\ud800", "\udfff", "\ud83d\ude00", "\ud7ff", "\ue000", "\U0001f600", "é", "a", "b", "\x00", ""]


def _strings(rng, n):
    """Object strings of 0 to 3 characters, lone surrogates among ASCII and other characters, some None or NaN."""
    values = np.array(["".join(rng.choice(SURROGATES, int(k))) for k in rng.integers(0, 4, n)], dtype=object)
    values[rng.random(n) < 0.1] = None
    values[rng.random(n) < 0.05] = np.nan
    return pd.Series(values, dtype=object)


def test_lone_surrogates_key_in_code_point_order(rng):
    """An object column (or pandas' Python-stored strings) with lone surrogates keys as pandas sorts
    it (by code point); the widths count their UTF-8 bytes (three a surrogate)."""
    n = 400
    df = pd.DataFrame({"k": _strings(rng, n), "j": rng.integers(0, 3, n), "row": np.arange(n)})
    python = df.assign(k=df["k"].astype("string[python]"))
    for frame in (df, python):
        spec = KeySpec.of(frame.iloc[:0], ["k"])
        assert spec.widths(frame) == (max(len(v.encode("utf-8", "surrogatepass")) for v in frame["k"].dropna()),)
        for ascending, na_position in ORDERS:
            expected = frame.sort_values("k", ascending=ascending, na_position=na_position, kind="stable")["row"].to_numpy()
            np.testing.assert_array_equal(frame["row"].to_numpy()[_order(encode_keys(frame, "k", ascending, na_position))], expected)
            keys = encode_keys(frame, ["j", "k"], [False, ascending], na_position)
            expected = reference(frame, ["j", "k"], [False, ascending], na_position)["row"].to_numpy()
            np.testing.assert_array_equal(frame["row"].to_numpy()[_order(keys)], expected)


@pytest.mark.parametrize("strategy", ["memory", "external"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_lone_surrogates_sort_as_pandas(rng, strategy, layout, tmp_path):
    """Through dask (object columns kept: dask's conversion to Arrow strings would fail on them),
    the rows come back with their own values; sort_series and set_index too. pandas' Arrow-backed
    ``str`` of the other strings sorts as before."""
    n = 240
    df = pd.DataFrame({"k": _strings(rng, n), "row": np.arange(n)})
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = _dask(df, layout)
        df = ddf.compute(scheduler="sync")
        for ascending, na_position in [(True, "last"), (False, "first")]:
            out = sort_values(ddf, "k", ascending=ascending, na_position=na_position, strategy=strategy, local_directory=tmp_path)
            got = out.compute(scheduler="sync")
            expected = df.sort_values("k", ascending=ascending, na_position=na_position, kind="stable")
            assert got["row"].tolist() == expected["row"].tolist()
            assert got["k"].dtype == object and _same(got["k"], expected["k"])  # the values themselves
        got = sort_series(ddf["k"], ascending=False, strategy=strategy, local_directory=tmp_path).compute(scheduler="sync")
        # the frame's sort as the reference: pandas' Series.sort_values infers str for the result, and fails
        assert got.index.tolist() == df.sort_values("k", ascending=False, kind="stable").index.tolist()
        if strategy == "memory":
            out = set_index(ddf, "k")
            parts = dask.compute(*out.to_delayed(), scheduler="sync")  # each part's index of objects (pandas' concat would infer str)
            expected = df.sort_values("k", kind="stable")
            assert [r for p in parts for r in p["row"]] == expected["row"].tolist() and not pd.isna(list(out.divisions)).any()
    plain = df.dropna().assign(k=lambda d: d["k"].map(lambda v: v.encode("utf-8", "surrogatepass").decode("utf-8", "replace")))
    strs = _dask(plain.astype({"k": "str"}), layout)
    got = sort_values(strs, "k", ascending=False, strategy=strategy, local_directory=tmp_path)
    assert _rows(got) == strs.compute(scheduler="sync").sort_values("k", ascending=False, kind="stable")["row"].tolist()


def _numbers(rng, n):
    """Object numbers as pandas holds them after a concat: ints, floats, bools, NumPy's, ints near
    2**53 (which one float64 stands for) and 2**64, -0.0, infinities, NaN and None."""
    pool = [1, -3, 2.5, -0.0, 0, True, False, np.int64(7), np.float32(2.5), np.uint64(2**64 - 1), 2**64 - 2, -(2**63)]
    pool += [2**53, 2**53 + 1, float(2**53), 2**53 + 3, -(2**53) - 1, float(-(2**53)), np.inf, -np.inf, np.nan, None]
    values = np.empty(n, dtype=object)
    values[:] = [pool[i] for i in rng.integers(0, len(pool), n)]
    return pd.Series(values, dtype=object)


@pytest.mark.parametrize("strategy", ["memory", "external"])
def test_object_numbers_sort_as_pandas(rng, strategy, tmp_path):
    """An object column of numbers (ints, floats, bools mixed) sorts as pandas sorts it (Python's
    comparisons: exact, ints above 2**53 apart from the float beside them), NaN and None missing."""
    n = 300
    df = pd.DataFrame({"k": _numbers(rng, n), "j": rng.integers(0, 2, n), "row": np.arange(n)})
    with dask.config.set({"dataframe.convert-string": False}):
        for layout in LAYOUTS:
            ddf = _dask(df, layout)
            part = ddf.compute(scheduler="sync")
            for ascending, na_position in ORDERS[:: 3 if layout != "three" else 1]:
                out = sort_values(ddf, "k", ascending=ascending, na_position=na_position, strategy=strategy, local_directory=tmp_path)
                expected = part.sort_values("k", ascending=ascending, na_position=na_position, kind="stable")
                got = out.compute(scheduler="sync")
                assert got["row"].tolist() == expected["row"].tolist() and _same(got["k"], expected["k"])
            out = sort_values(ddf, ["j", "k"], ascending=[False, True], strategy=strategy, local_directory=tmp_path)
            assert _rows(out) == reference(part, ["j", "k"], [False, True])["row"].tolist()


@pytest.mark.parametrize(
    "values,found",
    [
        ([1, "a", 2.5, "b"], r"int, str"),
        (["a", b"b"], r"str, bytes"),
        (["a", True], r"str, bool"),
        ([2**70, 1], r"an int of more than 64 bits"),
        ([1, 10**400], r"an int of more than 64 bits"),
    ],
)
@pytest.mark.parametrize("how", ["memory", "external", "series", "set_index"])
def test_values_that_do_not_compare_are_refused(values, found, how, tmp_path):
    """An object column whose values pandas' sort refuses (TypeError), or that dsort does not order,
    is refused with one line naming the column and the types found, as its partition's keys are
    made (the values are known only then), before its rows are sorted."""
    df = pd.DataFrame({"k": pd.Series(values * 4, dtype=object), "row": np.arange(4 * len(values))})
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = dd.from_pandas(df, npartitions=1)
        with pytest.raises(TypeError, match=rf"^cannot sort by column 'k': .*{found}") as e:
            if how == "series":
                sort_series(ddf["k"]).compute(scheduler="sync")
            elif how == "set_index":
                set_index(ddf, "k")  # the cuts run at the call
            else:
                sort_values(ddf, "k", strategy=how, local_directory=tmp_path).compute(scheduler="sync")
        assert "\n" not in str(e.value)


def _itself(part):
    return part


def _partitions(*parts):
    """``(dask frame, the same frame in pandas)`` of exactly these partitions: each a list of the
    values of an object column ``k``, ``row`` the rows' positions in the whole."""
    frames, at = [], 0
    for values in parts:
        k = np.empty(len(values), dtype=object)
        k[:] = values
        rows = np.arange(at, at + len(values))
        frames.append(pd.DataFrame({"k": k, "row": rows}, index=rows))
        at += len(values)
    return dd.from_map(_itself, frames, meta=frames[0].iloc[:0]), pd.concat(frames)


# where the partitions' keys meet: in one run (sorted together), a run each (the plan; the cuts),
# or (external) runs merged in groups of two first, the final cuts joining the groups' chains
MEETINGS = {
    "one run": {"dsort.scale.runs-per-thread": 0},
    "a run each": {"dsort.scale.runs-per-thread": 64},
    "two passes": {"dsort.scale.runs-per-thread": 64, "dsort.file-sort.max-runs": 2},
}
STRATEGY_MEETINGS = [("memory", "one run"), ("memory", "a run each"), *[("external", m) for m in MEETINGS]]


@pytest.mark.parametrize(
    "parts,found",
    [
        ([[3, 1], [2, 0], ["b", "a"], ["c", "a"]], "int and str"),
        ([["b", "a"], ["c"], [b"b", b"a"], [b"c"]], "str and bytes"),
        ([[2.5, 1], [], [None, np.nan], ["a", "b"]], "int, float and str"),
    ],
)
@pytest.mark.parametrize("ascending", [True, False])
@pytest.mark.parametrize("strategy,meeting", STRATEGY_MEETINGS)
def test_partitions_of_kinds_that_do_not_compare_are_refused(parts, found, ascending, strategy, meeting, tmp_path):
    """Partitions that each hold values of one kind, whose kinds do not compare (numbers and
    strings, strings and bytes): each partition's keys are in order alone, theirs together mean
    nothing (pandas' sort of the whole refuses them), so the sort is refused where they meet, with
    one line naming the column and the types met; empty and all-missing partitions count for none."""
    with dask.config.set({"dataframe.convert-string": False, **MEETINGS[meeting]}):
        ddf, df = _partitions(*parts)
        with pytest.raises(TypeError):  # pandas' own refusal
            df.sort_values("k", kind="stable")
        message = rf"^cannot sort by column 'k': its partitions hold values of types {found}, which do not compare with each other$"
        with pytest.raises(UnsupportedType, match=message):
            sort_values(ddf, "k", ascending=ascending, strategy=strategy, local_directory=tmp_path).compute(scheduler="sync")


@pytest.mark.parametrize("how", ["series", "set_index", "drop-in set_index", "drop-in sort_values"])
def test_partitions_of_kinds_that_do_not_compare_are_refused_by_every_sort(how):
    """sort_series, set_index (its cuts run at the call) and dask's own methods under the drop-in
    refuse them alike: the drop-in does not hand them to dask's own sort, which cannot sort them either."""
    import dsort

    message = r"^cannot sort by column 'k': its partitions hold values of types int and str, which do not compare with each other$"
    with dask.config.set({"dataframe.convert-string": False}), pytest.raises(UnsupportedType, match=message):
        ddf, _ = _partitions([3, 1], [2], ["b", "a"])
        if how == "series":
            sort_series(ddf["k"]).compute(scheduler="sync")
        elif how == "set_index":
            set_index(ddf, "k")
        else:
            with dsort.enabled():
                if how == "drop-in set_index":
                    ddf.set_index("k")
                else:
                    ddf.sort_values("k").compute(scheduler="sync")


@pytest.mark.parametrize(
    "parts",
    [
        [[3, 1], [], [None, np.nan], [2.5, True, np.int64(-1), np.float32(0.5)]],
        [["b", "a"], [], [None, np.nan], ["c", "a"]],
        [[b"b"], [], [None], [b"a", b"c", b""]],
    ],
    ids=["numbers", "strings", "bytes"],
)
@pytest.mark.parametrize("ascending", [True, False])
@pytest.mark.parametrize("strategy,meeting", STRATEGY_MEETINGS)
def test_partitions_of_one_kind_empty_or_missing_sort_as_pandas(parts, ascending, strategy, meeting, tmp_path):
    """Partitions of one kind (numbers of any types, strings, bytes), an empty one and an all-missing
    one between them: sorted, as pandas' stable sort of the whole orders them, values kept."""
    with dask.config.set({"dataframe.convert-string": False, **MEETINGS[meeting]}):
        ddf, df = _partitions(*parts)
        got = sort_values(ddf, "k", ascending=ascending, strategy=strategy, local_directory=tmp_path).compute(scheduler="sync")
    expected = df.sort_values("k", ascending=ascending, kind="stable")
    assert got["row"].tolist() == expected["row"].tolist() and _same(got["k"], expected["k"])


def test_kinds_of_a_partition_and_their_join():
    """What a partition's keys tell of their values as they are made (no pass of their own): the
    types of an object column's (numbers by their types, which all compare; strings; bytes), an
    Arrow string column's; none for a column of no values, of missing ones only, or not of strings.
    Joined where partitions meet: the types met, refused where they do not compare."""
    spec = KeySpec.of(pd.DataFrame({"k": pd.Series([], dtype=object), "n": np.zeros(0)}), ["k", "n"])
    cases = [([1, 2], ("int",)), ([1.5, None], ("float",)), ([1, 2.5], ("int", "float")), ([True], ("bool",))]
    cases += [(["a", None], ("str",)), ([b"a"], ("bytes",)), ([], ()), ([None, np.nan], ())]
    for values, kinds in cases:
        k = np.empty(len(values), dtype=object)
        k[:] = values
        assert spec.encode_part(pd.DataFrame({"k": k, "n": np.zeros(len(values))}))[2] == (kinds, ())
    arrow = KeySpec.of(pd.DataFrame({"k": pd.Series([], dtype="string[pyarrow]")}), "k")
    assert arrow.encode_part(pd.DataFrame({"k": pd.Series(["a", None], dtype="string[pyarrow]")}))[2] == (("str",),)
    assert arrow.encode_part(pd.DataFrame({"k": pd.Series([None], dtype="string[pyarrow]")}))[2] == ((),)
    assert join_kinds(spec, [(("int",), ()), ((), ()), (("float", "int"), ()), ()]) == (("int", "float"), ())
    with pytest.raises(UnsupportedType, match=r"^cannot sort by column 'k': its partitions hold values of types int, float and bytes, "):
        join_kinds(spec, [(("int", "float"), ()), ((), ()), (("bytes",), ())])


def _no_compute(*args, **kwargs):
    raise AssertionError("a task ran while the graph was built")


def _objects(values) -> pd.Series:
    k = np.empty(len(values), dtype=object)
    k[:] = values
    return pd.Series(k, dtype=object)


def _key(rng, kind, n):
    """A key column of ``kind`` with many duplicates (values drawn from a few dozen)."""
    v = rng.integers(0, 30, n)
    return {
        "int": lambda: v,
        "float": lambda: v.astype(np.float64),
        "bool": lambda: v % 2 == 0,
        "object str": lambda: _objects([f"v{x:02d}" for x in v]),
        "object int": lambda: _objects(v.tolist()),
        "str": lambda: pd.Series([f"v{x:02d}" for x in v], dtype="str"),
        "string[pyarrow]": lambda: pd.Series([f"v{x:02d}" for x in v], dtype="string[pyarrow]"),
        "string[python]": lambda: pd.Series([f"v{x:02d}" for x in v], dtype="string[python]"),
        "arrow string": lambda: pd.Series([f"v{x:02d}" for x in v], dtype=pd.ArrowDtype(pa.string())),
        "categorical": lambda: pd.Series(
            pd.Categorical([f"v{x:02d}" for x in v], categories=[f"v{x:02d}" for x in range(30)], ordered=True)
        ),
        "datetime": lambda: pd.Series(pd.to_datetime(v, unit="D")),
        "timedelta": lambda: pd.Series(pd.to_timedelta(v, unit="h")),
    }[kind]()


# (key kind, divisions of another kind, the divisions' types, the column's values as the message names them,
# whether the key's dtype decides at the call: an object key's values are known only as its keys are made)
OTHER_KINDS = [
    ("int", ["0", "10", "29"], "type str", r"values \(int64\)", True),
    ("int", ["a", "m", "z"], "type str", r"values \(int64\)", True),
    ("float", [pd.Timestamp(0), pd.Timestamp(1)], "type Timestamp", r"values \(float64\)", True),
    ("bool", ["False", "True"], "type str", r"values \(bool\)", True),
    ("str", [0, 10, 29], "type int", r"values \(str\)", True),
    ("string[pyarrow]", [0, 10, 29], "type int", r"values \(string\)", True),
    ("string[python]", [np.int64(0), np.int64(29)], "type int64", r"values \(string\)", True),
    ("arrow string", [0.5, 10.5], "type float", r"values \(string\[pyarrow\]\)", True),
    ("categorical", [0, 10, 29], "type int", r"values \(category\)", True),
    ("datetime", ["a", "b", "c"], "type str", r"values \(datetime64\[\w+\]\), nor parse as them \(.*\)", True),
    ("datetime", ["2021-01-01", "2021-13-45"], "type str", r"values \(datetime64\[\w+\]\), nor parse as them \(.*\)", True),
    ("datetime", [0, 10, 29], "type int", r"values \(datetime64\[\w+\]\)", True),
    ("datetime", [pd.Timedelta(0), pd.Timedelta(1)], "type Timedelta", r"values \(datetime64\[\w+\]\)", True),
    ("timedelta", [0, 10, 29], "type int", r"values \(timedelta64\[\w+\]\)", True),
    ("object str", [0, 10, 29], "type int", r"values of type str", False),
    ("object str", [0, 29], "type int", r"values of type str", False),  # one partition: its bounds alone
    ("object str", [b"v00", b"v29"], "type bytes", r"values of type str", False),
    ("object int", ["0", "10", "29"], "type str", r"values of types? int", False),
    ("object int", ["a", "z"], "type str", r"values of types? int", False),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind,divisions,types,theirs,at_call", OTHER_KINDS, ids=[f"{k}-{i}" for i, (k, *_) in enumerate(OTHER_KINDS)])
def test_divisions_of_another_kind_are_refused(rng, kind, divisions, types, theirs, at_call, layout):
    """set_index(col, divisions=[...]) with divisions whose values do not compare with the key's
    (strings on an int key, ints on a string or datetime one, strings that are no dates): refused
    with one line naming the column, the divisions and both types (a TypeError, as dask's own
    raises at its compute, naming nothing, where it does: the next test), rather than cut where the
    user did not say (dsort took ``["0", "10"]`` on an int key as ``[0, 10]``, ints on a string key
    as their strings).
    Where the key's dtype decides, at the call, running nothing (lazy, as dask builds it); an
    object key's values are known only as its partitions' keys are made: at the compute, from the
    first task that meets both. The drop-in raises it too, rather than hand the call to dask."""
    import dsort

    n = 200
    df = pd.DataFrame({"k": _key(rng, kind, n), "row": np.arange(n)})
    message = rf"^cannot sort by column 'k' at divisions .*: they hold values of {types}, which do not compare with the column's {theirs}$"
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = _dask(df, layout)
        for how in ("set_index", "drop-in"):
            with pytest.raises(Incomparable, match=message) as e:
                with dask.config.set(scheduler=_no_compute if at_call else "sync"):
                    if how == "set_index":
                        out = set_index(ddf, "k", divisions=divisions)
                    else:
                        with dsort.enabled():
                            out = ddf.set_index("k", divisions=divisions)
                assert not at_call, "built"
                assert built_by_dsort(out)
                dask.compute(*out.to_delayed(), scheduler="sync")
            assert "\n" not in str(e.value)


DAYS = ["1970-01-01", "1970-01-10", "1970-02-01"]
# (key kind, divisions that compare with its values, the divisions the result must have where not the same values)
SAME_KINDS = [
    ("int", [0, 10, 29], None),
    ("int", [np.int64(-5), np.int64(3), np.int64(12)], None),
    ("int", [0, 5.0, 40], None),
    ("float", [0, 10, 29], None),
    ("float", [np.int32(2), 7.5, np.float32(20.5)], None),
    ("bool", [False, True], None),
    ("object str", ["v00", "v10", "v29"], None),
    ("object str", ["a", "v05", "v05a", "z"], None),
    ("object int", [0, 10, 29], None),
    ("object int", [True, np.int64(2), 5.5, 40], None),
    ("str", ["v00", "v10", "v29"], None),
    ("string[pyarrow]", ["v03", "v17"], None),
    ("string[python]", ["v00", "v10", "v29"], None),
    ("arrow string", ["v00", "v10", "v29"], None),
    ("categorical", ["v00", "v10", "v29"], None),
    ("datetime", [pd.Timestamp(0), pd.Timestamp("1970-01-10"), pd.Timestamp("1970-02-01")], None),
    ("datetime", [np.datetime64("1970-01-02"), np.datetime64("1970-01-20")], None),
    ("datetime", DAYS, [pd.Timestamp(d) for d in DAYS]),
    ("timedelta", [pd.Timedelta(0), pd.Timedelta(hours=10), pd.Timedelta(hours=29)], None),
]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("kind,divisions,want", SAME_KINDS, ids=[f"{k}-{i}" for i, (k, *_) in enumerate(SAME_KINDS)])
def test_divisions_that_compare_cut_as_pandas_orders(rng, kind, divisions, want, layout):
    """Divisions whose values compare with the key's (numbers of any type on a number key, strings
    on a string key of any dtype, timestamps or date strings on a datetime key): built lazily, the
    result's divisions the user's values, its rows pandas' stable sort, each partition's keys in
    ``[d_i, d_i+1)`` (below the first in the first, above the last in the last); the drop-in's alike."""
    import dsort

    n = 200
    df = pd.DataFrame({"k": _key(rng, kind, n), "row": np.arange(n)})
    want = divisions if want is None else want
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = _dask(df, layout)
        df = ddf.compute(scheduler="sync")
        expected = df.sort_values("k", kind="stable")
        with dask.config.set(scheduler=_no_compute):
            outs = [set_index(ddf, "k", divisions=divisions)]
            with dsort.enabled():
                outs.append(ddf.set_index("k", divisions=divisions))
        for out in outs:
            assert built_by_dsort(out) and len(out.divisions) == len(want)
            assert all(a == b for a, b in zip(out.divisions, want)), out.divisions
            parts = dask.compute(*out.to_delayed(), scheduler="sync")  # each part's index as it is (pandas' concat may infer str)
            assert [r for p in parts for r in p["row"]] == expected["row"].tolist()
            assert [v for p in parts for v in p.index] == expected["k"].tolist()
            for i, p in enumerate(parts):
                if len(p) and i:
                    assert p.index.min() >= out.divisions[i], (i, p.index.min())
                if len(p) and i < len(parts) - 1:
                    assert p.index.max() < out.divisions[i + 1], (i, p.index.max())


@pytest.mark.parametrize(
    "kind,divisions,layout",
    [("int", ["0", "10", "29"], "three"), ("object str", [0, 29], "empty"), ("float", [pd.Timestamp(0), pd.Timestamp(1)], "one")]
    + [("timedelta", [0, 10, 29], "three")],
)
def test_dasks_own_set_index_of_divisions_of_another_kind(rng, kind, divisions, layout):
    """Why the drop-in does not hand such calls to dask: dask's own set_index takes them at the
    call (lazy), then fails at the compute with pandas' TypeError, naming no column; or, where no
    row meets a division (one input partition, one output) or pandas compares them after all (ints
    with durations, as their ticks), gives a result whose divisions are the user's values, of
    another kind than its index's. dsort's refusal: at the call, an :class:`Incomparable` (a
    TypeError) that names the column and the types; at the compute for an object key."""
    import dsort
    from dsort.collections.indexing import dask_method

    n = 200
    df = pd.DataFrame({"k": _key(rng, kind, n), "row": np.arange(n)})
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = _dask(df, layout)
        theirs = dask_method(dd.DataFrame, "set_index")(ddf, "k", divisions=divisions)
        try:
            got = theirs.compute(scheduler="sync")
        except TypeError as e:
            assert "'k'" not in str(e)
        else:
            assert theirs.divisions == tuple(divisions) and len(got) == len(ddf)
            assert pd.Series(divisions).dtype != got.index.dtype  # not values of the index's dtype
        with dsort.enabled(), pytest.raises(Incomparable, match=r"^cannot sort by column 'k' at divisions "):
            dask.compute(*ddf.set_index("k", divisions=divisions).to_delayed(), scheduler="sync")


def test_object_key_of_other_values_with_divisions_goes_to_dask(rng):
    """An object key's divisions of values dsort does not sort there (timestamps: it sorts objects
    that are strings, bytes or numbers) are refused at the call as unsupported, which the drop-in
    hands to dask's own set_index: dask's answer, as without dsort."""
    import dsort
    from dsort.collections.indexing import dask_method

    n = 120
    times = _objects(list(pd.to_datetime(rng.integers(0, 30, n), unit="D")))
    df = pd.DataFrame({"k": times, "row": np.arange(n)})
    divisions = [pd.Timestamp(0), pd.Timestamp("1970-01-10"), pd.Timestamp("1970-02-01")]
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = _dask(df, "empty")
        with pytest.raises(UnsupportedType, match="dsort sorts an object column 'k' of strings, bytes or numbers"):
            set_index(ddf, "k", divisions=divisions)
        with dsort.enabled():
            ours = ddf.set_index("k", divisions=divisions)
        theirs = dask_method(dd.DataFrame, "set_index")(ddf, "k", divisions=divisions)
    assert not built_by_dsort(ours) and ours.divisions == theirs.divisions
    pd.testing.assert_frame_equal(ours.compute(scheduler="sync"), theirs.compute(scheduler="sync"))


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("strategy", ["memory", "external"])
def test_object_keys_sorted_on_the_gpu(rng, strategy, tmp_path):
    """``device="gpu"`` (the keys made on the host, sorted on the GPU; the rows follow on the host)
    with an object key of strings, duplicates, missing values and an empty partition among them:
    pandas' stable sort, both ways, the values kept; set_index at string divisions alike. Partitions
    of kinds that do not compare (ints, strings) refused where they meet, and int divisions on the
    string key at the compute (the first task that meets both), on the GPU path as on the host's."""
    n = 3000
    keys = _objects([f"v{x:03d}" for x in rng.integers(0, 200, n)])
    keys[rng.random(n) < 0.05] = None
    with dask.config.set({"dataframe.convert-string": False}):
        ddf = _dask(pd.DataFrame({"k": keys, "row": np.arange(n)}), "empty")
        df = ddf.compute(scheduler="sync")
        for ascending, na_position in [(True, "last"), (False, "first")]:
            out = sort_values(
                ddf, "k", ascending=ascending, na_position=na_position, device="gpu", strategy=strategy, local_directory=tmp_path
            )
            got = out.compute(scheduler="threads")
            expected = df.sort_values("k", ascending=ascending, na_position=na_position, kind="stable")
            assert got["row"].tolist() == expected["row"].tolist() and got["k"].dtype == object and _same(got["k"], expected["k"])
        mixed, whole = _partitions([3, 1, 2], [], ["b", "a"], [None, "c", "a"])
        with pytest.raises(TypeError):  # pandas' own refusal
            whole.sort_values("k", kind="stable")
        message = r"^cannot sort by column 'k': its partitions hold values of types int and str, which do not compare with each other$"
        with pytest.raises(Incomparable, match=message):
            sort_values(mixed, "k", device="gpu", strategy=strategy, local_directory=tmp_path).compute(scheduler="threads")
        if strategy == "memory":  # set_index sorts in memory
            divisions = ["v050", "v100", "v150"]
            out = set_index(ddf, "k", divisions=divisions, device="gpu")
            parts = dask.compute(*out.to_delayed(), scheduler="threads")  # each part's index as it is (pandas' concat may infer str)
            expected = df.sort_values("k", kind="stable")
            assert out.divisions == tuple(divisions) and [r for p in parts for r in p["row"]] == expected["row"].tolist()
            assert all(v >= divisions[1] for v in parts[1].index if v is not None) and all(v < divisions[1] for v in parts[0].index)
            with pytest.raises(Incomparable, match=r"^cannot sort by column 'k' at divisions \[50, 100\]: they hold values of type int, "):
                dask.compute(*set_index(ddf, "k", divisions=[50, 100], device="gpu").to_delayed(), scheduler="threads")
