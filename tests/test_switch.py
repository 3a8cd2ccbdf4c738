"""dsort.enable() / dsort.enabled() / dsort.disable(): dsort under dask's own sort_values and set_index,
and put back exactly; dask's calls unchanged (the parity of their answers: tests/test_parity.py)."""

import subprocess
import sys

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dsort
from dsort.collections import switch

from .frame_cases import built_by_dsort


pytestmark = pytest.mark.filterwarnings("ignore:Series.values returning an object-dtype:DeprecationWarning", "ignore::FutureWarning")


@pytest.fixture(autouse=True)
def _off():
    switch.disable()
    yield
    switch.disable()


@pytest.fixture
def ddf(rng):
    df = pd.DataFrame({"k": rng.integers(0, 40, 500), "f": rng.random(500), "row": np.arange(500)})
    return dd.from_pandas(df, npartitions=4, sort=False)


def test_the_switch_puts_dasks_methods_back_exactly():
    before = {n: dd.DataFrame.__dict__[n] for n in ("sort_values", "set_index")}
    assert not hasattr(dd.Series, "sort_values") and not dsort.is_enabled()
    dsort.enable()
    dsort.enable()  # twice: still one stand-in
    assert dsort.is_enabled() and dd.DataFrame.sort_values is not before["sort_values"] and hasattr(dd.Series, "sort_values")
    with dsort.enabled():
        pass
    assert dsort.is_enabled()  # a block inside enable() leaves it on
    dsort.disable()
    assert not dsort.is_enabled() and not hasattr(dd.Series, "sort_values")
    assert all(dd.DataFrame.__dict__[n] is f for n, f in before.items())
    with dsort.enabled():
        with dsort.enabled():
            assert dsort.is_enabled()
        assert dsort.is_enabled()
    assert not dsort.is_enabled() and all(dd.DataFrame.__dict__[n] is f for n, f in before.items())
    with pytest.raises(RuntimeError), dsort.enabled():
        raise RuntimeError("inside")
    assert not dsort.is_enabled()


def test_dasks_calls_run_on_dsort_while_it_is_on(ddf):
    df = ddf.compute(scheduler="sync")
    assert not built_by_dsort(ddf.sort_values("k")) and not built_by_dsort(ddf.set_index("k"))
    with dsort.enabled():
        calls = {
            "sort_values": ddf.sort_values("k"),
            "sort_values positional npartitions": ddf.sort_values("k", 3),
            "descending, two keys": ddf.sort_values(["k", "f"], ascending=[False, True]),
            "set_index": ddf.set_index("k"),
            "set_index by a Series": ddf.set_index(ddf.k + 1),
            "series": ddf.k.sort_values(),
        }
        assert all(built_by_dsort(c) for c in calls.values()), [n for n, c in calls.items() if not built_by_dsort(c)]
        assert calls["sort_values positional npartitions"].npartitions == 3
        got = {n: c.compute(scheduler="sync") for n, c in calls.items()}
    pd.testing.assert_frame_equal(got["sort_values"], df.sort_values("k", kind="stable"))
    pd.testing.assert_frame_equal(got["descending, two keys"], df.sort_values(["k", "f"], ascending=[False, True], kind="stable"))
    pd.testing.assert_frame_equal(got["set_index"], df.sort_values("k", kind="stable").set_index("k"))
    pd.testing.assert_series_equal(got["series"], df.k.sort_values(kind="stable"))
    assert calls["set_index"].known_divisions


def test_what_dsort_does_not_sort_goes_to_dask_unchanged(rng):
    """A period key (sort_values and set_index): dask's own method runs and gives dask's answer;
    a key of missing values only: dask's own refusal."""
    n = 60
    t = pd.Series(pd.to_datetime(np.zeros(n), unit="D")).mask(np.ones(n, bool))
    df = pd.DataFrame({"p": pd.period_range("2020-01", periods=n, freq="M")[rng.permutation(n)], "t": t, "row": np.arange(n)})
    ddf = dd.from_pandas(df, npartitions=3, sort=False)
    with pytest.raises(TypeError):
        dsort.dataframe.sort_values(ddf, "p")
    with pytest.raises(ValueError, match="only missing values"):
        dsort.dataframe.set_index(ddf, "t")
    with dsort.enabled():
        by_period, indexed = ddf.sort_values("p"), ddf.set_index("p")
        assert not built_by_dsort(by_period) and not built_by_dsort(indexed)
        ours = ddf.set_index("t")  # dask's, which refuses once its divisions are asked for
    theirs = ddf.set_index("t")
    for result in (ours, theirs):
        with pytest.raises(NotImplementedError, match="Divisions calculation failed"):
            assert result.divisions is None
    assert indexed.divisions == dd.from_pandas(df, npartitions=3, sort=False).set_index("p").divisions
    assert by_period.compute(scheduler="sync").p.tolist() == sorted(df.p.tolist())


@pytest.mark.parametrize(
    "call",
    [
        lambda d: d.sort_values("k", na_position="middle"),
        lambda d: d.sort_values(None),
        lambda d: d.sort_values(d.k),
        lambda d: d.sort_values("k", ascending="yes"),
        lambda d: d.sort_values(["k", "f"], ascending=[True]),
    ],
)
def test_dasks_refusals_keep_dasks_words(ddf, call):
    with pytest.raises(Exception) as theirs:
        call(ddf)
    with dsort.enabled(), pytest.raises(Exception) as ours:
        call(ddf)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


def test_npartitions_0_is_the_inputs_as_in_dask(ddf):
    with dsort.enabled():
        out = ddf.sort_values("k", npartitions=0)
        indexed = ddf.set_index("k", npartitions=0)
    assert built_by_dsort(out) and out.npartitions == ddf.npartitions and built_by_dsort(indexed)
    assert {"enable", "disable", "enabled", "dataframe", "sort"} <= set(dir(dsort))


def test_dasks_config_turns_it_on_when_dsort_is_imported():
    """DASK_DSORT__DATAFRAME__DROP_IN=1: in a fresh process, importing dsort and dask.dataframe
    (either order) puts dsort under dask's sorts."""
    code = (
        "import dask.dataframe as dd, pandas as pd, dsort\n"
        "x = dd.from_pandas(pd.DataFrame({'k': [3, 1, 2]}), npartitions=2).sort_values('k')\n"
        "print(dsort.is_enabled(), any('dsort' in str(k) for k in dict(x.__dask_graph__())), x.compute().k.tolist())\n"
    )
    for env in ({"DASK_DSORT__DATAFRAME__DROP_IN": "1"}, {}):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**_env(), **env}, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == (["True", "True", "[1,", "2,", "3]"] if env else ["False", "False", "[1,", "2,", "3]"])


def test_the_environment_alone_turns_it_on_in_code_that_never_imports_dsort():
    """DASK_DSORT__DATAFRAME__DROP_IN=1 is for code you do not own: the installed package's
    ``dsort-drop-in.pth`` imports dsort as every Python process starts where it is set, so a script
    that imports only dask gets dsort's sorts; unset (or 0), dsort is not even imported."""
    code = (
        "import sys, dask.dataframe as dd, pandas as pd\n"
        "x = dd.from_pandas(pd.DataFrame({'k': [3, 1, 2]}), npartitions=2).sort_values('k')\n"
        "print('dsort' in sys.modules, any('dsort' in str(k) for k in dict(x.__dask_graph__())), x.compute().k.tolist())\n"
    )
    key = "DASK_DSORT__DATAFRAME__DROP_IN"
    for env, want in (({key: "1"}, "True True"), ({key: "0"}, "False False"), ({}, "False False")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**_env(), **env}, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.split() == [*want.split(), "[1,", "2,", "3]"], (env, out.stdout, out.stderr)


def _env():
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith("DASK_DSORT")}


def test_the_switch_is_per_process_and_threads_see_it(ddf):
    """The stand-in is the class's attribute: every thread of the process sees it."""
    from concurrent.futures import ThreadPoolExecutor

    with dsort.enabled(), ThreadPoolExecutor(2) as pool:
        built = list(pool.map(lambda _: built_by_dsort(ddf.sort_values("k")), range(2)))
    assert built == [True, True]
    assert dask.config.get("dsort.dataframe.drop-in") is False


def test_what_dask_users_write_around_a_sort(tmp_path):
    """Categoricals read from Parquet (unknown categories: handed to dask), set_index of a column
    the index is named after (the column, as in pandas and dask), divisions given as strings on a
    datetime key (taken as its timestamps, so loc works), dask's signature on the stand-ins."""
    import inspect

    cat = pd.DataFrame({"c": pd.Categorical(["b", "a", "c", "a"] * 10), "v": range(40)})
    dd.from_pandas(cat, npartitions=2).to_parquet(tmp_path / "pq")
    unknown = dd.read_parquet(tmp_path / "pq")
    assert not unknown.c.cat.known
    ids = dd.from_pandas(pd.DataFrame({"id": [3, 1, 2] * 10, "v": range(30)}), npartitions=3)
    when = pd.DataFrame({"t": pd.date_range("2021", periods=100, freq="h"), "v": range(100)}).sample(frac=1, random_state=0)
    timed = dd.from_pandas(when, npartitions=4)
    with dsort.enabled():
        assert unknown.set_index("c").divisions == dd.read_parquet(tmp_path / "pq").set_index("c").divisions
        again = ids.set_index("id", drop=False).set_index("id")
        cut = timed.set_index("t", divisions=["2021-01-01", "2021-01-03", "2021-01-06"])
        assert inspect.signature(dd.DataFrame.sort_values) == inspect.signature(dd.DataFrame._dsort_dask_sort_values)
        with pytest.raises(TypeError):
            ids.v.sort_values(False)  # keywords only, as pandas
    assert built_by_dsort(again) and again.index.name == "id" and list(again.columns) == ["v"]
    pd.testing.assert_frame_equal(again.compute(scheduler="sync"), ids.compute().sort_values("id", kind="stable").set_index("id"))
    assert cut.divisions == (pd.Timestamp("2021-01-01"), pd.Timestamp("2021-01-03"), pd.Timestamp("2021-01-06"))
    expected = when.set_index("t").sort_index().loc["2021-01-02":"2021-01-04"]
    pd.testing.assert_frame_equal(cut.loc["2021-01-02":"2021-01-04"].compute(scheduler="sync"), expected)
