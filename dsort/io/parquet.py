"""Parquet: read by row groups (one bounded partition each), sorted by columns with
:func:`dsort.dataframe.sort_values`, written as a directory of parts in order plus a manifest.

The output directory holds ``part-00000.parquet``, ``part-00001.parquet``, ... (the sorted rows in
that order, one part per input row group) and ``_dsort.json``: the parts in order with their row
counts, the sort columns and directions, the record count and checksum. Any Parquet reader reads
the directory; ``dsort check`` reads the manifest to know the order to verify.

Every column is read as Arrow-backed pandas (``pd.ArrowDtype``), so the values and Arrow types
of the output are the input's: an integer or boolean column with nulls stays one, NaN stays apart
from null, and lists, structs, maps, decimals and binary pass through untouched. Sort columns are
those :func:`dsort.dataframe.encode_keys` orders (numbers, decimals, booleans, strings,
timestamps, dates, times, durations); any other is refused by name before any work
(:func:`check_columns`).

Checksum of a row: a 64-bit hash of its columns' values (:mod:`dsort.core.arrow_hash`: rows vary
in width, so the CRC-32 of fixed-width records does not apply); the checksum is their sum.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..core import arrow_hash, valsort
from ..collections import tasks
from ._job import SortJob, each, per_block
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
            diff = [f"{n} is {t} there, {u} in {files[0]}" for n, t, u in zip(s.names, s.types, schema.types) if t != u]
            raise InputError(f"{f}: column types differ from the first file's: {'; '.join(diff)}")
        for g in range(pf.num_row_groups):
            parts.append((str(f), g))
            lens.append(pf.metadata.row_group(g).num_rows)
    return parts, lens, schema


def check_columns(by, schema, where) -> None:
    """Refuse sort columns that ``schema`` lacks, or whose type dsort does not order."""
    from ..collections.dataframe import encode_keys

    names = list(schema.names) if schema is not None else []
    missing = [c for c in by if c not in names]
    if missing:
        raise InputError(f"{where}: no column {', '.join(map(repr, missing))}; its columns are {', '.join(names) or '(none)'}")
    try:
        encode_keys(frame(schema.empty_table()), by)
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
    import pyarrow as pa

    path, group = part
    try:
        table = _open(path).read_row_group(group)
    except (OSError, pa.ArrowException) as e:  # a damaged page: the header and footer read fine
        detail = " ".join("".join(c if c.isprintable() else " " for c in str(e)).split())  # one line
        raise InputError(f"{path}: row group {group} is damaged ({detail})") from None
    return frame(table)


def read(files):
    """``(dask dataframe, rows per partition)``: one partition per row group."""
    import dask.dataframe as dd

    parts, lens, schema = row_groups(files)
    meta = frame(schema.empty_table())
    return dd.from_map(read_row_group, parts, meta=meta, enforce_metadata=False, label=tasks.READ), lens, schema


def row_hashes(df: pd.DataFrame) -> np.ndarray:
    """One 64-bit hash a row of ``df`` (Arrow-backed columns), of its values alone
    (:mod:`dsort.core.arrow_hash`)."""
    import pyarrow as pa

    return arrow_hash.row_hashes([pa.array(df[c]) for c in df.columns], len(df))


def _tally(df) -> valsort.Summary:
    nbytes = int(df.memory_usage(index=False, deep=False).sum())
    return valsort.Summary(records=len(df), checksum=valsort.exact_sum(row_hashes(df)), bytes=nbytes)


def summarize(df, by, ascending, na_position) -> valsort.Summary:
    """One part's summary: its order checked on keys encoded at its own string widths (no pass over
    the data comes first); its first and last rows' ``by`` values kept as small frames, which
    :func:`comparable` encodes at one width for the checks across parts."""
    from ..collections.dataframe import encode_keys

    keys = encode_keys(df, by, ascending, na_position)
    s = valsort.summarize(keys, checksums=row_hashes(df), nbytes=int(df.memory_usage(index=False, deep=False).sum()))
    if len(df):
        s.first_key, s.last_key = df[list(by)].iloc[:1], df[list(by)].iloc[-1:]
    return s


def comparable(summaries, by, ascending, na_position) -> list:
    """``summaries`` of consecutive parts (:func:`summarize`) with their first and last rows encoded
    as keys at one string width (the widest of those rows), so :func:`dsort.core.valsort.combine` can
    compare each part's last key with the next one's first."""
    from ..collections.dataframe import encode_keys

    ends = [s for s in summaries if s.records and s.first_key is not None]
    if not ends:
        return list(summaries)
    keys = encode_keys(pd.concat([x for s in ends for x in (s.first_key, s.last_key)]), by, ascending, na_position)
    for i, s in enumerate(ends):
        s.first_key, s.last_key = keys[2 * i : 2 * i + 1], keys[2 * i + 1 : 2 * i + 2]
    return list(summaries)


def _write(df, path, by, ascending, na_position, schema):
    import pyarrow as pa
    import pyarrow.parquet as pq

    s = summarize(df, by, ascending, na_position)
    pq.write_table(pa.Table.from_arrays([pa.array(df[f.name]).cast(f.type) for f in schema], schema=schema), path)  # no pandas metadata
    return s


def sort_job(files, tmp: Path, *, by, descending: bool, na_position: str = "last", external: bool = False, local_directory=None) -> SortJob:
    """Tasks that sort the rows of ``files`` by the columns ``by`` into the directory ``tmp``.
    ``external``: through runs under ``local_directory`` (:func:`dsort.dataframe.sort_values_external`),
    in memory bounded by a row group, not the data; the parts are then balanced to within one row."""
    from ..collections.dataframe import sort_values

    df, lens, schema = read(files)
    check_columns(by, schema, files[0] if len(files) == 1 else "the input")
    ascending = [not descending] * len(by)
    n = sum(lens)
    job = SortJob(records=n, nbytes=sum(Path(f).stat().st_size for f in files))
    width = max(5, len(str(len(lens) - 1)))  # one width for all, so name order is part order
    names = [f"part-{j:0{width}d}.parquet" for j in range(len(lens))]

    def finish(summaries):
        manifest = {
            "format": "dsort-parquet",
            "by": list(by),
            "ascending": ascending,
            "na_position": na_position,
            "records": int(n),
            "checksum": f"{sum(s.checksum for s in summaries):x}",
            "parts": [{"path": p, "rows": int(s.records)} for p, s in zip(names, summaries)],
        }
        if n == 0:  # an empty input: one empty part keeps the schema
            import pyarrow.parquet as pq

            pq.write_table(schema.empty_table(), tmp / "part-00000.parquet")
            manifest["parts"] = [{"path": "part-00000.parquet", "rows": 0}]
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")

    job.finish = finish
    job.comparable = lambda summaries: comparable(summaries, by, ascending, na_position)
    if n == 0:
        return job
    parts = df.to_delayed(optimize_graph=False)
    if external:
        out = sort_values(df, by, ascending=ascending, na_position=na_position, strategy="external", local_directory=local_directory)
    else:
        out = sort_values(df, by, ascending=ascending, na_position=na_position)
    job.inputs = per_block(tasks.CHECKSUM_INPUT, _tally, parts)
    job.outputs = per_block(
        tasks.WRITE,
        _write,
        out.to_delayed(optimize_graph=False),
        each([str(tmp / p) for p in names]),
        by,
        ascending,
        na_position,
        schema,
    )
    return job


def manifest(path: Path) -> dict | None:
    m = Path(path) / MANIFEST
    return json.loads(m.read_text()) if m.is_file() else None


def _check_part(part, by, ascending, na_position):
    return summarize(read_row_group(part), by, ascending, na_position)


def check_order(*, by=None, descending: bool = False, na_position: str = "last", order=None) -> tuple:
    """``(by, ascending, na_position)``: the order a check of Parquet looks for, from ``by`` (and
    ``descending``), else from ``order`` (a dsort manifest); an :class:`InputError` when neither
    names the sort columns, or ``descending`` contradicts the manifest."""
    if order and not by:
        by, ascending, na_position = order["by"], order["ascending"], order.get("na_position", "last")
        if descending and not all(a is False for a in ascending):
            raise InputError(
                f"--descending: this directory's {MANIFEST} says it was sorted by {', '.join(by)} ascending; "
                "drop --descending to check that order, or give --by to check another"
            )
    elif by:
        ascending = [not descending] * len(by)
    else:
        raise InputError(
            "checking Parquet needs the sort columns: pass --by COL[,COL...] (a dsort output directory names them in its manifest)"
        )
    return list(by), list(ascending), na_position


def check_tasks(files, by, ascending, na_position) -> list:
    """One task per row group of ``files``, each giving its :class:`~dsort.core.valsort.Summary` in the
    order ``(by, ascending, na_position)`` (:func:`check_order`); pass their results through
    :func:`comparable` before :func:`dsort.core.valsort.combine`. Each row group is read once."""
    from dask.base import tokenize

    parts, lens, schema = row_groups(files)
    check_columns(by, schema, files[0] if len(files) == 1 else "the input")
    token = tokenize(parts, by, ascending, na_position)
    return tasks.each(tasks.CHECK, token, _check_part, [(p, by, ascending, na_position) for p in parts])
