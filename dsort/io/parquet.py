"""Parquet: read by row groups, sorted by columns, written as a directory of parts in order plus a
manifest.

Where the files fit in memory, the sort is columnar (:mod:`dsort.core.table_chunk`): each row group
is read as an Arrow table and sorted in pieces (:func:`pieces`), only the key columns encoded and
sorted by the engine, every column moved by Arrow's ``take``; the cuts are the dataframe sort's,
from the keys alone; each output part merges its slices of every sorted piece (on a cluster, slice
tasks beside the pieces, so only the slices travel) and is then written. Beyond memory the row
groups are the partitions of :func:`dsort.dataframe.sort_values`, external.

The output directory holds ``part-00000.parquet``, ``part-00001.parquet``, ... (the sorted rows in
that order, one part per piece of the columnar sort, or per input row group of the external one)
and ``_dsort.json``: the parts in order with their row counts, the sort columns and directions,
the record count and checksum. Any Parquet reader reads the directory; ``dsort check`` reads the
manifest to know the order to verify.

Every column is read as Arrow-backed pandas (``pd.ArrowDtype``), so the values and Arrow types
of the output are the input's: an integer or boolean column with nulls stays one, NaN stays apart
from null, and lists, structs, maps, decimals and binary pass through untouched. Sort columns are
those :func:`dsort.dataframe.encode_keys` orders (numbers, decimals, booleans, strings,
timestamps, dates, times, durations); any other is refused by name before any work
(:func:`check_columns`).

Checksum of a row: a 64-bit hash of its columns' values (:mod:`dsort.core.arrow_hash`: rows vary
in width, so the CRC-32 of fixed-width records does not apply); the checksum is their sum. The
columnar sort hashes each row once, as its piece is sorted, and each output sums the hashes its
rows carry (:mod:`dsort.core.table_chunk`); ``dsort check`` hashes the parts' values read back.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core.lazy import pd

from ..collections import config, tasks
from ..core import arrow_hash
from ._job import SortJob, each, per_block
from ._output import flush_soon
from ..core.errors import InputError

MANIFEST = "_dsort.json"


def _open(path):
    import pyarrow.parquet as pq

    try:
        return pq.ParquetFile(str(path))
    except Exception as e:  # pyarrow raises several types for a file that is not Parquet
        raise InputError(f"{path}: not a readable Parquet file ({e})") from None


def row_groups(files) -> tuple[list[tuple[str, int]], list[int], object]:
    """``(parts, rows per part, schema)``: every row group of ``files`` in order."""
    parts, lens, schema = [], [], None
    for f in files:
        pf = _open(f)
        # Columns only: pandas' metadata (an index stored as a column, say) is not kept, so an
        # index comes back as an ordinary column.
        s = pf.schema_arrow.remove_metadata()
        if schema is None:
            schema = s
        elif s.names != schema.names:
            raise InputError(f"{f}: columns {s.names} differ from the first file's {schema.names}")
        elif not s.equals(schema):
            diff = [
                f"{n} is {t} there, {u} in {files[0]}"
                for n, t, u in zip(s.names, s.types, schema.types)
                if t != u
            ]
            raise InputError(f"{f}: column types differ from the first file's: {'; '.join(diff)}")
        for g in range(pf.num_row_groups):
            parts.append((str(f), g))
            lens.append(pf.metadata.row_group(g).num_rows)
    return parts, lens, schema


def check_columns(by, schema, where) -> None:
    """Refuse sort columns that ``schema`` lacks, or whose type dsort does not order."""
    names = list(schema.names) if schema is not None else []
    missing = [c for c in by if c not in names]
    if missing:
        raise InputError(
            f"{where}: no column {', '.join(map(repr, missing))}; its columns are "
            f"{', '.join(names) or '(none)'}"
        )
    try:
        _spec(schema, by, [True] * len(by), "last")
    except TypeError as e:
        raise InputError(f"{where}: {e}") from None


def frame(table) -> pd.DataFrame:
    """``table`` as pandas, every column Arrow-backed, so it converts back to the same table
    (:func:`_write`); string and binary views, which Arrow cannot take rows of, as large strings
    and binaries."""
    import pyarrow as pa

    views = {pa.string_view(): pa.large_string(), pa.binary_view(): pa.large_binary()}
    table = table.cast(pa.schema([f.with_type(views.get(f.type, f.type)) for f in table.schema]))
    return table.to_pandas(types_mapper=pd.ArrowDtype, ignore_metadata=True)


def read_row_group(part) -> pd.DataFrame:
    """Row group ``(path, index)`` as pandas (:func:`frame`)."""
    return frame(read_table(part))


def read(files):
    """``(dask dataframe, rows per partition)``: one partition per row group."""
    import dask.dataframe as dd

    parts, lens, schema = row_groups(files)
    meta = frame(schema.empty_table())
    return (
        dd.from_map(read_row_group, parts, meta=meta, enforce_metadata=False, label=tasks.READ),
        lens,
        schema,
    )


def read_table(part):
    """Row group ``(path, index)`` as an Arrow table; an :class:`InputError` that names it where a
    page is damaged (the header and footer read fine)."""
    import pyarrow as pa

    path, group = part
    try:
        return _open(path).read_row_group(group)
    except (OSError, pa.ArrowException) as e:
        # one line
        detail = " ".join("".join(c if c.isprintable() else " " for c in str(e)).split())
        raise InputError(f"{path}: row group {group} is damaged ({detail})") from None


def write_part(table, path) -> None:
    """``table`` as one Parquet file, without pandas' metadata, its flush to the disk begun
    (:func:`~dsort.io._output.flush_soon`); dictionary pages for string and binary columns only
    (a dictionary of numbers is tried, then dropped, at some cost)."""
    import pyarrow.parquet as pq
    import pyarrow.types as t

    kinds = (t.is_string, t.is_large_string, t.is_binary, t.is_large_binary)
    words = [f.name for f in table.schema if any(k(f.type) for k in kinds)]
    pq.write_table(table.replace_schema_metadata(None), path, use_dictionary=words)
    # flushed as soon as written, beside the other tasks: the publish's flush of every part, one
    # after another as the command's last step, took 0.3-0.7 s of a 3e7-row sort on 2 cores; in
    # the background where this process publishes (on 16 cores the flushes held the task threads
    # 7% of their time), by the task on a cluster's worker
    flush_soon(path)


def _spec(schema, by, ascending, na_position, files=()):
    """The sort's key (:func:`dsort.core.table_chunk.spec_of`); keyed by words where ``files``'
    statistics say that their one key column holds no null."""
    from ..core import table_chunk as TC

    return TC.spec_of(
        schema,
        by,
        ascending,
        na_position,
        no_nulls=bool(files) and len(by) == 1 and _no_nulls(files, by[0]),
    )


def _no_nulls(files, column) -> bool:
    """Whether every row group of ``files`` says in its statistics that ``column`` holds no null."""
    for f in files:
        meta = _open(f).metadata
        # nested columns have several
        leaves = [meta.schema.column(i).path for i in range(meta.num_columns)]
        if column not in leaves:
            return False
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(leaves.index(column)).statistics
            if stats is None or not stats.has_null_count or stats.null_count:
                return False
    return True


def _table(df, schema):
    """A pandas partition of :func:`read` back as an Arrow table of ``schema``."""
    import pyarrow as pa

    return pa.Table.from_arrays([pa.array(df[f.name]).cast(f.type) for f in schema], schema=schema)


def _tally(df, schema):
    from ..core import table_chunk as TC

    return TC.tally(_table(df, schema))


def _write(df, path, spec, schema):
    """An output partition of the external sort written at ``path``; its summary (its values
    hashed)."""
    return _write_table((_table(df, schema), None), path, spec)


def _write_table(merged, path, spec):
    """An output part of the columnar sort (:func:`dsort.core.table_chunk.merge`'s ``(table,
    hashes)``) written at ``path``; its summary, of the hashes its rows carry where given."""
    from ..core import table_chunk as TC

    table, hashes = merged
    write_part(table, path)
    return TC.summarize(table, spec, hashes)


def _merge_parts(spec, device, p, cut, t, *parts):
    """Output ``t`` of the columnar sort: its slices of every sorted row group (``parts``, whole:
    the embedded threads share them), merged."""
    from ..core import table_chunk as TC

    return TC.merge(device, *[TC.piece(spec, part, p, cut, t, q) for q, part in enumerate(parts)])


def comparable(summaries, by, ascending, na_position) -> list:
    """``summaries`` of consecutive parts (:func:`dsort.core.table_chunk.summarize`) with their
    first and last rows encoded as keys at one string width (the widest of those rows), so
    :func:`dsort.core.valsort.combine` can compare each part's last key with the next one's
    first."""
    from ..core import table_chunk as TC
    from ..core.frame_keys import KeySpec

    ends = [s for s in summaries if s.records and s.first_key is not None]
    # keys already (words or byte rows of numbers: summarize's), not frames
    if not ends or isinstance(ends[0].first_key, np.ndarray):
        return list(summaries)
    return TC.ends_comparable(
        summaries, KeySpec.of(ends[0].first_key, list(by), list(ascending), na_position)
    )


def pieces(lens, rows: int) -> list[tuple[int, int, int]]:
    """``(row group, first row, rows)`` of each piece the columnar sort checksums and sorts as a
    task of its own: every row group cut into as few pieces of at most ``rows`` rows as it takes,
    as even as can be (an empty one stays one piece). A file of a few big row groups keeps every
    thread busy so: one task a row group left all but a few of 16 cores idle (BENCHMARKS.md
    section 10)."""
    out = []
    for g, n in enumerate(lens):
        k = max(1, -(-int(n) // max(1, int(rows))))
        bounds = [int(n) * j // k for j in range(k + 1)]
        out += [(g, a, b - a) for a, b in zip(bounds, bounds[1:])]
    return out


MIN_PIECE_ROWS = 8192  # however wide the rows: a task's fixed costs stay small beside its rows


def piece_rows(files, chunk_size: int | None = None) -> int:
    """The rows of a piece (:func:`pieces`): ``dsort.file-sort.parquet-piece-rows``, fewer where
    the files' rows are wide (their row groups' decoded bytes a row, as the footers say), so a
    piece holds about ``parquet-piece-bytes``: a piece's keys of long strings as wide as the
    longest value (40 MB for 262,144 rows of 150 bytes) were each a new mapping of memory, past
    what the allocator keeps, their pages faulted in again (BENCHMARKS.md section 10).
    ``chunk_size`` (``--chunk-size``): about that many decoded bytes a piece, and so an output
    part, however many rows (at least :data:`MIN_PIECE_ROWS`)."""
    rows = nbytes = 0
    for f in files:
        meta = _open(f).metadata
        for g in range(meta.num_row_groups):
            rows += meta.row_group(g).num_rows
            nbytes += meta.row_group(g).total_byte_size
    most = int(config.get("file-sort.parquet-piece-rows"))
    if chunk_size:
        most = max(rows, 1)
    if not rows or not nbytes:
        return most
    piece_bytes = int(chunk_size or config.nbytes("file-sort.parquet-piece-bytes"))
    fit = int(piece_bytes * rows // nbytes)
    return max(min(most, fit), min(most, MIN_PIECE_ROWS))


def _sort_piece(table, first: int, rows: int, spec, device, block):
    """A piece sorted with its rows' hashes (the input's checksum, carried to the outputs), made
    ``block`` rows at a time."""
    from ..core import table_chunk as TC

    return TC.sort_part(table.slice(first, rows), spec, device, hashed=True, block=block)


def _columnar(job, parts, pcs, tmp, names, spec, device, sliced: bool, threads=None):
    """The columnar sort's graph (:mod:`dsort.core.table_chunk`) into ``job``: read each row group,
    checksum and sort each of its pieces (``pcs``, :func:`pieces`); plan, windows and cuts; each
    output merged, then written. ``sliced`` (a cluster): each output's slice of each sorted piece
    is a task of its own, beside the piece, so only the slices travel to the merges; else (the
    embedded threads, which share the pieces) each merge takes its slices itself. ``threads``:
    how many tasks run at once in one process (the rows' hashes are made in blocks that fit it,
    :func:`dsort.core.arrow_hash.block_rows`)."""
    from dask.base import tokenize

    from ..core import frame_chunk as FC, table_chunk as TC

    token = tokenize(parts, pcs, spec, device, str(tmp), sliced, threads)
    ref, n = tasks.ref, len(pcs)
    block = arrow_hash.block_rows(threads)

    def key(phase, *i):
        return (tasks.name(phase, token), *i) if i else tasks.name(phase, token)

    dsk = {}

    def add(k, func, *args):
        dsk[k] = tasks.task(k, func, *args)

    for g, part in enumerate(parts):
        add(key(tasks.READ, g), read_table, part)
    for i, (g, first, rows) in enumerate(pcs):
        add(
            key(tasks.SORT, i),
            _sort_piece,
            ref(key(tasks.READ, g)),
            first,
            rows,
            spec,
            device,
            block,
        )
        add(key(tasks.CHECKSUM_INPUT, i), TC.tally_sorted, ref(key(tasks.SORT, i)))
        add(key(tasks.INFO, i), FC.info, ref(key(tasks.SORT, i)), len(names))
    plan, cut = ref(key(tasks.PLAN)), ref(key(tasks.SPLITTERS))
    add(
        key(tasks.PLAN),
        FC.make_plan,
        spec,
        len(names),
        None,
        *[ref(key(tasks.INFO, i)) for i in range(n)],
    )
    for i in range(n):
        add(key(tasks.WINDOW, i), FC.window, spec, ref(key(tasks.SORT, i)), plan, i)
    add(key(tasks.SPLITTERS), FC.cuts, plan, *[ref(key(tasks.WINDOW, i)) for i in range(n)])
    for t, name in enumerate(names):
        if sliced:
            for q in range(n):
                add(
                    key(tasks.SLICE, t, q), TC.piece, spec, ref(key(tasks.SORT, q)), plan, cut, t, q
                )
            add(
                key(tasks.MERGE, t),
                TC.merge,
                device,
                *[ref(key(tasks.SLICE, t, q)) for q in range(n)],
            )
        else:
            add(
                key(tasks.MERGE, t),
                _merge_parts,
                spec,
                device,
                plan,
                cut,
                t,
                *[ref(key(tasks.SORT, q)) for q in range(n)],
            )
        add(key(tasks.WRITE, t), _write_table, ref(key(tasks.MERGE, t)), str(tmp / name), spec)
    job.inputs = tasks.handles(dsk, [key(tasks.CHECKSUM_INPUT, i) for i in range(n)])
    job.outputs = tasks.handles(dsk, [key(tasks.WRITE, t) for t in range(len(names))])


def sort_job(
    files,
    tmp: Path,
    *,
    by,
    descending: bool,
    na_position: str = "last",
    external: bool = False,
    local_directory=None,
    device=None,
    cluster: bool = False,
    threads: int | None = None,
    chunk_size: int | None = None,
) -> SortJob:
    """Tasks that sort the rows of ``files`` by the columns ``by`` into the directory ``tmp``: the
    columnar sort in memory, one output part per input row group; ``external``: through runs
    under ``local_directory`` (:func:`dsort.dataframe.sort_values_external`), in memory bounded by
    a row group, not the data, the parts balanced to within one row. ``device="gpu"``: the keys
    sorted and merged on the worker's GPU (the columnar sort). ``cluster``: the tasks run on a
    dask cluster (the columnar sort's merges then take only their slices of the row groups).
    ``threads``: the tasks that run at once in one process, where known (the embedded threads).
    ``chunk_size``: the columnar sort's pieces and output parts of about that many decoded bytes
    (:func:`piece_rows`); the sort through runs makes a part a row group."""
    parts, lens, schema = row_groups(files)
    check_columns(by, schema, files[0] if len(files) == 1 else "the input")
    ascending = [not descending] * len(by)
    spec = _spec(schema, by, ascending, na_position, files)
    n = sum(lens)
    job = SortJob(records=n, nbytes=sum(Path(f).stat().st_size for f in files))
    # one output part a piece (the columnar sort's; with --chunk-size, as many as hold about that
    # many bytes, pieces being cut inside row groups only) or a row group (the external sort's)
    pcs = [(g, 0, m) for g, m in enumerate(lens)]
    outputs = len(pcs)
    if not external:
        rows = piece_rows(files, chunk_size)
        pcs = pieces(lens, rows)
        outputs = max(1, -(-n // rows)) if chunk_size else len(pcs)
    width = max(5, len(str(outputs - 1)))  # one width for all, so name order is part order
    names = [f"part-{j:0{width}d}.parquet" for j in range(outputs)]

    def finish(summaries):
        manifest = {
            "format": "dsort-parquet",
            "by": list(by),
            "ascending": ascending,
            "na_position": na_position,
            "records": int(n),
            "checksum": f"{sum(s.checksum for s in summaries):x}",
            "row_hash": arrow_hash.VERSION,
            "parts": [{"path": p, "rows": int(s.records)} for p, s in zip(names, summaries)],
        }
        if n == 0:  # an empty input: one empty part keeps the schema
            write_part(schema.empty_table(), tmp / "part-00000.parquet")
            manifest["parts"] = [{"path": "part-00000.parquet", "rows": 0}]
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")

    job.finish = finish
    job.comparable = lambda summaries: comparable(summaries, by, ascending, na_position)
    if n == 0:
        return job
    if not external:
        _columnar(job, parts, pcs, tmp, names, spec, device, sliced=cluster, threads=threads)
        return job
    from ..collections.dataframe import sort_values

    df, _, _ = read(files)
    out = sort_values(
        df,
        by,
        ascending=ascending,
        na_position=na_position,
        strategy="external",
        local_directory=local_directory,
    )
    job.inputs = per_block(
        tasks.CHECKSUM_INPUT, _tally, df.to_delayed(optimize_graph=False), schema
    )
    job.outputs = per_block(
        tasks.WRITE,
        _write,
        out.to_delayed(optimize_graph=False),
        each([str(tmp / p) for p in names]),
        spec,
        schema,
    )
    return job


def manifest(path: Path) -> dict | None:
    m = Path(path) / MANIFEST
    return json.loads(m.read_text()) if m.is_file() else None
