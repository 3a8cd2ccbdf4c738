"""Checking Parquet (``dsort check``): each row group's summary in a given order, and a dsort
output directory held to its manifest (:mod:`dsort.io.parquet` writes both)."""

from __future__ import annotations

from pathlib import Path

from ..collections import tasks
from ..core import arrow_hash
from ..core.errors import InputError
from .parquet import MANIFEST, _spec, check_columns, read_table, row_groups


def against_manifest(manifest: dict, files, found) -> list[str]:
    """What a check of a dsort output directory (``files``, its Parquet files; ``found``, their
    :class:`~dsort.core.valsort.Summary`) finds wrong against the directory's ``manifest``: parts
    it lists that are missing, Parquet files it does not list, and records or a checksum other than
    the sort wrote (the checksum where the manifest's rows were hashed as this dsort hashes them);
    one line each, none where all agree. Records in order are not enough: a part lost whole, or
    rows dropped from one, leaves the rest in order."""
    listed = [p.get("path") for p in manifest.get("parts", []) if isinstance(p, dict)]
    present = {Path(f).name for f in files}
    out = []

    def shown(names):
        return ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")

    missing = [p for p in listed if p not in present]
    if missing:
        out.append(f"{len(missing)} part(s) the manifest lists are missing: {shown(missing)}")
    extra = sorted(present - set(listed))
    if extra:
        out.append(f"{len(extra)} Parquet file(s) the manifest does not list: {shown(extra)}")
    records = int(manifest.get("records", -1))
    if found.records != records:
        out.append(f"{found.records:,} records where the manifest says {records:,}")
    checksum = str(manifest.get("checksum", ""))
    # a checksum of hashes of another version (an older dsort's output) is not this one's to compare
    same_hash = manifest.get("row_hash") == arrow_hash.VERSION
    if same_hash and f"{found.checksum:x}" != checksum:
        out.append(f"checksum {found.checksum:x} where the manifest says {checksum}")
    return out


def _check_part(part, spec):
    from ..core import table_chunk as TC

    return TC.summarize(read_table(part), spec)


def check_order(
    *, by=None, descending: bool = False, na_position: str = "last", order=None
) -> tuple:
    """``(by, ascending, na_position)``: the order a check of Parquet looks for, from ``by`` (and
    ``descending``), else from ``order`` (a dsort manifest); an :class:`InputError` when neither
    names the sort columns, or ``descending`` contradicts the manifest."""
    if order and not by:
        by, ascending, na_position = (
            order["by"],
            order["ascending"],
            order.get("na_position", "last"),
        )
        if descending and not all(a is False for a in ascending):
            raise InputError(
                f"--descending: this directory's {MANIFEST} says it was sorted by {', '.join(by)} "
                "ascending; "
                "drop --descending to check that order, or give --by to check another"
            )
    elif by:
        ascending = [not descending] * len(by)
    else:
        raise InputError(
            "checking Parquet needs the sort columns: pass --by COL[,COL...] (a dsort output "
            "directory names them in its manifest)"
        )
    return list(by), list(ascending), na_position


def check_tasks(files, by, ascending, na_position) -> list:
    """One task per row group of ``files``, each giving its :class:`~dsort.core.valsort.Summary` in
    the order ``(by, ascending, na_position)`` (:func:`check_order`); pass their results through
    :func:`dsort.io.parquet.comparable` before :func:`dsort.core.valsort.combine`. Each row group is
    read once."""
    from dask.base import tokenize

    parts, lens, schema = row_groups(files)
    check_columns(by, schema, files[0] if len(files) == 1 else "the input")
    spec = _spec(schema, by, ascending, na_position)
    token = tokenize(parts, spec)
    return tasks.each(tasks.CHECK, token, _check_part, [(p, spec) for p in parts])
