"""Parity with dask: the same calls of dask's ``sort_values`` and ``set_index`` through dask's own
methods and through dsort (``dsort.enabled()``) on the same frames, compared on everything dask
promises: the columns, dtypes and index, the number of partitions, the rows (as a whole, and the
keys' order: dask's sort is not stable, so rows of equal keys may differ in order), set_index's
divisions (each partition within its own). dsort's answer is also checked against pandas' stable
sort, exactly. Where dask refuses a call, dsort either refuses it with the same exception type or
gives pandas' answer (documented: better)."""

import dask
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest

import dsort

from .frame_cases import built_by_dsort, column_of


KINDS = ["int", "float", "Int64", "string", "pystring", "datetime", "datetime_tz", "timedelta", "arrow_int", "arrow_string"]
KINDS += ["arrow_ts", "arrow_decimal", "arrow_binary", "category_ordered", "category_unordered"]
SHAPES = {"several": [30, 0, 45, 1, 24], "one partition": [80], "empty": [0, 0], "single row": [1]}


def _frame(kind, shape, rng, all_nan_part=False):
    lengths = SHAPES[shape]
    n = sum(lengths)
    df = pd.DataFrame({"k": column_of(kind, rng, n), "v": rng.integers(0, 3, n), "row": np.arange(n)})
    if all_nan_part and n:
        df.loc[: lengths[0] - 1, "k"] = np.nan
    bounds = np.cumsum([0, *lengths])
    parts = [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    return dd.from_map(lambda p: p, parts, meta=df.iloc[:0], divisions=[None] * (len(parts) + 1)), df


def _both(call, ddf):
    """``(dask's result or exception, dsort's result or exception)`` of ``call(ddf)``."""
    out = []
    for on in (False, True):
        try:
            if on:
                with dsort.enabled():
                    got = call(ddf)
                    out.append((got, got.compute(scheduler="sync")))
            else:
                got = call(ddf)
                out.append((got, got.compute(scheduler="sync")))
        except Exception as e:  # compared below
            out.append(e)
    return out


def _same_promises(theirs, ours, keys, parts):
    """``parts``: the partitions asked for (sort_values: dsort gives as many, empty ones too, where
    dask may leave some out; None for set_index, where neither promises a count: dsort leaves out
    the partitions that runs of equal values leave empty, dask cuts at approximate quantiles)."""
    (_, tdf), (o, odf) = theirs, ours
    assert list(odf.columns) == list(tdf.columns)
    pd.testing.assert_series_equal(odf.dtypes, tdf.dtypes)
    assert odf.index.name == tdf.index.name and odf.index.dtype == tdf.index.dtype
    if parts:
        assert o.npartitions == parts or (len(tdf) == 0 and o.npartitions >= 1)
    if keys:  # the keys in the same order; the rows the same as a whole
        for k in keys:
            assert _listed(odf.index if k is None else odf[k]) == _listed(tdf.index if k is None else tdf[k]), k
        assert sorted(odf["row"]) == sorted(tdf["row"])


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("kind", KINDS)
def test_sort_values_gives_dasks_answer(rng, kind, shape):
    ddf, df = _frame(kind, shape, rng, all_nan_part=kind in ("float", "Int64") and shape == "several")
    for call, by, asc, na, parts in [
        (lambda d: d.sort_values("k"), ["k"], True, "last", ddf.npartitions),
        (lambda d: d.sort_values("k", ascending=False, na_position="first"), ["k"], False, "first", ddf.npartitions),
        (lambda d: d.sort_values(["v", "k"], ascending=[True, False]), ["v", "k"], [True, False], "last", ddf.npartitions),
        (lambda d: d.sort_values("k", npartitions=2, ignore_index=True), ["k"], True, "last", 2),
    ]:
        theirs, ours = _both(call, ddf)
        if isinstance(ours, Exception):
            assert isinstance(theirs, Exception) and type(ours) is type(theirs), (ours, theirs)
            continue
        expected = df
        for c, a in reversed(list(zip(by, asc if isinstance(asc, list) else [asc] * len(by)))):
            expected = expected.sort_values(c, ascending=a, na_position=na, kind="stable")
        if isinstance(theirs, Exception):  # dask refuses; dsort's answer is pandas'
            pd.testing.assert_series_equal(ours[1]["row"], expected["row"], check_index=False)
            continue
        pd.testing.assert_series_equal(ours[1]["row"].reset_index(drop=True), expected["row"].reset_index(drop=True))
        _same_promises(theirs, ours, by, parts)


@pytest.mark.parametrize("shape", ["several", "one partition", "empty"])
@pytest.mark.parametrize("kind", KINDS)
def test_set_index_gives_dasks_answer(rng, kind, shape):
    ddf, df = _frame(kind, shape, rng)
    present = df["k"].dropna()
    values = sorted(set(present.tolist()), key=_ranker(pd.Index(present))) if len(present) else []
    calls = [lambda d: d.set_index("k"), lambda d: d.set_index("k", npartitions=2), lambda d: d.set_index(d.k, drop=False)]
    if len(values) >= 3 and kind not in ("category_unordered",):
        divisions = [values[0], values[len(values) // 2], values[-1]]
        calls.append(lambda d: d.set_index("k", divisions=divisions))
    pandas_keys = _listed(df["k"].sort_values(kind="stable"))
    for call in calls:
        theirs, ours = _both(call, ddf)
        if isinstance(ours, Exception):
            assert isinstance(theirs, Exception) and type(ours) is type(theirs), (ours, theirs)
            continue
        if built_by_dsort(ours[0]):  # dsort's answer: pandas' order (categoricals in their categories' order)
            assert _listed(ours[1].index) == pandas_keys
        if isinstance(theirs, Exception):
            continue  # dask refuses: dsort's answer is pandas' (checked above)
        # the keys' order compared where dask's is pandas' (with an empty partition, dask 2026.8 puts a
        # categorical's values in lexical order, not its categories'); the rest always
        _same_promises(theirs, ours, [None] if _listed(theirs[1].index) == pandas_keys or not built_by_dsort(ours[0]) else [], None)
        o, odf = ours
        if o.known_divisions and len(odf) and built_by_dsort(o):  # dsort's own answer (not dask's, handed over)
            parts = dask.compute(*o.to_delayed(), scheduler="sync")
            last = len(parts) - 1
            rank = _ranker(odf.index)
            for i, (p, lo, hi) in enumerate(zip(parts, o.divisions[:-1], o.divisions[1:])):
                values = p.index.dropna()  # missing keys: all in the last partition, as dask puts them
                assert i == last or len(values) == len(p)
                if len(values):
                    first, top = min(map(rank, values)), max(map(rank, values))
                    assert i == 0 or first >= rank(lo), (i, lo)
                    assert i == last or top <= rank(hi), (i, hi)


def _listed(values) -> list:
    return values.astype(object).where(values.notna(), None).tolist()


def _ranker(index):
    """Values of ``index`` as comparable ranks: a categorical's by its categories' order (an
    unordered one has no min or max), others as they are."""
    if isinstance(index.dtype, pd.CategoricalDtype):
        return list(index.dtype.categories).index
    return lambda v: v
