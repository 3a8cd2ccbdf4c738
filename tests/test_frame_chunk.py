"""dsort.frame_chunk: the dataframe sort's per-partition functions, without dask, against pandas."""

import pandas as pd

from .frame_cases import reference
from dsort import frame_chunk as FC
from dsort.frame_keys import KeySpec


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
    pd.testing.assert_frame_equal(pd.concat(out), reference(pd.concat(parts), ["s", "k"], [False, True]))


def test_merge_of_nothing_keeps_the_datas_dtypes():
    part = pd.DataFrame({"s": pd.Series(["a"], dtype=object)})
    meta = pd.DataFrame({"s": pd.Series([], dtype="string")})
    spec = KeySpec.of(part, "s")
    done = FC.sort_part(part, spec)
    plan = FC.make_plan(2, FC.info(done))
    cut = FC.cuts(plan, None)
    assert plan.out_sizes == (1, 0)
    empty = FC.merge(meta, cut, 1, False, None, FC.take(spec, done, plan, cut, 1, 0))
    assert len(empty) == 0 and empty["s"].dtype == object
    one = FC.merge(meta, cut, 0, True, None, FC.take(spec, done, plan, cut, 0, 0))
    assert one["s"].tolist() == ["a"] and list(one.index) == [0]


def test_a_sorted_part_tells_dask_its_bytes(rng):
    """The scheduler places the tasks that read a sorted part by the bytes they would move: a
    part that claimed a few bytes would be copied whole between workers."""
    from dask.sizeof import sizeof

    n = int(rng.integers(1000, 5000))
    df = pd.DataFrame({"k": rng.integers(0, 9, n), "s": rng.choice(["a", "bb", "ccc"], n)})
    done = FC.sort_part(df, KeySpec.of(df, ["k", "s"]))
    assert sizeof(done) >= sizeof(done.frame) + done.keys.nbytes >= n * 9
