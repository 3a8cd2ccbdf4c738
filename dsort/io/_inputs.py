"""Finding the input: a file, a directory or a glob, and its format."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from .errors import InputError

FORMATS = ("records", "npy", "parquet")
_SUFFIXES = {".npy": "npy", ".parquet": "parquet", ".pq": "parquet"}


def format_of(path) -> str | None:
    """The format a name says (``.npy``, ``.parquet``/``.pq``), or None."""
    return _SUFFIXES.get(Path(str(path)).suffix.lower())


def _visible(p: Path) -> bool:
    return not p.name.startswith((".", "_"))


def discover(spec, fmt: str | None = None) -> tuple[str, list[Path], list[Path]]:
    """Resolve INPUT to ``(format, files in order, directories named)``.

    A directory stands for its visible files (not recursive; names starting with ``.`` or ``_``, such
    as temporary files and manifests, are skipped), in name order; a glob for its matches in name
    order; several files are one input, concatenated in that order. The format is ``fmt`` if given,
    else the one the names say; records otherwise. Every file must exist and be readable.
    """
    spec = str(spec)
    path = Path(spec)
    dirs: list[Path] = []
    if path.is_dir():
        dirs.append(path)
        files = sorted(p for p in path.iterdir() if _visible(p) and not p.is_dir())
        if fmt is None:
            named = {format_of(p) for p in files} - {None}
            if len(named) > 1:
                raise InputError(f"INPUT {spec} holds files of several formats ({', '.join(sorted(named))}); pass --format")
            fmt = named.pop() if named else None
        if fmt in _SUFFIXES.values():
            files = [p for p in files if format_of(p) == fmt]
    elif path.exists() or path.is_symlink():
        files = [path]
    elif glob.has_magic(spec):
        files = sorted(Path(p) for p in glob.glob(spec) if not Path(p).is_dir())
        if not files:
            raise InputError(f"no input file matches {spec}")
    else:
        raise InputError(f"INPUT {spec} does not exist")
    if fmt is None:
        named = {format_of(p) for p in files} - {None}
        if len(named) > 1:
            raise InputError(f"INPUT {spec} names files of several formats ({', '.join(sorted(named))}); pass --format")
        fmt = named.pop() if named else "records"
    if fmt not in FORMATS:
        raise InputError(f"unknown format {fmt!r}; dsort reads {', '.join(FORMATS)}")
    for p in files:
        if not p.exists():
            raise InputError(f"input file {p} does not exist")
        if not p.is_file():
            raise InputError(f"input {p} is not a regular file")
        if not os.access(p, os.R_OK):
            raise InputError(f"input file {p} is not readable (permission denied)")
        try:
            with open(p, "rb"):
                pass
        except OSError as e:
            raise InputError(f"input file {p} cannot be read: {e.strerror}") from None
    return fmt, files, dirs
