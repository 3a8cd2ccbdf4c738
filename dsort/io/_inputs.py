"""Finding the input: a file, a directory or a glob, and its format."""

from __future__ import annotations

import glob
import os
from pathlib import Path

from ..core.errors import InputError

FORMATS = ("records", "npy", "parquet")
_SUFFIXES = {".npy": "npy", ".parquet": "parquet", ".pq": "parquet"}


def format_of(path) -> str | None:
    """The format a name says (``.npy``, ``.parquet``/``.pq``), or None."""
    return _SUFFIXES.get(Path(str(path)).suffix.lower())


def _visible(p: Path) -> bool:
    return not p.name.startswith((".", "_"))


def _kind(p: Path) -> str:
    """What a file's name says it holds: ``npy``, ``parquet``, or ``records`` (any other name)."""
    return format_of(p) or "records"


def _one_kind(spec, files, fmt) -> str:
    """The one format of ``files`` (a directory's or a glob's): a mix is refused with the list,
    never silently dropped or read as records."""
    kinds: dict[str, list[Path]] = {}
    for p in files:
        kinds.setdefault(_kind(p), []).append(p)
    if len(kinds) > 1:

        def names(ps):
            shown = ", ".join(p.name for p in ps[:5])
            return shown + (f" and {len(ps) - 5} more" if len(ps) > 5 else "")

        listing = "; ".join(f"{k}: {names(ps)}" for k, ps in sorted(kinds.items()))
        raise InputError(
            f"INPUT {spec} mixes files of several formats ({listing}); an input is one format: "
            "move the others away or name the files with a glob"
        )
    return fmt or (next(iter(kinds)) if kinds else "records")


def discover(spec, fmt: str | None = None) -> tuple[str, list[Path], list[Path]]:
    """Resolve INPUT to ``(format, files in order, directories named)``.

    A directory stands for its visible files (not recursive; names starting with ``.`` or ``_``,
    such as temporary files and manifests, are skipped), in name order; a glob for its matches in
    name order; several files are one input, concatenated in that order, and must all be of one
    format by their names (``.npy``; ``.parquet``/``.pq``; anything else: records): a mix is
    refused. The format is ``fmt`` if given, else the one the names say. Every file must exist and
    be readable.
    """
    spec = str(spec)
    path = Path(spec)
    dirs: list[Path] = []
    if path.is_dir():
        dirs.append(path)
        files = sorted(p for p in path.iterdir() if _visible(p) and not p.is_dir())
        fmt = _one_kind(spec, files, fmt)
    elif path.exists() or path.is_symlink():
        files = [path]
        fmt = fmt or _kind(path)
    elif glob.has_magic(spec):
        files = sorted(Path(p) for p in glob.glob(spec) if not Path(p).is_dir())
        if not files:
            raise InputError(f"no input file matches {spec}")
        fmt = _one_kind(spec, files, fmt)
    else:
        raise InputError(f"INPUT {spec} does not exist")
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
