"""One sort of files as the caller asked for it (:class:`SortRequest`), and what every format's
sort does alike around its tasks: the output's checks before it is published (:func:`check`), the
first-use notice of the GPU kernels, the run directories made and checked.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .collections.config import Limits
from .core import valsort
from .core.errors import CheckFailed, InputError


@dataclass(frozen=True)
class SortRequest:
    """One sort of files, as the caller asked for it (:func:`sort_files` says what each option
    means): the command line and :func:`sort_files` make it, :func:`run` carries it out."""

    input: object
    output: object
    format: str | None = None
    record_size: int = 100
    key_size: int = 10
    by: object = None
    descending: bool = False
    overwrite: bool = False
    chunk_size: int | None = None
    scheduler: str | None = None
    client: object = None
    security: object = None
    limits: Limits = Limits()
    progress: bool = True
    stream: object = None


def first_use_notice(stream) -> None:
    """Say so when this run compiles the GPU kernels (the first on a machine): it costs seconds."""
    from .engine import _cuda

    if not _cuda.kernels_built():
        print(
            f"first use of dsort's kernels on this {_cuda.arch()} GPU: compiling what this sort "
            "needs (seconds, once; "
            "`dsort build-kernels` builds them all ahead of time)",
            file=stream,
        )


def check_local_directory(path) -> None:
    """Refuse a ``--local-directory`` that cannot hold runs, before any work: not writable, or not
    makeable (its nearest existing parent a file, or not writable)."""
    path = Path(path)
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"--local-directory {path} cannot be made: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == path else f" in {existing}"
        raise InputError(
            f"--local-directory {path} is not writable"
            + (f" (it would be made{where})" if where else "")
        )


def make_dirs(path: Path) -> list:
    """Make ``path`` and its missing parents (as dask makes a worker's local directory); return
    the directories made, outermost first, so they can be removed again."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--local-directory {path} cannot be made: {e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"--local-directory {path} is not writable")
    return list(reversed(missing))


def check(ins: valsort.Summary, outs: valsort.Summary, n: int, out, stream) -> None:
    print(f"input  {ins.records:>15,} records  checksum {ins.checksum:x}", file=stream)
    print(f"output {outs.records:>15,} records  checksum {outs.checksum:x}", file=stream)
    problems = []
    if (ins.records, ins.checksum) != (outs.records, outs.checksum) or outs.records != n:
        problems.append("the output's record count or checksum differs from the input's")
    if outs.unordered:
        problems.append(
            f"the output is not sorted: {outs.unordered:,} records out of order, the first at "
            f"record {outs.first_unordered:,}"
        )
    if problems:
        raise CheckFailed("; ".join(problems) + f"; nothing was written at {out}")


class Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
