"""dsort.core.frame_chunk: the dataframe sort's per-partition functions, without dask, against pandas."""

import pandas as pd

from .frame_cases import reference
from dsort.core import frame_chunk as FC
from dsort.core import frame_pandas
from dsort.core.frame_keys import KeySpec


def test_frame_chunk_functions_without_dask(rng):
    """The per-partition functions alone: sort, plan, samples, windows, cuts, slices, merges give
    pandas' order, for parts with different string widths."""
    df = pd.DataFrame({"s": rng.choice(["a", "bbbb", "", "cc"], 300), "k": rng.integers(0, 4, 300)})
    parts = [df.iloc[:0], df.iloc[:100].assign(s="x"), df.iloc[100:300]]
    spec = KeySpec.of(df, ["s", "k"], [False, True])
    done = [FC.sort_part(p, spec) for p in parts]
    plan = FC.make_plan(spec, 4, None, *[FC.info(d, 4) for d in done])
    assert plan.out_sizes == (75, 75, 75, 75) and plan.widths == (4, 0)
    cut = FC.cuts(plan, *[FC.window(spec, d, plan, q) for q, d in enumerate(done)])
    out = [FC.merge(df.iloc[:0], cut, t, False, None, *[FC.take(spec, d, plan, cut, t, q) for q, d in enumerate(done)]) for t in range(4)]
    pd.testing.assert_frame_equal(pd.concat(out), reference(pd.concat(parts), ["s", "k"], [False, True]))


def test_merge_of_nothing_keeps_the_datas_dtypes():
    part = pd.DataFrame({"s": pd.Series(["a"], dtype=object)})
    meta = pd.DataFrame({"s": pd.Series([], dtype="string")})
    spec = KeySpec.of(part, "s")
    done = FC.sort_part(part, spec)
    plan = FC.make_plan(spec, 2, None, FC.info(done, 2))
    cut = FC.cuts(plan)
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
    words = rng.choice(["a", "bb", "ccc" * int(rng.integers(1, 50))], n)
    df = pd.DataFrame({"k": rng.integers(0, 9, n), "s": words, "o": pd.Series(list(words), dtype=object)})
    done = FC.sort_part(df, KeySpec.of(df, ["k", "s"]))
    ours, theirs = sizeof(done) - done.keys.nbytes, sizeof(done.frame)  # dask's own count of the frame
    assert theirs / 2 <= ours <= theirs * 2 and ours >= n * 9


def _strings(rng, n, width):
    return rng.integers(97, 123, (n, width), dtype="uint8").view(f"S{width}").reshape(-1).astype(str)


def _missing_of_width(values, width):
    """An Arrow large_string array of ``values`` (all ``width`` bytes) with every third missing,
    its missing values' bytes left in place (Arrow allows it)."""
    import numpy as np
    import pyarrow as pa

    n = len(values)
    valid = pa.array(np.arange(n) % 3 > 0).buffers()[1]
    offsets = np.arange(0, (n + 1) * width, width, dtype=np.int64)
    data = "".join(values).encode()
    return pa.Array.from_buffers(pa.large_string(), n, [valid, pa.py_buffer(offsets), pa.py_buffer(data)])


def _gather_cases(rng, n):
    """Columns gather takes as fixed-width rows, and ones it must not (lengths differ, missing
    values, Python strings), in every Arrow string and binary dtype pandas holds."""
    import numpy as np
    import pyarrow as pa

    same = _strings(rng, n, 3)
    return {
        "string[pyarrow]": pd.Series(same, dtype="string[pyarrow]"),
        "str": pd.Series(same, dtype="str"),
        "arrow string": pd.Series(same, dtype=pd.ArrowDtype(pa.string())),
        "arrow large_string": pd.Series(same, dtype=pd.ArrowDtype(pa.large_string())),
        "arrow binary": pd.Series([s.encode() for s in same], dtype=pd.ArrowDtype(pa.binary())),
        "arrow large_binary": pd.Series([s.encode() for s in same], dtype=pd.ArrowDtype(pa.large_binary())),
        "two bytes, some one character": pd.Series(rng.choice(["é", "ab"], n), dtype="string[pyarrow]"),
        "lengths differ": pd.Series(rng.choice(["abc", "ab", ""], n), dtype="string[pyarrow]"),
        "one value shorter": pd.Series(np.where(np.arange(n) == n // 2, "ab", "abc"), dtype="string[pyarrow]"),
        "lengths average to one": pd.Series(np.where(np.arange(n) % 2, "ab", "abcd"), dtype="string[pyarrow]"),
        "missing values": pd.Series(same, dtype="string[pyarrow]").where(rng.random(n) < 0.9),
        "missing values that hold bytes": pd.Series(pd.arrays.ArrowStringArray(pa.chunked_array([_missing_of_width(same, 3)]))),
        "all empty": pd.Series([""] * n, dtype="string[pyarrow]"),
        "python strings": pd.Series(same, dtype="string[python]"),
    }


def test_gather_is_ilocs_take(rng):
    """gather(frame, order) == frame.iloc[order] for every column kind, on whole frames, slices
    (Arrow arrays with an offset), frames of several chunks (concatenated), orders with repeats
    and empty orders; other columns and the index around the strings keep their places."""
    import numpy as np

    n = int(rng.integers(200, 400))
    for name, column in _gather_cases(rng, n).items():
        df = pd.DataFrame({"a": np.arange(n), "x": column, "b": rng.random(n)}, index=pd.Index(rng.integers(0, 9, n), name="i"))
        for d in (df, df.iloc[37 : n - 50], pd.concat([df.iloc[:100], df.iloc[100:], df.iloc[:0]]), df[["x"]]):
            for order in (rng.permutation(len(d)), rng.integers(0, len(d), 3 * len(d)), np.arange(0)):
                got = FC.gather(d, order)
                pd.testing.assert_frame_equal(got, d.iloc[order], obj=name)


def test_gather_takes_fixed_width_strings_as_rows(rng):
    """The fast path is taken where it may be (one byte length, nothing missing) and only there:
    a column it takes is not read by Arrow's take, one it must not take is."""
    import numpy as np

    n = 300
    cases = _gather_cases(rng, n)
    fixed = {k for k in cases if frame_pandas._fixed_width([cases[k]]) is not None}
    assert fixed == {
        "string[pyarrow]",
        "str",
        "arrow string",
        "arrow large_string",
        "arrow binary",
        "arrow large_binary",
        "two bytes, some one character",
    }
    rows = frame_pandas._fixed_width([cases["str"]])
    assert rows.dtype.itemsize == 3 and len(rows) == n
    df = pd.DataFrame({"x": cases["str"], "y": cases["lengths differ"], "z": cases["str"]}, columns=["x", "y", "z"])
    df.columns = ["x", "y", "x"]  # the same name twice: each goes back to its own place
    order = rng.permutation(n)
    pd.testing.assert_frame_equal(FC.gather(df, order), df.iloc[order])
    assert FC.gather(df, np.arange(0)).shape == (0, 3)


def test_the_plan_takes_each_parts_sample_at_the_common_spacing(rng):
    """Parts of very different sizes each sample at their own power-of-two spacing; the plan's
    windows (from every sample cut to the largest spacing) are those of the samples taken at that
    spacing directly, and they enclose the exact cuts."""
    import numpy as np

    from dsort.core import plan as P

    sizes = [0, 1, 7, 300, 5000, int(rng.integers(20000, 40000))]
    parts = [pd.DataFrame({"k": rng.integers(0, 50, n)}) for n in sizes]
    spec = KeySpec.of(parts[0], "k")
    done = [FC.sort_part(p, spec) for p in parts]
    infos = [FC.info(d, 6) for d in done]
    own = [s for _, _, s, *_ in infos]
    assert all(s & (s - 1) == 0 for s in own) and own[-1] == max(own) > own[3] >= 1
    plan = FC.make_plan(spec, 6, None, *infos)
    assert plan.spacing == max(own) and plan.sizes == tuple(sizes)
    direct = P.windows([FC.part_keys(spec, d, plan, step=plan.spacing) for d in done], plan.sizes, plan.spacing, plan.targets)
    assert all(np.array_equal(a, b) for a, b in zip(plan.windows, direct))
    cut = FC.cuts(plan, *[FC.window(spec, d, plan, q) for q, d in enumerate(done)])
    lo, hi = plan.windows
    assert ((lo <= cut[1:-1]) & (cut[1:-1] <= hi)).all()
    slices = [[FC.take(spec, d, plan, cut, t, q) for q, d in enumerate(done)] for t in range(6)]
    out = [FC.merge(parts[0].iloc[:0], cut, t, False, None, *slices[t]) for t in range(6)]
    assert [len(o) for o in out] == list(plan.out_sizes)
    pd.testing.assert_frame_equal(pd.concat(out), reference(pd.concat(parts), ["k"], True))


def _mixed(rng, n, start):
    """A frame of every kind of column gather takes itself or leaves to pandas."""
    import numpy as np

    return pd.DataFrame(
        {
            "i": rng.integers(-5, 5, n),
            "u8": rng.integers(0, 9, n).astype("uint8"),
            "f": rng.choice([np.nan, -0.0, 1.5, np.inf], n),
            "b": rng.random(n) < 0.5,
            "t": pd.to_datetime(rng.integers(0, 10**6, n), unit="s"),
            "td": pd.to_timedelta(rng.integers(0, 99, n), unit="s"),
            "s": pd.Series(_strings(rng, n, 4), dtype="str"),
            "o": pd.Series(rng.choice(["a", "bb"], n), dtype=object),
            "c": pd.Categorical(rng.choice(["x", "y"], n)),
            "n": pd.array(rng.integers(0, 3, n), dtype="Int64"),
            "tz": pd.to_datetime(rng.integers(0, 10**6, n), unit="s").tz_localize("UTC"),
        },
        index=pd.RangeIndex(start, start + 3 * n, 3, name="r"),
    )


def test_gather_of_several_frames_is_concats_take(rng):
    """gather(frames, order) == pd.concat(frames).iloc[order]: every column kind, the index a range,
    integers, strings, datetimes, a MultiIndex, indexes whose names or dtypes differ, a column
    whose dtype differs between the frames, empty frames among them; index=False gives a range."""
    import numpy as np

    sizes = [int(rng.integers(0, 60)) for _ in range(4)] + [1]
    frames = [_mixed(rng, n, 1000 * q) for q, n in enumerate(sizes)]
    total = sum(sizes)
    kinds = {
        "ranges": lambda f, q: f,
        "integers": lambda f, q: f.set_axis(pd.Index(rng.integers(0, 9, len(f)), name="r")),
        "names differ": lambda f, q: f.rename_axis(f"r{q % 2}"),
        "dtypes differ": lambda f, q: f.set_axis(pd.Index(rng.random(len(f)) if q % 2 else rng.integers(0, 9, len(f)), name="r")),
        "strings": lambda f, q: f.set_axis(pd.Index(_strings(rng, len(f), 2), name="r")),
        "nullable": lambda f, q: f.set_axis(pd.Index(pd.array(rng.integers(0, 9, len(f)), dtype="Int64"), name="r")),
        "arrow integers": lambda f, q: f.set_axis(pd.Index(pd.array(rng.integers(0, 9, len(f)), dtype="int64[pyarrow]"), name="r")),
        "booleans": lambda f, q: f.set_axis(pd.Index(rng.random(len(f)) < 0.5, name="r")),
        "datetimes": lambda f, q: f.set_axis(pd.DatetimeIndex(f["t"], name="r")),
        "multi": lambda f, q: f.set_index(["i", "b"]),
        "a column's dtype differs": lambda f, q: f.astype({"i": "int32" if q % 2 else "int64"}),
    }
    for name, make in kinds.items():
        parts = [make(f, q) for q, f in enumerate(frames)]
        whole = pd.concat(parts)
        for order in (rng.permutation(total), rng.integers(0, total, 2 * total), np.arange(0)):
            pd.testing.assert_frame_equal(FC.gather(parts, order), whole.iloc[order], obj=name)
            got = FC.gather(parts, order, index=False)
            pd.testing.assert_frame_equal(got, whole.iloc[order].set_axis(pd.RangeIndex(len(order))), obj=name)
        one = parts[0]
        order = rng.permutation(len(one))
        pd.testing.assert_frame_equal(FC.gather(one, order), one.iloc[order], obj=name)
        for dtype in ("uint32", "int32", "uint64"):  # orders of other integer dtypes, as pandas takes them
            pd.testing.assert_frame_equal(FC.gather(parts, order.astype(dtype)), whole.iloc[order], obj=f"{name}, {dtype}")


def test_gather_keeps_what_concat_keeps(rng):
    """attrs where every frame has the same, the flag against duplicate labels, columns matched
    by label where the frames order them differently."""
    a = pd.DataFrame({"x": [1, 2], "y": ["p", "q"]}).astype({"y": "str"})
    b = pd.DataFrame({"y": ["r"], "x": [3]}).astype({"y": "str"})
    order = [2, 0, 1]
    pd.testing.assert_frame_equal(FC.gather([a, b], order), pd.concat([a, b]).iloc[order])
    a.attrs, c = {"unit": "m"}, a.copy()
    c.attrs = {"unit": "m"}
    assert FC.gather([a, c], [3, 0]).attrs == {"unit": "m"} == pd.concat([a, c]).attrs
    c.attrs = {"unit": "s"}
    assert FC.gather([a, c], [3, 0]).attrs == {} == pd.concat([a, c]).attrs
    strict = a.set_flags(allows_duplicate_labels=False)
    assert not FC.gather(strict, [1, 0]).flags.allows_duplicate_labels


def test_gather_of_a_range_index_with_a_large_or_negative_step(rng):
    for index in (pd.RangeIndex(10, -20, -3), pd.RangeIndex(0, 6 * 10**9, 2 * 10**9), pd.RangeIndex(5, 6)):
        df = pd.DataFrame({"v": range(len(index))}, index=index)
        for dtype in ("int64", "int32", "uint32", "uint64"):
            order = rng.integers(0, len(df), 7).astype(dtype)
            pd.testing.assert_frame_equal(FC.gather(df, order), df.iloc[order])


def test_gather_leaves_its_input_alone_and_makes_host_arrays(rng):
    """The result's arrays are its own (the input's data never written, nor shared), and the big
    ones come from the host's pool (dsort.engine.host)."""
    import numpy as np

    from dsort.engine import host

    n = 100_000
    df = _mixed(rng, n, 0)
    before = df.copy()
    got = FC.gather([df.iloc[: n // 2], df.iloc[n // 2 :]], rng.permutation(n))
    pd.testing.assert_frame_equal(df, before)
    for c in ["i", "f", "t"]:
        assert not np.shares_memory(got[c].to_numpy(), df[c].to_numpy())
        assert got[c].to_numpy().base is not None and got[c].to_numpy().nbytes >= host.SMALL
    assert not np.shares_memory(got.index.to_numpy(), df.index.to_numpy())


def test_the_frame_backend_is_decided_by_the_partitions_type_and_both_backends_say_the_same():
    """``frame_backend.of`` picks pandas' functions for pandas partitions (and for a wired one, an
    index, a series), cudf's only for cudf objects (told by type, cudf not imported); both
    backends offer the same functions, so a caller never asks which one it holds."""
    import inspect
    import sys

    from dsort.core import frame_backend, frame_cudf

    df = pd.DataFrame({"k": [2, 1]})
    for x in (df, df["k"], df.index, df.iloc[:0]):
        assert frame_backend.of(x) is frame_pandas
    fake = type("DataFrame", (), {"__module__": "cudf.core.dataframe"})()
    assert frame_backend.of(fake) is frame_cudf and frame_backend.is_frame(fake)
    assert frame_backend.is_frame(df) and not frame_backend.is_frame([df, df])
    assert "cudf" not in sys.modules or sys.modules["cudf"] is not None  # nothing imported it here

    def api(m):
        return {n for n, f in vars(m).items() if not n.startswith("_") and inspect.isfunction(f) and f.__module__ == m.__name__}

    wanted = {"concat", "gather", "with_positions", "like", "key_frame", "to_pandas", "pandas_meta", "check_keys"}
    assert wanted <= api(frame_pandas) and wanted <= api(frame_cudf), (api(frame_pandas), api(frame_cudf))
    for name in wanted:  # the same arguments
        assert list(inspect.signature(getattr(frame_pandas, name)).parameters) == list(
            inspect.signature(getattr(frame_cudf, name)).parameters
        ), name
    assert frame_pandas.ON_HOST and not frame_cudf.ON_HOST
    order = [1, 0]
    got = frame_pandas.gather([df], order)
    pd.testing.assert_frame_equal(got, df.iloc[order])
    pd.testing.assert_frame_equal(frame_pandas.with_positions(got, 5), df.iloc[order].set_axis(pd.RangeIndex(5, 7)))
