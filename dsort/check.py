"""``dsort check`` as a Python API: :func:`check_path` summarizes the data at a path as the Sort
Benchmark's ``valsort`` does (records, checksum, duplicate keys, order), chunk by chunk in
parallel, embedded or on a cluster; :func:`report_check` prints ``valsort``'s report."""

from __future__ import annotations

import sys

from .core import valsort


def rows_per_block(row_bytes: int, chunk_size: int | None) -> int:
    """Rows per block for ``dsort check``: ``--chunk-size`` bytes, else ``dsort.check.block``."""
    from .collections import config

    return max(int(chunk_size or config.nbytes("check.block")) // max(row_bytes, 1), 1)


def check_path(
    path,
    *,
    fmt=None,
    record_size=100,
    key_size=10,
    by=None,
    descending=False,
    chunk_size=None,
    scheduler=None,
    security=None,
) -> valsort.Summary:
    """The :class:`~dsort.core.valsort.Summary` of the data at ``path`` (chunk by chunk, in
    parallel; on the cluster at ``scheduler``, with ``security`` for a ``tls://`` one)."""
    import dask

    from . import io
    from .io import npy, parquet, parquet_check, records

    fmt, files, dirs = io.discover(path, fmt)
    manifest = parquet.manifest(dirs[0]) if fmt == "parquet" and dirs else None
    if fmt == "records":
        tasks = records.check_tasks(
            files,
            record_size=record_size,
            key_size=key_size,
            rows_per_block=rows_per_block(record_size, chunk_size),
            descending=descending,
        )
    elif fmt == "npy":
        tasks = npy.check_tasks(
            files,
            rows_per_block=rows_per_block(npy.inspect(files)[0].itemsize, chunk_size),
            descending=descending,
        )
    else:
        order = parquet_check.check_order(by=by, descending=descending, order=manifest)
        tasks = parquet_check.check_tasks(files, *order)
    if scheduler:
        from .cluster import connect
        from .progress import run

        with connect(scheduler, quiet=True, security=security) as session:
            parts = run(session, tasks)[0] if tasks else []
    else:
        from dask.diagnostics import ProgressBar

        bar = ProgressBar(minimum=1.0) if sys.stdout.isatty() else _null()
        with bar:
            parts = dask.compute(*tasks, scheduler="threads") if tasks else []
    if fmt == "parquet":  # the parts' first and last rows, encoded at one width
        parts = parquet.comparable(parts, *order)
    total = valsort.combine(parts, descending=descending and fmt != "parquet")
    if manifest:
        total.problems = parquet_check.against_manifest(manifest, files, total)
    return total


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def report_check(s: valsort.Summary, out=None) -> None:
    """``valsort``'s report, and a FAILURE line for each of the check's other problems (records
    or parts of a dsort output missing against its manifest)."""
    out = out or sys.stdout
    print(f"Records: {s.records:,}", file=out)
    print(f"Checksum: {s.checksum:x}", file=out)
    print(f"Duplicate keys: {s.duplicates:,}", file=out)
    for problem in s.problems:
        print(f"FAILURE - {problem}", file=out)
    if s.sorted and not s.problems:
        print("SUCCESS - all records are in order", file=out)
    elif not s.sorted:
        print(
            f"FAILURE - {s.unordered:,} records out of order, the first at record "
            f"{s.first_unordered:,}",
            file=out,
        )
