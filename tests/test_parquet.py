"""dsort.io.parquet without the command line: row groups found and read, sort columns checked,
value-only row hashes, a sort job's parts and manifest, and check tasks; pandas' stable
``sort_values`` and pyarrow reading the files back are the references."""

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dsort.core import valsort
from dsort.io import InputError
from dsort.io import parquet as pio
from dsort.io import parquet_check as pcheck

from .conftest import HAS_GPU


def _frame(rng, n):
    """Sort keys with ties, NaN, -0.0 and inf; ASCII strings (dsort and pandas agree on their
    order); a payload column that tells rows apart."""
    f = rng.choice(np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -2.5]), n)
    return pd.DataFrame(
        {
            "i": rng.integers(-3, 3, n),
            "f": f,
            "s": ["".join(rng.choice(list("abAB"), int(k))) for k in rng.integers(0, 4, n)],
            "n": pd.array(np.where(rng.random(n) < 0.2, None, rng.integers(-2, 2, n)), dtype="Int64"),  # nulls: keyed by bytes
            "row": np.arange(n),
        }
    )


def _files(tmp_path, df, pieces, rng):
    """``df`` cut into ``pieces`` files of random row groups; the files and their group sizes."""
    cuts = np.sort(rng.integers(0, len(df) + 1, pieces - 1))
    files, groups = [], []
    for i, part in enumerate(np.split(np.arange(len(df)), cuts)):
        size = int(rng.integers(1, 400))
        files.append(tmp_path / f"in{i}.parquet")
        pq.write_table(pa.Table.from_pandas(df.iloc[part], preserve_index=False), files[-1], row_group_size=size)
        groups += [min(size, len(part) - s) for s in range(0, len(part), size)] or [0]
    return files, groups


def _reference(df, by, descending):
    """pandas' stable sort, one column at a time from the last (a lexicographic stable sort)."""
    for c in reversed(by):
        df = df.sort_values(c, ascending=not descending, kind="stable", na_position="last")
    return df.reset_index(drop=True)


def test_row_groups_and_schema(tmp_path, rng):
    df = _frame(rng, int(rng.integers(0, 2000)))
    files, groups = _files(tmp_path, df, 3, rng)
    parts, lens, schema = pio.row_groups(files)
    assert lens == groups and sum(lens) == len(df)
    assert parts == [(str(f), g) for f in files for g in range(pq.ParquetFile(f).num_row_groups)]
    assert schema.equals(pq.read_schema(files[0]).remove_metadata()) and not schema.metadata
    pq.write_table(pa.table({"i": [1], "other": [2]}), tmp_path / "names.parquet")
    with pytest.raises(InputError, match=r"columns \['i', 'other'\] differ"):
        pio.row_groups([files[0], tmp_path / "names.parquet"])
    pq.write_table(pa.Table.from_pandas(df.astype({"i": "int32"}), preserve_index=False), tmp_path / "types.parquet")
    with pytest.raises(InputError, match="i is int32 there, int64 in"):
        pio.row_groups([files[0], tmp_path / "types.parquet"])
    (tmp_path / "junk.parquet").write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        pio.row_groups([tmp_path / "junk.parquet"])
    assert pio.row_groups([]) == ([], [], None)


def test_check_columns(tmp_path):
    schema = pa.schema([("i", pa.int64()), ("s", pa.string()), ("l", pa.list_(pa.int32())), ("d", pa.date32())])
    pio.check_columns(["i", "s", "d"], schema, "here")
    with pytest.raises(InputError, match="here: no column 'x', 'y'; its columns are i, s, l, d"):
        pio.check_columns(["i", "x", "y"], schema, "here")
    with pytest.raises(InputError, match="here: .*cannot sort by column 'l'"):
        pio.check_columns(["i", "l"], schema, "here")
    with pytest.raises(InputError, match=r"its columns are \(none\)"):
        pio.check_columns(["i"], None, "here")


def test_frame_is_arrow_backed_and_converts_back(rng):
    n = int(rng.integers(0, 50))
    words = [None if v == 0 else "é" * int(v) for v in rng.integers(0, 4, n)]
    t = pa.table(
        {
            "sv": pa.array(words, pa.string_view()),
            "bv": pa.array([None if w is None else w.encode() for w in words], pa.binary_view()),
            "i": pa.array(rng.integers(-5, 5, n), mask=rng.random(n) < 0.3),
            "lst": pa.array([[int(v)] * int(v) for v in rng.integers(0, 3, n)], pa.list_(pa.int8())),
        }
    )
    df = pio.frame(t)
    assert all(isinstance(d, pd.ArrowDtype) for d in df.dtypes)
    assert [d.pyarrow_dtype for d in df.dtypes] == [pa.large_string(), pa.large_binary(), pa.int64(), pa.list_(pa.int8())]
    assert list(df.columns) == t.column_names and isinstance(df.index, pd.RangeIndex)
    for c in t.column_names:
        assert pa.array(df[c]).to_pylist() == t[c].to_pylist()


def test_read_and_read_row_group_are_the_files(tmp_path, rng):
    df = _frame(rng, int(rng.integers(1, 1500)))
    files, groups = _files(tmp_path, df, 2, rng)
    ddf, lens, schema = pio.read(files)
    assert lens == groups and ddf.npartitions == len(lens)
    got = ddf.compute(scheduler="sync").reset_index(drop=True)
    assert got.astype({"i": "int64", "f": "float64", "s": object, "n": "Int64", "row": "int64"}).equals(df.astype({"s": object}))
    parts, _, _ = pio.row_groups(files)
    g = int(rng.integers(0, len(parts)))
    part = pio.read_row_group(parts[g])
    want = pq.ParquetFile(parts[g][0]).read_row_group(parts[g][1])
    assert len(part) == lens[g] and all(pa.array(part[c]).to_pylist() == want[c].to_pylist() for c in want.column_names)


def test_a_damaged_row_group_is_named(tmp_path):
    src = tmp_path / "in.parquet"
    pq.write_table(pa.table({"k": np.arange(3000)}), src, row_group_size=1000)
    page = pq.ParquetFile(src).metadata.row_group(1).column(0).data_page_offset
    data = bytearray(src.read_bytes())
    data[page : page + 16] = b"\xff" * 16
    src.write_bytes(data)
    assert len(pio.read_row_group((str(src), 0))) == 1000
    with pytest.raises(InputError, match=rf"{src}: row group 1 is damaged \(") as e:
        pio.read_row_group((str(src), 1))
    assert "\n" not in str(e.value)


def test_row_hashes_depend_on_the_values_alone(rng):
    """A row's hash is the same wherever the row stands, whatever else its columns hold (nulls
    beside it, other rows); rows that differ in any column hash apart."""
    from dsort.core.table_chunk import row_hashes

    n = int(rng.integers(2, 400))
    t = pa.table(
        {
            "i": pa.array(rng.integers(0, 10**12, n)),
            "s": pa.array([str(v) for v in rng.integers(0, 10**12, n)]),
            "l": pa.array([[int(v), None] for v in rng.integers(0, 5, n)], pa.list_(pa.int64())),
        }
    )
    h = row_hashes(t)
    assert h.dtype == np.uint64 and len(h) == n and len(set(h.tolist())) == n
    p = rng.permutation(n)
    np.testing.assert_array_equal(row_hashes(t.take(p)), h[p])
    np.testing.assert_array_equal(row_hashes(t.slice(0, 1)), h[:1])
    with_nulls = t.set_column(0, "i", pa.array(t["i"].to_pylist()[:-1] + [None]))
    np.testing.assert_array_equal(row_hashes(with_nulls)[:-1], h[:-1])  # NumPy would make them floats
    assert row_hashes(with_nulls)[-1] != h[-1]
    assert len(row_hashes(t.slice(0, 0))) == 0
    np.testing.assert_array_equal(row_hashes(pio.frame(t).pipe(pa.Table.from_pandas, preserve_index=False)), h)  # through pandas and back


def test_one_number_key_without_nulls_is_keyed_by_words(tmp_path, rng):
    """Words (one uint64 a row) only where the files' statistics say the one key column of numbers
    holds no null (NaN is a value there): a column with nulls, strings, two columns, or files
    without statistics get byte rows."""
    n = 500
    f = rng.random(n)
    f[::7] = np.nan
    t = pa.table(
        {
            "i": pa.array(rng.integers(-5, 5, n)),
            "f": pa.array(f),  # NaN, no null
            "b": pa.array(rng.random(n) < 0.5),
            "n": pa.array([None if x < 0.1 else int(x * 10) for x in rng.random(n)], pa.int32()),
            "s": pa.array([str(x) for x in rng.integers(0, 9, n)]),
        }
    )
    files = [tmp_path / "a.parquet", tmp_path / "b.parquet"]
    pq.write_table(t.slice(0, 200), files[0], row_group_size=70)
    pq.write_table(t.slice(200), files[1], row_group_size=90)
    schema = pio.row_groups(files)[2]
    word = {c: pio._spec(schema, [c], [True], "last", files).word for c in t.column_names}
    assert word == {"i": "int64", "f": "float64", "b": "bool", "n": None, "s": None}
    assert pio._spec(schema, ["i", "f"], [True, True], "last", files).word is None
    assert pio._spec(schema, ["i"], [True], "last").word is None  # no files: nothing says
    bare = tmp_path / "bare.parquet"
    pq.write_table(t, bare, write_statistics=False)
    assert pio._spec(schema, ["i"], [True], "last", [bare]).word is None
    for c, descending in [("f", False), ("f", True), ("b", False), ("b", True), ("i", True)]:  # sorted by words: NumPy's order
        out = tmp_path / f"out-{c}-{descending}"
        out.mkdir()
        job = pio.sort_job(files, out, by=[c], descending=descending)
        dask.compute(job.inputs, job.outputs, scheduler="sync")
        got = pa.concat_tables([pq.read_table(out / f"part-{j:05d}.parquet") for j in range(len(job.outputs))])
        x = t[c].to_numpy(zero_copy_only=False).astype(np.float64)
        want = np.argsort(-x if descending else x, kind="stable")  # NaN last both ways, ties in input order
        assert got.to_pandas().equals(t.take(want).to_pandas()), (c, descending)  # NaN equal to NaN


@pytest.mark.parametrize("typ", [pa.int8(), pa.int32(), pa.int64(), pa.uint16(), pa.uint64(), pa.float32(), pa.float64(), pa.bool_()])
def test_a_word_spec_is_the_one_of_the_meta_and_the_values_are_arrows(rng, typ):
    """The spec of one column of numbers made from its dtype alone (no pandas) is the one made from
    a meta frame, keyed by words; the values read from the buffers are Arrow's, in slices at any
    offset and over several chunks, empty ones among them."""
    from dataclasses import replace

    from dsort.core import table_chunk as TC
    from dsort.core.frame_keys import KeySpec

    for ascending, na in [(True, "last"), (False, "first")]:
        meta = TC.key_frame(pa.schema([("x", typ)]).empty_table(), ["x"])
        want = replace(KeySpec.of(meta, ["x"], [ascending], na), word=np.dtype(typ.to_pandas_dtype()).name)
        assert TC.spec_of(pa.schema([("x", typ)]), ["x"], [ascending], na, no_nulls=True) == want
    n = int(rng.integers(0, 300))
    if pa.types.is_boolean(typ):
        values = rng.random(n) < 0.5
    else:
        info = np.iinfo(typ.to_pandas_dtype()) if pa.types.is_integer(typ) else None
        values = rng.integers(info.min, info.max, n, endpoint=True, dtype=typ.to_pandas_dtype()) if info else rng.normal(size=n)
    whole = pa.array(values, typ)
    cuts = np.sort(rng.integers(0, n + 1, 3))
    col = pa.chunked_array([whole.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, n])], typ)  # empty chunks too
    for a in [0, int(rng.integers(0, n + 1))]:
        t = pa.table({"x": col}).slice(a, n - a)
        got = TC._values(t, "x")
        assert got.dtype == np.dtype(typ.to_pandas_dtype()) and np.array_equal(got, whole.to_numpy(zero_copy_only=False)[a:])


@pytest.mark.parametrize("na", ["last", "first"])
def test_keys_of_number_columns_from_arrow_are_the_encoders_bytes(rng, na):
    """Keys of number columns written from Arrow's buffers (no pandas) are the bytes the encoder
    gives the same columns through pandas, and the spec made from the dtypes is the one made from a
    meta frame: ints, unsigned, floats with NaN (a value), -0.0 and infinities, booleans, nulls in
    each, in slices at any offset and over several chunks, every direction."""
    from dsort.core import table_chunk as TC
    from dsort.core.frame_keys import KeySpec

    n = int(rng.integers(1, 400))
    cols = {
        "i8": pa.array(rng.integers(-128, 128, n, dtype=np.int8)),
        "u64": pa.array(rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)),
        "i32": pa.array(rng.integers(-3, 3, n).astype(np.int32)),
        "f64": pa.array(rng.choice([np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf, -2.25], n)),
        "f32": pa.array(rng.choice([np.nan, -0.0, 1.5, -np.inf], n).astype(np.float32)),
        "b": pa.array(rng.random(n) < 0.5),
    }
    for name, a in list(cols.items()):  # nulls in every column
        cols[name] = pa.array(a.to_pylist(), a.type, mask=rng.random(n) < 0.2)
    cuts = np.sort(rng.integers(0, n + 1, 3))
    table = pa.table({c: pa.chunked_array([a.slice(x, y - x) for x, y in zip([0, *cuts], [*cuts, n])]) for c, a in cols.items()})
    table = table.slice(int(rng.integers(0, n)))
    for by in (["i8", "f64"], ["u64"], ["f32", "b", "i32"], ["b", "f64", "u64", "i8"]):
        for ascending in ([True] * len(by), [False] * len(by), [bool(x) for x in rng.random(len(by)) < 0.5]):
            spec = TC.spec_of(table.schema, by, ascending, na)
            assert spec == KeySpec.of(TC.key_frame(table.schema.empty_table(), by), by, ascending, na)
            want, _ = spec.encode(TC.key_frame(table, by))
            np.testing.assert_array_equal(TC.number_keys(table, spec), want)


def test_a_sort_by_columns_of_numbers_imports_no_pandas(tmp_path, rng):
    """`dsort sort` of Parquet by columns of numbers (one without nulls: words) runs on Arrow and NumPy
    alone (pandas' import is a third of such a command on two cores), and its output is pandas'
    stable sort; a string key still works (through pandas)."""
    import subprocess
    import sys

    n = 3000
    df = pd.DataFrame({"f": rng.choice([np.nan, -0.0, 0.0, 1.5, -np.inf], n), "b": rng.random(n) < 0.5, "row": np.arange(n)})
    df["s"] = df["row"].astype(str)
    src = tmp_path / "t.parquet"
    table = pa.table({c: pa.array(df[c].to_numpy()) for c in df.columns})  # NaN a value, not a null (from_pandas makes it one)
    pq.write_table(table, src, row_group_size=700)
    run = (
        "import sys; from dsort.service import sort_files; "
        "sort_files(sys.argv[1], sys.argv[2], by=sys.argv[3].split(','), descending=sys.argv[4] == '1', cpu=True, progress=False, "
        "stream=open('/dev/null', 'w')); print('pandas' in sys.modules)"
    )
    for by, descending, pandas in [("f", False, False), ("f", True, False), ("b", True, False), ("b,f", False, False), ("s", False, True)]:
        out = tmp_path / f"out-{by}-{descending}"
        p = subprocess.run([sys.executable, "-c", run, str(src), str(out), by, str(int(descending))], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.split()[-1] == str(pandas), (by, p.stdout)
        got = pq.read_table(out).to_pandas()
        want = df.sort_values(by.split(","), ascending=not descending, kind="stable", na_position="last").reset_index(drop=True)
        pd.testing.assert_frame_equal(got, want, check_dtype=False)


@pytest.mark.parametrize("by", [["i"], ["f"], ["s"], ["n"], ["i", "f"], ["s", "i", "f"], ["n", "f"]])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("external", [False, True])
def test_sort_job_writes_the_parts_in_order(tmp_path, rng, by, descending, external):
    _sort_job_writes_the_parts_in_order(tmp_path, rng, by, descending, external, None)


@pytest.mark.parametrize("by", [["f"], ["s", "i"], ["n"]])
@pytest.mark.parametrize("piece_rows", [83, 311])
def test_row_groups_sorted_in_pieces_write_a_part_a_piece(tmp_path, rng, by, piece_rows):
    """The in-memory sort cuts each row group into pieces of at most ``parquet-piece-rows`` rows
    (a task each) and writes an output part a piece: the same sorted rows and checksums."""
    with dask.config.set({"dsort.file-sort.parquet-piece-rows": piece_rows}):
        _sort_job_writes_the_parts_in_order(tmp_path, rng, by, bool(rng.integers(2)), False, None, piece_rows)


@pytest.mark.parametrize("rows", [1, 3, 4, 1000])
def test_pieces_cut_each_row_group_evenly(rows):
    lens = [0, 1, 7, 8, 1000, 1001]
    got = pio.pieces(lens, rows)
    assert [sum(m for g, _, m in got if g == k) for k in range(len(lens))] == lens  # every row, once
    for k, n in enumerate(lens):
        mine = [(a, m) for g, a, m in got if g == k]
        assert len(mine) == max(1, -(-n // rows))  # as few as fit
        assert [a for a, _ in mine] == [sum(m for _, m in mine[:j]) for j in range(len(mine))]  # end to end
        assert max(m for _, m in mine) <= max(rows, 0) or n == 0
        assert max(m for _, m in mine) - min(m for _, m in mine) <= 1  # even


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("by", [["i"], ["f"], ["s"], ["n", "f"]])
@pytest.mark.parametrize("descending", [False, True])
def test_sort_job_orders_the_keys_on_the_gpu(tmp_path, rng, by, descending):
    _sort_job_writes_the_parts_in_order(tmp_path, rng, by, descending, False, "gpu")


def _sort_job_writes_the_parts_in_order(tmp_path, rng, by, descending, external, device, piece_rows=None):
    n = int(rng.integers(1, 3000))
    df = _frame(rng, n)
    src = tmp_path / "src"
    src.mkdir()
    files, groups = _files(src, df, int(rng.integers(1, 4)), rng)
    out = tmp_path / "out"
    out.mkdir()
    job = pio.sort_job(files, out, by=by, descending=descending, external=external, local_directory=tmp_path / "runs", device=device)
    parts = len(groups) if external or piece_rows is None else len(pio.pieces(groups, piece_rows))
    assert job.records == n and len(job.outputs) == parts
    inputs, outputs = dask.compute(job.inputs, job.outputs, scheduler="sync")
    job.finish(outputs)
    manifest = pio.manifest(out)
    assert manifest["by"] == by and manifest["ascending"] == [not descending] * len(by) and manifest["records"] == n
    assert [p["rows"] for p in manifest["parts"]] == [s.records for s in outputs] and sum(s.records for s in outputs) == n
    assert int(manifest["checksum"], 16) == sum(s.checksum for s in inputs)
    got = pd.concat([pq.read_table(out / p["path"]).to_pandas() for p in manifest["parts"]], ignore_index=True)
    want = pa.Table.from_pandas(_reference(df, by, descending), preserve_index=False).replace_schema_metadata(None).to_pandas()
    pd.testing.assert_frame_equal(got, want)  # as pandas reads a file without its metadata (dsort drops it)
    assert sorted(p.name for p in out.iterdir()) == sorted([pio.MANIFEST, *(p["path"] for p in manifest["parts"])])
    order = pcheck.check_order(order=manifest)
    check = pcheck.check_tasks([out / p["path"] for p in manifest["parts"]], *order)
    total = valsort.combine(pio.comparable(dask.compute(*check, scheduler="sync"), *order))
    assert (total.records, total.unordered, total.checksum) == (n, 0, int(manifest["checksum"], 16))


def test_sort_job_of_no_rows_writes_one_empty_part(tmp_path):
    pq.write_table(pa.table({"a": pa.array([], pa.int32()), "s": pa.array([], pa.string())}), tmp_path / "e.parquet")
    out = tmp_path / "out"
    out.mkdir()
    job = pio.sort_job([tmp_path / "e.parquet"], out, by=["a"], descending=False)
    assert (job.records, job.inputs, job.outputs) == (0, [], [])
    job.finish([])
    assert pio.manifest(out)["parts"] == [{"path": "part-00000.parquet", "rows": 0}]
    t = pq.read_table(out / "part-00000.parquet")
    assert t.num_rows == 0 and t.schema.equals(pq.read_schema(tmp_path / "e.parquet").remove_metadata())


def test_manifest_is_none_without_one(tmp_path):
    assert pio.manifest(tmp_path) is None
    (tmp_path / pio.MANIFEST).write_text('{"by": ["x"]}')
    assert pio.manifest(tmp_path) == {"by": ["x"]}


@pytest.mark.parametrize("descending", [False, True])
def test_check_tasks_count_out_of_order_rows_like_python(tmp_path, rng, descending):
    n = int(rng.integers(0, 2000))
    df = pd.DataFrame({"a": rng.integers(-3, 3, n), "b": rng.integers(-2, 2, n), "p": rng.random(n)})
    files, _ = _files(tmp_path, df, 2, rng)
    keys = list(zip(df["a"].tolist(), df["b"].tolist()))
    later = [(k < p) if not descending else (k > p) for p, k in zip(keys, keys[1:])]
    order = pcheck.check_order(by=["a", "b"], descending=descending)
    total = valsort.combine(pio.comparable(dask.compute(*pcheck.check_tasks(files, *order), scheduler="sync"), *order))
    assert (total.records, total.unordered, total.duplicates) == (n, sum(later), sum(p == k for p, k in zip(keys, keys[1:])))
    assert total.first_unordered == (later.index(True) + 1 if any(later) else None)
    shuffled = tmp_path / "shuffled.parquet"
    pq.write_table(pa.Table.from_pandas(df.sample(frac=1, random_state=int(rng.integers(2**31))), preserve_index=False), shuffled)
    again = valsort.combine(dask.compute(*pcheck.check_tasks([shuffled], *pcheck.check_order(by=["a", "b"])), scheduler="sync"))
    assert again.checksum == total.checksum and again.records == n  # a sum: the order does not change it


def test_check_tasks_need_the_sort_columns(tmp_path):
    pq.write_table(pa.table({"a": [1, 2]}), tmp_path / "t.parquet")
    with pytest.raises(InputError, match="pass --by"):
        pcheck.check_order()
    order = {"by": ["a"], "ascending": [True]}
    with pytest.raises(InputError, match="--descending: this directory's _dsort.json says it was sorted by a ascending"):
        pcheck.check_order(descending=True, order=order)
    assert pcheck.check_order(order=order) == (["a"], [True], "last")
    assert len(pcheck.check_tasks([tmp_path / "t.parquet"], *pcheck.check_order(order=order))) == 1
    with pytest.raises(InputError, match="no column 'x'"):
        pcheck.check_tasks([tmp_path / "t.parquet"], *pcheck.check_order(by=["x"]))


@pytest.mark.parametrize("descending", [False, True])
def test_check_across_parts_of_different_string_widths_like_python(tmp_path, rng, descending):
    """Each row group's keys are encoded at its own string width (no pass over the data first);
    the checks where groups meet compare their end rows at one width: every wrong and equal pair
    is counted as Python compares the strings, also where a group of short strings meets one of
    long ones."""
    words = ["", "a", "ab", "abc", "b", "ba", "zzzzzzzzzz", "é", "a\x00"]
    n = int(rng.integers(50, 400))
    s = [str(x) for x in rng.choice(words, n)]
    for _ in range(int(rng.integers(0, 3))):  # sorted stretches, so groups end and start in order too
        a, b = np.sort(rng.integers(0, n + 1, 2))
        s[a:b] = sorted(s[a:b], reverse=descending)
    df = pd.DataFrame({"s": s, "k": rng.integers(0, 3, n)})
    files, _ = _files(tmp_path, df, int(rng.integers(1, 4)), rng)
    keys = list(zip(s, df["k"].tolist()))
    later = [(k < p) if not descending else (k > p) for p, k in zip(keys, keys[1:])]
    order = pcheck.check_order(by=["s", "k"], descending=descending)
    total = valsort.combine(pio.comparable(dask.compute(*pcheck.check_tasks(files, *order), scheduler="sync"), *order))
    assert (total.records, total.unordered, total.duplicates) == (n, sum(later), sum(p == k for p, k in zip(keys, keys[1:])))


def test_a_part_is_flushed_as_soon_as_it_is_written(tmp_path, monkeypatch):
    """write_part flushes its file to the disk as soon as it is written: in the task itself
    outside a directory this process stages (a cluster's worker), in the background inside one
    (the writes' flushes overlap the other tasks), the publish waiting for them; the file synced
    holds the whole table."""
    import os
    import threading

    from dsort.io import _output

    synced = []
    real = os.fsync

    def fsync(fd):
        synced.append((os.fstat(fd).st_ino, threading.current_thread().name))
        real(fd)

    monkeypatch.setattr(_output.os, "fsync", fsync)
    table = pa.table({"k": np.arange(1000), "s": [str(i) for i in range(1000)]})
    pio.write_part(table, tmp_path / "p.parquet")
    here = threading.current_thread().name
    assert synced == [((tmp_path / "p.parquet").stat().st_ino, here)]  # in the task, done
    assert pq.read_table(tmp_path / "p.parquet").equals(table)
    synced.clear()
    with _output.staged(tmp_path / "out", directory=True) as tmp:
        pio.write_part(table, tmp / "part-0.parquet")
        inode = (tmp / "part-0.parquet").stat().st_ino
    flushed = [t for i, t in synced if i == inode]
    assert flushed and flushed[0] != here  # by a flusher thread, before the publish's own
    assert pq.read_table(tmp_path / "out" / "part-0.parquet").equals(table)


def test_a_background_flush_that_fails_fails_the_publish(tmp_path, monkeypatch):
    """A part whose background flush fails (the disk lost the write: an fsync that fails once may
    not fail again) is never published: the staged output is removed and the error raised."""
    import errno
    import os

    from dsort.io import _output

    real = os.fsync
    bad = []

    def fsync(fd):
        if bad and os.fstat(fd).st_ino == bad[0]:
            bad.clear()  # fails once, as Linux reports a lost write once
            raise OSError(errno.EIO, "Input/output error")
        real(fd)

    monkeypatch.setattr(_output.os, "fsync", fsync)
    table = pa.table({"k": np.arange(100)})
    with pytest.raises(OSError, match="Input/output"):
        with _output.staged(tmp_path / "out", directory=True) as tmp:
            pio.write_part(table, tmp / "part-1.parquet")  # written before the failure is armed
            (tmp / "part-0.parquet").write_bytes(b"")
            bad.append((tmp / "part-0.parquet").stat().st_ino)
            pio.write_part(table, tmp / "part-0.parquet")
    assert not (tmp_path / "out").exists() and list(tmp_path.iterdir()) == []


def test_pieces_of_wide_rows_hold_fewer_of_them(tmp_path):
    """A piece holds at most parquet-piece-rows rows, and about parquet-piece-bytes of decoded
    rows where rows are wide (as the row groups' footers count them), never fewer than
    MIN_PIECE_ROWS."""
    n = 20_000
    narrow, wide = tmp_path / "narrow.parquet", tmp_path / "wide.parquet"
    pq.write_table(pa.table({"k": np.arange(n)}), narrow)
    pq.write_table(pa.table({"k": np.arange(n), "s": [f"{i:0>1000}" for i in range(n)]}), wide, compression="none")
    most = int(dask.config.get("dsort.file-sort.parquet-piece-rows"))
    assert pio.piece_rows([narrow]) == most
    meta = pq.ParquetFile(wide).metadata
    row_bytes = sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups)) / n
    got = pio.piece_rows([wide])
    assert pio.MIN_PIECE_ROWS < got < most and abs(got - (16 << 20) / row_bytes) <= 1
    with dask.config.set({"dsort.file-sort.parquet-piece-bytes": "1MiB"}):
        assert pio.piece_rows([wide]) == pio.MIN_PIECE_ROWS
    with dask.config.set({"dsort.file-sort.parquet-piece-rows": 100}):
        assert pio.piece_rows([wide]) == 100
        # --chunk-size: about that many decoded bytes a piece, whatever the rows' bound
        assert abs(pio.piece_rows([wide], chunk_size=12 << 20) - (12 << 20) / row_bytes) <= 1
        assert pio.piece_rows([narrow], chunk_size=1 << 40) == n
        assert pio.piece_rows([wide], chunk_size=1) == pio.MIN_PIECE_ROWS


def test_number_dtypes_are_read_from_the_arrow_type():
    """Each Arrow type of numbers dsort keys by words or from its buffers has the NumPy dtype that
    holds its values (pyarrow's own answer, which imports pandas in some versions, as the reference)."""
    from dsort.core import table_chunk as TC

    types = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
    types += [pa.float32(), pa.float64(), pa.bool_()]
    for typ in types:
        assert TC.numbers(typ) and TC.number_dtype(typ) == np.dtype(typ.to_pandas_dtype()), typ


def test_the_hashes_a_sort_carries_are_its_rows_hashes(rng):
    """The hashes a sorted piece and a merged output carry are, row by row, the hashes of the values
    they come with (not only their sum: a checksum of hashes in another order would sum alike)."""
    from dsort.core import frame_chunk as FC, table_chunk as TC

    df = _frame(rng, int(rng.integers(50, 400)))
    table = pa.Table.from_pandas(df, preserve_index=False)
    spec = TC.spec_of(table.schema, ["i", "s"], [True, False], "last")
    cut = np.sort(rng.integers(0, len(table) + 1, 2))
    parts = [TC.sort_part(table.slice(a, b - a), spec, hashed=True) for a, b in zip([0, *cut], [*cut, len(table)])]
    for part in parts:
        np.testing.assert_array_equal(part.hashes, TC.row_hashes(part.table))
    plan = FC.make_plan(spec, 2, None, *[FC.info(p, 2) for p in parts])
    cuts = FC.cuts(plan, *[FC.window(spec, p, plan, q) for q, p in enumerate(parts)])
    for t in range(len(cuts) - 1):
        merged, hashes = TC.merge(None, *[TC.piece(spec, p, plan, cuts, t, q) for q, p in enumerate(parts)])
        np.testing.assert_array_equal(hashes, TC.row_hashes(merged))
