"""The ``dsort`` command line end to end: gen, sort, check, demo; bad input; interruptions;
a cluster of separate processes. Results are compared with NumPy's and pandas' stable sorts."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dsort.cli import main

PY = sys.executable


@pytest.fixture(scope="module")
def scheduler():
    """A small in-process cluster shared by most tests (starting one per test is slow)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", memory_limit="1GB") as cluster:
        yield cluster.scheduler_address


def dsort(*args):
    return main([str(a) for a in args])


def records_reference(data: np.ndarray, key_size=10, descending=False) -> np.ndarray:
    keys = pd.Series(list(map(bytes, data[:, :key_size])))
    return data[keys.sort_values(ascending=not descending, kind="stable").index.to_numpy()]


def read_records(path, record_size=100):
    return np.fromfile(path, np.uint8).reshape(-1, record_size)


def test_gen_sort_check_records(tmp_path, scheduler, capsys):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    assert dsort("gen", "records", 30_000, src, "--seed", 5) == 0
    before = src.read_bytes()
    assert dsort("sort", src, out, "--scheduler", scheduler, "--chunk-size", "300kB") == 0
    assert src.read_bytes() == before, "the input was modified"
    text = capsys.readouterr().out
    np.testing.assert_array_equal(read_records(out), records_reference(read_records(src)))
    lines = {line.split()[0]: line.split() for line in text.splitlines() if line.startswith(("input ", "output "))}
    assert lines["input"][1:] == lines["output"][1:] and lines["input"][1] == "30,000"
    for word in ("records", "wall time", "throughput", "stages", "sort"):
        assert word in text
    assert dsort("check", out) == 0
    assert f"Checksum: {lines['input'][4]}" in capsys.readouterr().out
    assert dsort("check", src) == 1
    assert "FAILURE" in capsys.readouterr().out


@pytest.mark.parametrize("where", ["embedded", "cluster"])
def test_a_changed_record_fails_the_sort_and_writes_nothing(tmp_path, capsys, monkeypatch, where):
    """The output's count and checksum are compared with the input's: a sort that changed one
    payload byte on the way (planted here, in the merges' row gather) exits 1 and leaves nothing
    at OUTPUT, and no runs."""
    from dsort import engine

    from dsort.core import filesort

    take_rows = engine.take_rows

    def corrupting_take_rows(values, positions):
        out = take_rows(values, positions)
        if out.ndim == 2 and out.shape[1] > 10 and len(out):
            out[0, 12] ^= 1
        return out

    monkeypatch.setattr(filesort.engines, "take_rows", corrupting_take_rows)
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    dsort("gen", "records", 5000, src)
    if where == "embedded":
        assert dsort("sort", src, out, "--chunk-size", "100kB") == 1
    else:
        from distributed import LocalCluster

        with LocalCluster(n_workers=1, processes=False, dashboard_address=":0") as cluster:  # sees the patch
            assert dsort("sort", src, out, "--scheduler", cluster.scheduler_address, "--chunk-size", "100kB") == 1
    assert "checksum differs" in capsys.readouterr().err
    assert sorted(os.listdir(tmp_path)) == ["in.bin"]


def test_records_descending_skewed_small_keys(tmp_path, scheduler):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    dsort("gen", "records", 20_000, src, "--skew", "--record-size", 20, "--key-size", 4)
    assert (
        dsort("sort", src, out, "--scheduler", scheduler, "--record-size", 20, "--key-size", 4, "--descending", "--chunk-size", "40kB") == 0
    )
    np.testing.assert_array_equal(read_records(out, 20), records_reference(read_records(src, 20), 4, descending=True))
    assert dsort("check", out, "--record-size", 20, "--key-size", 4, "--descending") == 0


@pytest.mark.parametrize("fmt", ["records", "npy"])
def test_a_check_in_the_wrong_order_says_which_order_the_data_is_in(tmp_path, capsys, fmt):
    """Records and ``.npy`` files do not remember the order they were sorted in: a check in the
    other order fails (exit 1) and says so; a check of unsorted data says nothing more."""
    src = tmp_path / ("in.bin" if fmt == "records" else "in.npy")
    if fmt == "records":
        assert dsort("gen", "records", 5000, src, "--seed", 3) == 0
    else:
        x = np.random.default_rng(3).integers(0, 100, 5000).astype(np.float64)
        x[::7] = np.nan  # missing values come last in either order
        np.save(src, x)
    down, up = tmp_path / f"down{src.suffix}", tmp_path / f"up{src.suffix}"
    assert dsort("sort", src, down, "--descending") == 0 and dsort("sort", src, up) == 0
    capsys.readouterr()
    assert dsort("check", down) == 1
    assert "(it is in descending order: check it with --descending, as it was sorted)" in capsys.readouterr().out
    assert dsort("check", up, "--descending") == 1
    assert "(it is in ascending order: check it with no --descending" in capsys.readouterr().out
    assert dsort("check", src) == 1 and "it is in" not in capsys.readouterr().out
    assert dsort("check", down, "--descending") == 0 and dsort("check", up) == 0


def test_directory_and_glob_inputs_are_concatenated(tmp_path, scheduler):
    d = tmp_path / "in"
    d.mkdir()
    for i in range(3):
        dsort("gen", "records", 3000 + i, d / f"part{i}.dat", "--seed", i)
    both = np.concatenate([read_records(d / f"part{i}.dat") for i in range(3)])
    assert dsort("sort", d, tmp_path / "a.bin", "--scheduler", scheduler) == 0
    assert dsort("sort", str(d / "part*.dat"), tmp_path / "b.bin", "--scheduler", scheduler) == 0
    for name in ("a.bin", "b.bin"):
        np.testing.assert_array_equal(read_records(tmp_path / name), records_reference(both))


def test_relative_paths_are_the_callers_on_a_cluster_started_elsewhere(tmp_path, monkeypatch):
    """Workers started in one directory, ``dsort sort --scheduler`` run from another with
    relative INPUT (a file, a glob), OUTPUT and --local-directory: every path is the caller's."""
    from distributed import LocalCluster

    elsewhere, here = tmp_path / "elsewhere", tmp_path / "here"
    elsewhere.mkdir()
    (here / "in").mkdir(parents=True)
    monkeypatch.chdir(elsewhere)  # the workers' working directory
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0", memory_limit="1GB") as cluster:
        monkeypatch.chdir(here)
        for i in range(2):
            assert dsort("gen", "records", 4000 + i, f"in/part{i}.dat", "--seed", i) == 0
        both = np.concatenate([read_records(here / "in" / f"part{i}.dat") for i in range(2)])
        address = cluster.scheduler_address
        assert dsort("sort", "in/part0.dat", "one.bin", "--scheduler", address, "--local-directory", "runs", "--chunk-size", "100kB") == 0
        assert dsort("sort", "in/part*.dat", "all.bin", "--scheduler", address, "--local-directory", "runs", "--chunk-size", "100kB") == 0
    np.testing.assert_array_equal(read_records(here / "one.bin"), records_reference(read_records(here / "in" / "part0.dat")))
    np.testing.assert_array_equal(read_records(here / "all.bin"), records_reference(both))
    assert not any(elsewhere.iterdir()), "a path was taken as the workers'"


@pytest.mark.parametrize("dtype,descending", [("int64", False), ("float64", True), ("uint8", False)])
def test_sort_npy(tmp_path, scheduler, dtype, descending):
    src, out = tmp_path / "x.npy", tmp_path / "y.npy"
    x = np.random.default_rng(1).integers(0, 50, 20_000).astype(dtype)
    if dtype == "float64":
        x[::7] = np.nan
        x[::11] = -0.0
    np.save(src, x)
    flags = ["--descending"] if descending else []
    assert dsort("sort", src, out, "--scheduler", scheduler, "--chunk-size", "30kB", *flags) == 0
    expected = pd.Series(x).sort_values(ascending=not descending, kind="stable", na_position="last").to_numpy()
    y = np.load(out)
    assert y.dtype == x.dtype
    np.testing.assert_array_equal(y.view(f"u{x.itemsize}"), expected.view(f"u{x.itemsize}"))  # -0.0 kept where it was
    assert dsort("check", out, *flags) == 0


def _parquet_input(tmp_path, n=6000):
    rng = np.random.default_rng(2)
    df = pd.DataFrame(
        {
            "k": rng.integers(0, 20, n),
            "f": np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 5, n).astype(float)),
            "name": rng.choice(["ab", "b", "ä", "a"], n),
            "row": np.arange(n),
        }
    )
    src = tmp_path / "in.parquet"
    df.to_parquet(src, row_group_size=1000)
    return src, df


@pytest.mark.parametrize("fault", ["lost", "doubled", "a column astray", "none"])
def test_a_parquet_sort_that_loses_or_doubles_a_row_fails_its_check(tmp_path, capsys, monkeypatch, fault):
    """The columnar sort hashes each row once and carries the hash with it: a merge that drops a
    row, or repeats one, changes the outputs' checksum, and so does a column whose values went
    astray from their rows' hashes (a sample of each output is hashed again); the sort fails (exit
    1) and writes nothing. The same sort with the merge untouched passes (the check is what tells
    them apart)."""
    from dsort.core import table_chunk as TC

    merge = TC.merge

    def faulty(device, *pieces):
        table, hashes = merge(device, *pieces)
        if len(table) > 1 and fault == "lost":  # the row and its hash gone together
            return table.slice(1), hashes[1:]
        if len(table) > 1 and fault == "doubled":  # the first row replaced by the second: the count kept
            import pyarrow as pa

            return pa.concat_tables([table.slice(1, 1), table.slice(1)]), np.append(hashes[1:2], hashes[1:])
        if len(table) > 1 and fault == "a column astray":  # one column's values in another order
            import pyarrow as pa

            column = table.column("row").take(pa.array(np.arange(len(table))[::-1].copy()))
            return table.set_column(table.schema.get_field_index("row"), "row", column), hashes
        return table, hashes

    monkeypatch.setattr(TC, "merge", faulty)
    src, df = _parquet_input(tmp_path)
    out = tmp_path / "sorted"
    rc = dsort("sort", src, out, "--by", "k", "--cpu")
    said = capsys.readouterr()
    if fault == "none":
        assert rc == 0 and pd.read_parquet(out).sort_values("row")["row"].tolist() == list(range(len(df)))
    else:
        assert rc == 1 and not out.exists(), said
        assert "checksum differs" in said.out + said.err


def test_a_parquet_sorts_chunk_size_sizes_its_parts(tmp_path, capsys):
    """--chunk-size: the in-memory Parquet sort's pieces, and so its output parts, hold about that
    many decoded bytes (as the footers count them), more parts for a smaller size; the rows the
    same. Through runs on disk (a part a row group) the command says it does not apply."""
    import dask
    import pyarrow.parquet as pq

    from dsort.collections import config  # noqa: F401 (dsort's defaults registered before one is overridden)
    from dsort.io import parquet as pio

    src, df = _parquet_input(tmp_path, n=60_000)
    meta = pq.ParquetFile(src).metadata
    row_bytes = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)) / len(df)
    counts = {}
    for size in (None, int(9000 * row_bytes)):
        out = tmp_path / f"sorted-{size}"
        rc = dsort("sort", src, out, "--by", "k", "--cpu", *([] if size is None else ["--chunk-size", str(size)]))
        assert rc == 0 and dsort("check", out) == 0
        got = pd.read_parquet(out)
        assert got["row"].tolist() == df.sort_values("k", kind="stable")["row"].tolist()
        counts[size] = [p["rows"] for p in pio.manifest(out)["parts"]]
    capsys.readouterr()
    assert counts[None] == [1000] * 60  # a piece a row group of 1,000 rows by default
    sized = counts[int(9000 * row_bytes)]  # row groups joined: 7 parts of 8,571 or 8,572 rows
    assert len(sized) == 7 and sum(sized) == len(df) and max(sized) - min(sized) <= 1
    with dask.config.set({"dsort.file-sort.parquet-memory-factor": 1 << 40}):
        assert dsort("sort", src, tmp_path / "runs", "--by", "k", "--cpu", "--chunk-size", "1MB") == 0
    assert "--chunk-size sizes the in-memory sort's parts" in capsys.readouterr().out


@pytest.mark.parametrize("through", ["memory", "runs"])
@pytest.mark.parametrize("by,descending", [(["k"], False), (["name", "f"], True)])
def test_sort_parquet(tmp_path, scheduler, capsys, by, descending, through):
    """In memory, and through runs on disk (what data bigger than memory takes): the same rows."""
    import dask

    from dsort.collections import config  # noqa: F401 (dsort's defaults registered before one is overridden)

    # through runs: as if each byte of the files took a terabyte of memory sorted in memory
    factor = {"dsort.file-sort.parquet-memory-factor": 1 << 40} if through == "runs" else {}
    src, df = _parquet_input(tmp_path)
    out = tmp_path / "sorted"
    flags = ["--descending"] if descending else []
    with dask.config.set(factor):
        assert dsort("sort", src, out, "--by", ",".join(by), "--scheduler", scheduler, *flags) == 0
        text = capsys.readouterr().out
        assert dsort("sort", src, tmp_path / "embedded", "--by", ",".join(by), *flags) == 0  # this process's threads
        embedded = capsys.readouterr().out
    assert ("through runs on disk" in text) == (through == "runs")
    for said in (text, embedded):  # progress bars and where the time went, as a records sort says them
        phases = next(line for line in said.splitlines() if line.startswith("phases"))
        assert all(f" {p} " in phases for p in ("read", "merge", "write", "publish")), phases
        assert "write [" in said and "merge [" in said, said
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "embedded"), pd.read_parquet(out))
    expected = df
    for c in reversed(by):  # a lexicographic stable sort, one column at a time
        expected = expected.sort_values(c, ascending=not descending, kind="stable", na_position="last")
    got = pd.read_parquet(out)
    pd.testing.assert_frame_equal(got, expected.reset_index(drop=True))
    assert sorted(os.listdir(out)) == ["_dsort.json"] + [f"part-{i:05d}.parquet" for i in range(6)]
    capsys.readouterr()
    assert dsort("check", out) == 0  # the manifest names the order
    assert "SUCCESS" in capsys.readouterr().out
    assert dsort("check", src, "--by", ",".join(by), *flags) == 1  # the input is not in that order


def test_parquet_with_a_named_index(tmp_path, scheduler):
    """pandas stores a named index as a column: it comes back as an ordinary column."""
    rng = np.random.default_rng()
    df = pd.DataFrame({"a": rng.integers(0, 5, 500)}, index=pd.Index(rng.permutation(500), name="id"))
    df.to_parquet(tmp_path / "in.parquet")
    assert dsort("sort", tmp_path / "in.parquet", tmp_path / "out", "--by", "a", "--scheduler", scheduler) == 0
    expected = df.sort_values("a", kind="stable").reset_index()
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out")[["id", "a"]], expected[["id", "a"]])


def _arrow_table(rng, n, null_keys=0.15):
    """Sort columns with nulls (nullable integers, booleans, timestamps, dates; nulls at both
    ends) and payload columns of many Arrow types, each with nulls, NaN apart from null, -0.0."""
    import decimal

    import pyarrow as pa

    def col(values, typ, p=0.15):
        mask = rng.random(n) < p
        mask[[0, -1] if n else []] = True
        return pa.array(values, typ, mask=mask)

    return pa.table(
        {
            "ki": col(rng.integers(-3, 3, n), pa.int64(), null_keys),
            "kb": col(rng.random(n) < 0.5, pa.bool_(), null_keys),
            "kt": col(rng.integers(-2, 2, n) * 3_600_000_000, pa.timestamp("us", "Asia/Tokyo")),
            "kd": col(rng.integers(-2, 2, n).astype(np.int32), pa.int32()).cast(pa.date32()),
            "i64": col(rng.choice(np.array([-(2**63), 2**63 - 1, 2**53 + 1, 0], np.int64), n), pa.int64()),
            "u64": col(rng.choice(np.array([0, 2**64 - 1, 2**63], np.uint64), n), pa.uint64()),
            "f64": col(rng.choice([np.nan, -0.0, 0.0, np.inf, 1.5], n), pa.float64()),
            "f16": col(rng.choice([np.nan, -0.0, 1.5], n).astype(np.float16), pa.float16()),
            "tm": col(rng.integers(0, 86_400_000_000, n), pa.time64("us")),
            "dur": col(rng.integers(-10, 10, n), pa.duration("ms")),
            "dec": col([decimal.Decimal(int(v)).scaleb(-4) for v in rng.integers(-(10**12), 10**12, n)], pa.decimal128(20, 4)),
            "bin": col([bytes(rng.integers(0, 256, rng.integers(0, 4), dtype=np.uint8)) for _ in range(n)], pa.binary()),
            "fsb": col([bytes(rng.integers(0, 256, 3, dtype=np.uint8)) for _ in range(n)], pa.binary(3)),
            "ls": col(rng.choice(["", "é", "a\x00b", "z"], n), pa.large_string()),
            "sv": col(rng.choice(["", "é", "a long string, not inline in its view"], n), pa.string_view()),
            "bv": col([bytes(rng.integers(0, 256, 20, dtype=np.uint8)) for _ in range(n)], pa.binary_view()),
            "cat": col(rng.choice(["x", "y"], n), pa.string()).dictionary_encode(),
            "lst": col([[int(v), None][: v % 3] for v in rng.integers(0, 9, n)], pa.list_(pa.int32())),
            "st": col(
                [{"a": int(v), "b": None if v % 2 else str(v)} for v in rng.integers(0, 9, n)],
                pa.struct([("a", pa.int64()), ("b", pa.string())]),
            ),
            "mp": col([[("k", int(v))] for v in rng.integers(0, 9, n)], pa.map_(pa.string(), pa.int64())),
            "nul": pa.nulls(n),
        }
    )


@pytest.mark.parametrize("case", ["random", "cluster", "one row", "all keys null", "empty"])
@pytest.mark.parametrize(
    "by,descending",
    [(["ki"], False), (["kb", "ki"], True), (["kt"], False), (["kd", "kb"], True), (["dec", "ki"], False), (["bin", "ki"], True)],
)
def test_parquet_nullable_keys_and_any_payload(tmp_path, rng, request, case, by, descending):
    """Nullable integer and boolean keys sort like pandas' stable sort_values (nulls last); every
    payload column comes out with the input's Arrow type and exactly its values (reprs compared:
    NaN apart from null, -0.0 apart from 0.0) in the reference's order."""
    import pyarrow.parquet as pq

    n = {"one row": 1, "empty": 0}.get(case, 3000)
    src, out = tmp_path / "in.parquet", tmp_path / "out"
    pq.write_table(_arrow_table(rng, n, null_keys=1.0 if case == "all keys null" else 0.15), src, row_group_size=700)
    where = ["--scheduler", request.getfixturevalue("scheduler")] if case == "cluster" else []
    assert dsort("sort", src, out, "--by", ",".join(by), *(["--descending"] if descending else []), *where) == 0
    keys = pd.read_parquet(src, columns=by, dtype_backend="numpy_nullable").assign(row=np.arange(n))
    for c in reversed(by):  # a lexicographic stable sort, one column at a time
        keys = keys.sort_values(c, ascending=not descending, kind="stable", na_position="last")
    given, got = pq.read_table(src), pq.read_table(out)
    assert got.schema.names == given.schema.names and got.schema.types == given.schema.types
    for c in given.column_names:
        values = given[c].to_pylist()
        assert list(map(repr, got[c].to_pylist())) == [repr(values[i]) for i in keys["row"]], c
    assert dsort("check", out) == 0


def test_parquet_keys_dsort_does_not_order_are_refused_before_any_work(tmp_path, capsys, monkeypatch):
    import pyarrow.parquet as pq

    from dsort.io import parquet

    monkeypatch.setattr(parquet, "sort_job", lambda *a, **k: pytest.fail("sorting work began"))
    src = tmp_path / "in.parquet"
    pq.write_table(_arrow_table(np.random.default_rng(), 50), src)
    for c in ["fsb", "cat", "lst", "st", "mp", "nul"]:
        for command in (["sort", src, tmp_path / "out"], ["check", src]):
            assert dsort(*command, "--by", f"ki,{c}") == 2, c
            err = capsys.readouterr().err
            assert f"cannot sort by column '{c}' of type" in err and len(err.strip().splitlines()) == 1, err
    assert os.listdir(tmp_path) == ["in.parquet"]


def test_a_damaged_parquet_page_is_one_line_and_writes_nothing(tmp_path, capsys):
    """Header and footer intact, one data page's header overwritten: found only when that row
    group is read, in the middle of the sort (or the check)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"k": np.arange(5000)[::-1], "s": [str(i) for i in range(5000)]}), src, row_group_size=1000)
    page = pq.ParquetFile(src).metadata.row_group(2).column(1).data_page_offset
    data = bytearray(src.read_bytes())
    data[page : page + 16] = b"\xff" * 16
    src.write_bytes(data)
    for by in ("k", "s"):
        assert dsort("sort", src, tmp_path / "out", "--by", by) == 2
        err = capsys.readouterr().err
        assert f"{src}: row group 2 is damaged" in err and "nothing was written at" in err and len(err.strip().splitlines()) == 1, err
        assert dsort("check", src, "--by", by) == 2
        assert f"{src}: row group 2 is damaged" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["in.parquet"]


def test_empty_inputs_sort_to_empty_outputs(tmp_path, scheduler):
    (tmp_path / "e.bin").write_bytes(b"")
    np.save(tmp_path / "e.npy", np.zeros(0, np.float32))
    pd.DataFrame({"a": pd.Series([], dtype="int64")}).to_parquet(tmp_path / "e.parquet")
    assert dsort("sort", tmp_path / "e.bin", tmp_path / "o.bin", "--scheduler", scheduler) == 0
    assert (tmp_path / "o.bin").stat().st_size == 0
    assert dsort("sort", tmp_path / "e.npy", tmp_path / "o.npy", "--scheduler", scheduler) == 0
    assert np.load(tmp_path / "o.npy").dtype == np.float32 and len(np.load(tmp_path / "o.npy")) == 0
    assert dsort("sort", tmp_path / "e.parquet", tmp_path / "o", "--by", "a", "--scheduler", scheduler) == 0
    assert len(pd.read_parquet(tmp_path / "o")) == 0
    assert dsort("check", tmp_path / "o.bin") == 0


def _bad_inputs(tmp_path):
    (tmp_path / "odd.bin").write_bytes(bytes(150))
    np.save(tmp_path / "two.npy", np.zeros((3, 2)))
    np.save(tmp_path / "cplx.npy", np.zeros(3, np.complex128))
    np.save(tmp_path / "damaged.npy", np.arange(100))
    with open(tmp_path / "damaged.npy", "r+b") as f:  # the magic intact, the header's dictionary not
        f.seek(20)
        f.write(b"#$%^&*()!@")
    pd.DataFrame({"a": [1, 2]}).to_parquet(tmp_path / "t.parquet")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.bin").write_bytes(bytes(100))
    (tmp_path / "exists.bin").write_bytes(b"keep")
    with open(tmp_path / "big.bin", "wb") as f:  # sparse: more 1-record runs than two merge passes take (1024 ** 2)
        f.truncate(100 * (1024**2 + 1))
    (tmp_path / "important").mkdir()
    (tmp_path / "important" / "notes.txt").write_bytes(b"mine")
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "r.bin").write_bytes(bytes(200))
    np.save(tmp_path / "mixed" / "stray.npy", np.arange(5))
    (tmp_path / "pq").mkdir()
    pd.DataFrame({"a": np.array([2, 1], np.int32)}).to_parquet(tmp_path / "pq" / "1.parquet")
    pd.DataFrame({"a": np.array([4, 3], np.int64)}).to_parquet(tmp_path / "pq" / "2.parquet")
    return [
        ([tmp_path / "odd.bin", tmp_path / "out"], "not a multiple of the record size"),
        ([tmp_path / "missing.bin", tmp_path / "out"], "does not exist"),
        ([str(tmp_path / "nothing*.bin"), tmp_path / "out"], "no input file matches"),
        ([tmp_path / "two.npy", tmp_path / "out"], "1-D"),
        ([tmp_path / "cplx.npy", tmp_path / "out"], "unsupported dtype complex128"),
        ([tmp_path / "damaged.npy", tmp_path / "out.npy"], "damaged.npy: not a readable .npy file"),
        ([tmp_path / "t.parquet", tmp_path / "out", "--by", "b"], "no column 'b'"),
        ([tmp_path / "t.parquet", tmp_path / "out"], "--by"),
        ([tmp_path / "d", tmp_path / "d" / "out"], "inside INPUT"),
        ([tmp_path / "d" / "a.bin", tmp_path / "d", "--overwrite"], "inside OUTPUT"),  # would delete the input
        ([tmp_path / "pq", tmp_path / "out", "--by", "a"], "column types differ"),
        ([tmp_path / "d" / "a.bin", tmp_path / "exists.bin"], "--overwrite"),
        ([tmp_path / "d" / "a.bin", tmp_path / "out", "--key-size", 101], "--key-size"),
        ([tmp_path / "d" / "a.bin", tmp_path / "important", "--overwrite"], "did not write"),
        ([tmp_path / "t.parquet", tmp_path / "important", "--by", "a", "--overwrite"], "did not write"),
        ([tmp_path / "mixed", tmp_path / "out"], "npy: stray.npy; records: r.bin"),
        ([tmp_path / "mixed", tmp_path / "out", "--format", "records"], "several formats"),
        ([tmp_path / "d" / "a.bin", tmp_path / "out.npy"], "named like npy but INPUT is records"),
        ([tmp_path / "big.bin", tmp_path / "out", "--chunk-size", "1"], "smallest workable --chunk-size"),
        ([tmp_path / "d" / "a.bin", tmp_path / "out", "--scheduler", "banana"], "not a scheduler address"),
    ]


def test_bad_inputs_fail_clearly_and_write_nothing(tmp_path, capsys):
    # no cluster starts: input is checked first
    for args, message in _bad_inputs(tmp_path):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        assert dsort("sort", *args) == 2, args
        err = capsys.readouterr().err
        assert message in err and len(err.strip().splitlines()) == 1, (args, err)
        assert sorted(p.name for p in tmp_path.rglob("*")) == before, args
    assert (tmp_path / "exists.bin").read_bytes() == b"keep"
    assert (tmp_path / "important" / "notes.txt").read_bytes() == b"mine"
    assert dsort("check", tmp_path / "mixed") == 2  # never a SUCCESS for the .npy alone
    assert "several formats" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option,value", [("--memory-limit", "banana"), ("--threads-per-worker", 0), ("--n-workers", 0), ("--chunk-size", "lots")]
)
def test_bad_options_are_one_line(tmp_path, capsys, option, value):
    (tmp_path / "in.bin").write_bytes(bytes(1000))
    with pytest.raises(SystemExit) as exit:
        dsort("sort", tmp_path / "in.bin", tmp_path / "out.bin", option, value)
    err = capsys.readouterr().err
    assert exit.value.code == 2 and f"argument {option}: " in err and len(err.strip().splitlines()) == 1, err
    assert os.listdir(tmp_path) == ["in.bin"]


@pytest.fixture
def locked(tmp_path, monkeypatch):
    """A directory of tmp_path no one may write into (root as any other user sees it), and a sort
    that fails the test if its work begins."""
    from dsort import fixed_sort

    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    if os.geteuid() == 0:  # root writes anywhere: the directory as any other user sees it
        access = os.access
        monkeypatch.setattr(os, "access", lambda p, mode, **k: not (Path(p) == locked and mode & os.W_OK) and access(p, mode, **k))
    monkeypatch.setattr(fixed_sort, "sort", lambda *a, **k: pytest.fail("sorting work began"))
    return locked


@pytest.mark.parametrize("where", ["locked", "locked/new/runs", "a-file/runs"])
def test_an_unusable_local_directory_is_refused_before_any_work(tmp_path, capsys, locked, where):
    (tmp_path / "a-file").write_text("")
    dsort("gen", "records", 1000, tmp_path / "in.bin")
    capsys.readouterr()
    assert dsort("sort", tmp_path / "in.bin", tmp_path / "out.bin", "--local-directory", tmp_path / where) == 2
    err = capsys.readouterr().err
    why = "cannot be made" if where.startswith("a-file") else "is not writable"
    assert f"--local-directory {tmp_path / where} {why}" in err and len(err.strip().splitlines()) == 1, err
    assert sorted(os.listdir(tmp_path)) == ["a-file", "in.bin", "locked"] and os.listdir(locked) == []


def test_an_unwritable_output_directory_is_refused_before_any_work(tmp_path, capsys, locked):
    dsort("gen", "records", 1000, tmp_path / "in.bin")
    capsys.readouterr()
    assert dsort("sort", tmp_path / "in.bin", locked / "out.bin") == 2
    err = capsys.readouterr().err
    assert f"the directory of OUTPUT {locked / 'out.bin'} is not writable" in err and len(err.strip().splitlines()) == 1, err
    assert os.listdir(locked) == []


@pytest.mark.parametrize("where", ["npy output", "parquet output", "allocation"])
def test_a_full_disk_is_one_line_and_leaves_nothing(tmp_path, capsys, monkeypatch, where):
    """OUTPUT's writes fail with ENOSPC (faults injected in the writers: os.pwrite for .npy and
    records, pyarrow's write_table for Parquet parts, posix_fallocate for the up-front allocation)."""
    import errno

    import pyarrow.parquet as pq

    def full(*a, **k):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if where == "parquet output":
        src, out = tmp_path / "in.parquet", tmp_path / "out"
        pd.DataFrame({"a": np.arange(5000)[::-1]}).to_parquet(src, row_group_size=1000)
        monkeypatch.setattr(pq, "write_table", full)
    else:
        src, out = tmp_path / "in.npy", tmp_path / "out.npy"
        np.save(src, np.arange(50_000)[::-1])
        monkeypatch.setattr(os, "pwrite" if where == "npy output" else "posix_fallocate", full)
    assert dsort("sort", src, out, *(["--by", "a"] if where == "parquet output" else [])) == 2
    err = capsys.readouterr().err
    assert ("no space for OUTPUT" if where == "allocation" else "No space left on device") in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert os.listdir(tmp_path) == [src.name]


def test_overwrite_replaces_only_when_complete(tmp_path, scheduler):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    dsort("gen", "records", 1000, src)
    out.write_bytes(b"old")
    assert dsort("sort", src, out, "--scheduler", scheduler, "--overwrite") == 0
    np.testing.assert_array_equal(read_records(out), records_reference(read_records(src)))
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "out.bin"]


def test_check_catches_unsorted_and_changed_records(tmp_path, scheduler, capsys):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    dsort("gen", "records", 5000, src)
    dsort("sort", src, out, "--scheduler", scheduler)
    capsys.readouterr()
    assert dsort("check", out, "--chunk-size", "10kB") == 0
    good = capsys.readouterr().out
    data = read_records(out).copy()
    data[2000, 50] ^= 1  # a changed payload byte: still in order, another checksum
    data.tofile(out)
    assert dsort("check", out) == 0
    changed = capsys.readouterr().out
    checksum = [line for line in good.splitlines() if line.startswith("Checksum")]
    assert checksum and checksum[0] not in changed
    data[[1000, 3000]] = data[[3000, 1000]]  # two swapped records: out of order
    data.tofile(out)
    assert dsort("check", out, "--chunk-size", "10kB") == 1
    bad = capsys.readouterr().out
    assert "FAILURE - 2 records out of order, the first at record 1,001" in bad  # record 1001 sorts before its predecessor


@pytest.mark.parametrize("descending", [False, True])
def test_out_of_core_runs_on_disk_with_a_tiny_memory_limit(tmp_path, capsys, descending):
    """150 MB of records under two workers of 24 MB: most sorted runs go to --local-directory
    (made for the job, and removed with its runs afterwards); the output is a stable sort."""
    src, out, spill = tmp_path / "in.bin", tmp_path / "out.bin", tmp_path / "spill" / "deeper"
    dsort("gen", "records", 1_500_000, src, "--skew")
    flags = ["--descending"] if descending else []
    assert (
        dsort(
            "sort",
            src,
            out,
            "--cpu",
            "--n-workers",
            2,
            "--threads-per-worker",
            1,
            "--memory-limit",
            "24MB",
            "--local-directory",
            spill,
            *flags,
        )
        == 0
    )
    text = capsys.readouterr().out
    assert "2 threads on the CPU, host memory 45.78 MiB" in text
    tiers = dict((w.split()[1], int(w.split()[0].replace(",", ""))) for w in text.split("runs: ")[1].splitlines()[0].split(", "))
    assert tiers["on"] > tiers.get("in", 0) > 0, text  # most runs on disk, the first ones in memory
    np.testing.assert_array_equal(read_records(out), records_reference(read_records(src), descending=descending))
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "out.bin"]  # runs and the directories made for them: gone


def test_a_memory_limit_too_small_is_refused_before_any_work(tmp_path, capsys):
    src = tmp_path / "in.bin"
    dsort("gen", "records", 1000, src)
    assert dsort("sort", src, tmp_path / "out.bin", "--cpu", "--n-workers", 2, "--memory-limit", "1MB") == 2
    err = capsys.readouterr().err
    assert "too small" in err and "the smallest workable total is" in err and "Traceback" not in err
    assert sorted(os.listdir(tmp_path)) == ["in.bin"]


def test_demo(capsys):
    assert dsort("demo", "-n", 50_000, "--n-workers", 1) == 0
    text = capsys.readouterr().out
    assert "SUCCESS - all records are in order" in text and "throughput" in text and "Records: 50,000" in text


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dsort_process(*args, **kw):
    return subprocess.Popen([PY, "-m", "dsort", *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_sort_leaves_nothing_at_output(tmp_path, sig):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    dsort("gen", "records", 1_000_000, src)
    p = _dsort_process("sort", src, out, "--n-workers", 1, "--threads-per-worker", 1, "--chunk-size", "1MB")
    deadline = time.time() + 60
    while not any(n.startswith(".out.bin.dsort-tmp") for n in os.listdir(tmp_path)):  # mid-run: the output is staged
        assert p.poll() is None and time.time() < deadline, p.stdout.read() if p.poll() is not None else "timeout"
        time.sleep(0.05)
    time.sleep(0.5)
    p.send_signal(sig)
    text = p.communicate(timeout=60)[0]
    assert p.returncode == 128 + sig, text
    last = text.strip().splitlines()[-1]
    assert last == f"dsort: {'interrupted' if sig == signal.SIGINT else 'terminated (SIGTERM)'}; nothing was written at OUTPUT", text
    assert "Traceback" not in text, text
    assert sorted(os.listdir(tmp_path)) == ["in.bin"], text


@pytest.mark.parametrize("delay", [0.0, 0.5, 1.5])
def test_sigterm_at_any_moment_ends_the_run_promptly(tmp_path, delay):
    """From start-up to the merges: exit 143 within seconds, never a traceback, nothing left."""
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    dsort("gen", "records", 5_000_000, src)  # about 2.5 s of sorting on 2 cores (3e6: 1.4 s, too few)
    p = _dsort_process("sort", src, out, "--cpu", "--chunk-size", "4MB")
    time.sleep(delay)
    assert p.poll() is None, "the sort ended before the signal: give it more records"
    p.send_signal(signal.SIGTERM)
    text = p.communicate(timeout=30)[0]
    assert p.returncode in (143, -signal.SIGTERM), text  # -15: before dsort's own handler was in place
    assert "Traceback" not in text and text.count("dsort: terminated") <= 1, text
    assert sorted(os.listdir(tmp_path)) == ["in.bin"], text


@contextlib.contextmanager
def _process_cluster(*worker_options, workers=2, homes=None, env=None):
    """A dask scheduler and ``workers`` worker processes on loopback (``dask worker`` with
    ``worker_options``): ``(address, [worker Popen, ...])``; every process started here is ended
    (by its own handle) when the block ends, and ``procs`` of the caller may join them. ``homes``:
    a directory per worker, its working directory, its ``--local-directory`` and its temporary
    directory (as on machines of their own); ``env``: the workers' environment."""
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    bindir = Path(PY).parent
    dask_cmd = [str(bindir / "dask")] if (bindir / "dask").exists() else [PY, "-m", "dask"]
    procs = [
        subprocess.Popen(
            [*dask_cmd, "scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        for w in range(workers):
            home = None if homes is None else Path(homes[w])
            where = [] if home is None else ["--local-directory", str(home / "local")]
            worker_env = dict(env or os.environ)
            if home is not None:
                (home / "tmp").mkdir(parents=True, exist_ok=True)
                worker_env.update(TMPDIR=str(home / "tmp"), DASK_TEMPORARY_DIRECTORY=str(home / "tmp"))
            procs.append(
                subprocess.Popen(
                    [
                        *dask_cmd,
                        "worker",
                        address,
                        "--nthreads",
                        "1",
                        "--host",
                        "127.0.0.1",
                        "--no-dashboard",
                        "--memory-limit",
                        "1GB",
                        *where,
                        *worker_options,
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    cwd=home,
                    env=worker_env,
                )
            )
        from distributed import Client

        with Client(address, timeout="60s") as c:
            c.wait_for_workers(workers, timeout=60)
        yield address, procs
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def test_sort_on_a_running_cluster_of_separate_processes(tmp_path):
    with _process_cluster() as (address, _):
        src, out = tmp_path / "in.bin", tmp_path / "out.bin"
        dsort("gen", "records", 40_000, src)
        p = _dsort_process("sort", src, out, "--scheduler", address, "--chunk-size", "500kB")
        text = p.communicate(timeout=120)[0]
        assert p.returncode == 0, text
        assert f"the cluster at {address}: 2 workers, 2 threads" in text
        np.testing.assert_array_equal(read_records(out), records_reference(read_records(src)))
        p = _dsort_process("check", out, "--scheduler", address)
        assert p.communicate(timeout=60)[0].count("SUCCESS") == 1 and p.returncode == 0


def test_one_machine_set_up_as_two_loses_a_worker_during_the_merges(tmp_path):
    """Two workers started as on two machines (each from its own directory, with its own local and
    temporary directories, every slice of the other's runs read through it), a user's `dsort sort
    --scheduler` at the shell, one worker killed (its nanny starts it again) while the merges run:
    the same output as a stable sort, and no runs left in either worker's directories."""
    from distributed import Client

    homes = [tmp_path / "machine-a", tmp_path / "machine-b"]
    env = dict(os.environ, DASK_DSORT__READ_RUNS_WHERE_THEY_ARE="true")
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    dsort("gen", "records", 300_000, src, "--skew")
    with _process_cluster(workers=2, homes=homes, env=env) as (address, procs), Client(address, timeout="60s") as client:
        pids = list(client.run(os.getpid).values())
        p = _dsort_process("sort", src, out, "--scheduler", address, "--chunk-size", "3MB")
        procs.append(p)  # ended too if it hangs
        deadline, killed = time.time() + 90, False
        while time.time() < deadline and p.poll() is None:
            if any("dsort-merge" in str(k) for keys in client.processing().values() for k in keys):
                os.kill(pids[0], signal.SIGKILL)
                killed = True
                break
            time.sleep(0.01)
        text = p.communicate(timeout=180)[0]
        client.wait_for_workers(2, timeout=60)
        left = client.run(lambda dask_worker: [str(q) for q in Path(dask_worker.local_directory).rglob("dsort-runs-*")])
    assert killed, "the sort ended before the merges could lose a worker: make it longer\n" + text
    assert p.returncode == 0, text
    assert "on workers' disks" in text, text  # each worker's runs in its own local directory
    np.testing.assert_array_equal(read_records(out), records_reference(read_records(src)))
    assert not any(left.values()), left
    assert not [q for home in homes for q in home.rglob("dsort-runs-*")]


def test_losing_the_last_worker_without_a_nanny_fails_in_bounded_time(tmp_path):
    """A worker started with --no-nanny is not restarted: when the cluster has had no workers for
    dsort.no-workers-timeout seconds, the sort fails in one line (exit 1) instead of waiting forever."""
    with _process_cluster("--no-nanny", workers=1) as (address, procs):
        worker = procs[1]
        src, out = tmp_path / "in.bin", tmp_path / "out.bin"
        dsort("gen", "records", 2_000_000, src)  # seconds of work for the one worker
        env = dict(os.environ, DASK_DSORT__NO_WORKERS_TIMEOUT="3")
        p = _dsort_process("sort", src, out, "--scheduler", address, "--chunk-size", "1MB", env=env)
        procs.append(p)  # ended too if it hangs
        deadline = time.time() + 60
        while not any(n.startswith(".out.bin.dsort-tmp") for n in os.listdir(tmp_path)):  # the job has started
            assert p.poll() is None and time.time() < deadline, p.stdout.read() if p.poll() is not None else "timeout"
            time.sleep(0.05)
        time.sleep(0.5)
        assert p.poll() is None, "the sort ended before its worker could be lost"
        worker.kill()
        t = time.time()
        text = p.communicate(timeout=60)[0]
        assert time.time() - t < 30, text
        assert p.returncode == 1, text
        assert text.strip().splitlines()[-1].startswith("dsort: FAILED: the cluster at") and "no workers for 3 s" in text, text
        assert "Traceback" not in text and "nothing was written at OUTPUT" in text, text
        assert sorted(os.listdir(tmp_path)) == ["in.bin"], text


def test_ucx_is_for_gpu_clusters(tmp_path, capsys):
    """--protocol ucx on CPU workers, or without UCX for dask installed, fails clearly before any
    work; the cluster options it becomes are dask-cuda's own."""
    import importlib.util

    from dsort.collections import config
    from dsort.cluster import ucx_options
    from dsort.core.errors import InputError

    assert ucx_options() == {} and ucx_options("tcp") == {}
    with pytest.raises(InputError, match="tcp or ucx"):
        ucx_options("udp")
    if importlib.util.find_spec("distributed_ucxx") is None:
        with pytest.raises(InputError, match="pip install 'dsort\\[ucx\\]'"):
            ucx_options("ucx")
    else:
        pool = config.get("ucx.rmm-pool-size")
        assert ucx_options("ucx") == {"protocol": "ucx", "rmm_pool_size": pool, "rmm_allocator_external_lib_list": ["cupy"]}
        assert ucx_options("ucx", "0.1")["rmm_pool_size"] == 0.1 and ucx_options("ucx", "8GB")["rmm_pool_size"] == "8GB"
    with pytest.raises(InputError, match="UCX is for GPU workers"):
        from dsort.cluster import connect

        with connect(cpu=True, protocol="ucx"):
            pass


def test_a_fractional_device_memory_limit_is_a_share_of_the_gpu():
    """dask-cuda reads --device-memory-limit 0.8 as 80 % of the GPU; so does dsort (it was 0 bytes)."""
    from dsort.cluster import device_limit

    gib = 1 << 30
    assert device_limit("0.8", 80 * gib) == int(0.8 * 80 * gib)
    assert device_limit(0.5, 80 * gib) == 40 * gib
    assert device_limit("20GB", 80 * gib) == 20 * 10**9
    assert device_limit("auto", 80 * gib) is None and device_limit(None, 80 * gib) is None
    with pytest.raises(ValueError):
        device_limit("banana", 80 * gib)


def test_option_parsers_and_check_blocks():
    """The command line's small parsers (counts, byte sizes, memory limits) and the block size of
    `dsort check` (--chunk-size, else the dsort.check.block setting), against hand-worked values."""
    import argparse

    import dask

    from dsort import cli_parser
    from dsort.service import LimitError, parse_size

    assert [cli_parser.count(t) for t in ("0", "1000000", "1_000_000", "1e6", "2.5e3")] == [0, 10**6, 10**6, 10**6, 2500]
    for bad in ("-1", "1.5", "ten", "1e-3"):
        with pytest.raises(argparse.ArgumentTypeError):
            cli_parser.count(bad)
    assert cli_parser.nbytes("64MiB") == 64 << 20 and cli_parser.nbytes("1kB") == 1000 and cli_parser.nbytes("100") == 100
    with pytest.raises(argparse.ArgumentTypeError, match="not a size"):
        cli_parser.nbytes("lots")
    assert cli_parser.size("0.5") == "0.5" and cli_parser.size("auto") == "auto"
    with pytest.raises(argparse.ArgumentTypeError):
        cli_parser.size("-2GB")
    assert parse_size("0.5", 1000) == 500 and parse_size("2GB") == 2 * 10**9 and parse_size(None) is None
    assert parse_size(1, 1000) == 1000 and parse_size(4096) == 4096  # 1 is the whole; an int beyond it, bytes
    for bad in ("0", "0.5", "x", "-2GB", "0GB"):
        with pytest.raises(LimitError):
            parse_size(bad)
    from dsort.check import rows_per_block

    assert rows_per_block(100, 1000) == 10 and rows_per_block(100, 50) == 1
    assert rows_per_block(8, None) == (64 << 20) // 8 and rows_per_block(0, 10) == 10
    with dask.config.set({"dsort.check.block": "1KiB"}):
        assert rows_per_block(100, None) == 10


@pytest.mark.parametrize("what", ["parquet", "parquet --gpu", "records", "records --cpu"])
def test_the_command_keeps_freed_memory_where_it_sorts_on_its_cpus(tmp_path, monkeypatch, what):
    """On a box with a GPU, `dsort sort` of a Parquet file (its rows stay on the CPU, with --gpu
    too: only the keys go to the GPU) and any sort with --cpu tune this process's allocators for
    sorting on its CPUs; a records sort that may take the GPU, or --gpu, leaves them as they
    are."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from dsort.engine import device as dev, host

    calls = []
    monkeypatch.setattr(dev, "has_gpu", lambda: True)
    monkeypatch.setattr(host, "keep_freed_memory", lambda: calls.append(1))
    kind, *flags = what.split()
    src = tmp_path / ("in.parquet" if kind == "parquet" else "in.bin")
    if kind == "parquet":
        pq.write_table(pa.table({"k": np.arange(50)[::-1].copy()}), src)
        flags += ["--by", "k"]
    else:
        src.write_bytes(np.random.default_rng(0).integers(0, 256, 100 * 20, dtype=np.uint8).tobytes())
    # the sort itself may fail without a GPU (--gpu): only whether the allocators were tuned
    # before it counts here
    with contextlib.suppress(Exception):
        main(["sort", str(src), str(tmp_path / "out"), *flags])
    assert bool(calls) == (what in ("parquet", "parquet --gpu", "records --cpu"))


@pytest.mark.parametrize(
    "damage", ["none", "a part removed", "a row dropped", "a part doubled", "a part added", "another checksum", "an older manifest"]
)
def test_check_holds_a_parquet_output_to_its_manifest(tmp_path, capsys, damage):
    """`dsort check` of a dsort output directory compares it with its manifest: a part lost whole,
    a row dropped from one or a Parquet file the manifest does not list fails the check (exit 1,
    a FAILURE line naming it), though the rows left are still in order; so does another checksum,
    unless the manifest's rows were hashed by an older dsort (no ``row_hash``: not comparable)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng()
    n = 3000
    pq.write_table(pa.table({"k": rng.integers(0, 1000, n), "v": rng.random(n)}), tmp_path / "in.parquet", row_group_size=500)
    out = tmp_path / "out"
    assert dsort("sort", tmp_path / "in.parquet", out, "--by", "k", "--cpu") == 0  # a part a row group
    parts = sorted(p for p in out.iterdir() if p.suffix == ".parquet")
    assert len(parts) == 6
    if damage == "a part removed":
        parts[3].unlink()
    elif damage == "a row dropped":
        t = pq.read_table(parts[2])
        pq.write_table(t.slice(0, len(t) - 1), parts[2])
    elif damage == "a part doubled":  # the copy sorts last, its first key after the last part's
        last = pq.read_table(parts[-1])
        pq.write_table(last.slice(len(last) - 1), out / "part-99999.parquet")
    elif damage == "a part added":
        pq.write_table(pq.read_table(parts[-1]).slice(0, 0), out / "zz-extra.parquet")
    elif damage in ("another checksum", "an older manifest"):  # older: rows hashed otherwise
        import json

        manifest = json.loads((out / "_dsort.json").read_text())
        manifest["checksum"] = "123abc"
        if damage == "an older manifest":
            del manifest["row_hash"]
        (out / "_dsort.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    code = dsort("check", out)
    text = capsys.readouterr().out
    if damage in ("none", "an older manifest"):
        assert code == 0 and "SUCCESS" in text and "FAILURE" not in text, text
        return
    assert code == 1 and "SUCCESS" not in text, text
    expect = {
        "a part removed": "part(s) the manifest lists are missing: part-00003.parquet",
        "a row dropped": f"{n - 1:,} records where the manifest says {n:,}",
        "a part doubled": "Parquet file(s) the manifest does not list: part-99999.parquet",
        "a part added": "Parquet file(s) the manifest does not list: zz-extra.parquet",
        "another checksum": "where the manifest says 123abc",
    }[damage]
    assert f"FAILURE - 1 {expect}" in text or f"FAILURE - {expect}" in text or ("FAILURE - checksum" in text and expect in text), text
