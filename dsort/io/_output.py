"""Output that appears whole or not at all: written under a temporary name beside OUTPUT, renamed last."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import uuid
from pathlib import Path

from .errors import InputError


def check_destination(output, inputs, *, overwrite: bool, input_dirs=()) -> Path:
    """Refuse an OUTPUT that would clobber or feed on the input; return it as an absolute path.

    Refused: an existing OUTPUT without ``overwrite``; OUTPUT equal to an input file or inside an
    input directory (with ``overwrite`` too: the next run would read its own output); a missing
    parent directory.
    """
    out = Path(output).absolute()
    real = Path(os.path.realpath(out))
    for p in inputs:
        if real == Path(os.path.realpath(p)):
            raise InputError(f"OUTPUT {output} is one of the input files; write the sorted data elsewhere")
    for d in input_dirs:
        d = Path(os.path.realpath(d))
        if real == d or d in real.parents:
            raise InputError(f"OUTPUT {output} is inside INPUT {d}; write the sorted data elsewhere")
    for p in [*inputs, *input_dirs]:
        if real in Path(os.path.realpath(p)).parents:  # replacing OUTPUT would delete the input
            raise InputError(f"INPUT {p} is inside OUTPUT {output}; write the sorted data elsewhere")
    if out.exists() or out.is_symlink():
        if not overwrite:
            raise InputError(f"OUTPUT {output} exists; pass --overwrite to replace it")
    if not out.parent.is_dir():
        raise InputError(f"the directory of OUTPUT {output} does not exist: {out.parent}")
    return out


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def staged(output: Path, *, directory: bool = False):
    """Yield a temporary path in OUTPUT's directory; rename it to OUTPUT if the block succeeds.

    On any exception (``KeyboardInterrupt`` and SIGTERM included: SIGTERM is turned into
    ``SystemExit`` while the block runs; a signal also vetoes the rename) the temporary path is removed and OUTPUT is left as it was.
    An existing OUTPUT (allowed by the caller) is replaced only after the new one is complete.
    """
    tmp = output.parent / f".{output.name}.dsort-tmp-{uuid.uuid4().hex[:8]}"
    if directory:
        tmp.mkdir()
    stopped = []

    def _stop(signum, frame):
        # An exception raised here can be swallowed (inside a garbage-collector callback, say), so
        # the flag also stops the rename below.
        stopped.append(signum)
        raise KeyboardInterrupt if signum == signal.SIGINT else SystemExit(128 + signum)

    handlers = {}
    if _main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            handlers[sig] = signal.signal(sig, _stop)
    try:
        yield tmp
        if stopped:
            raise KeyboardInterrupt if stopped[0] == signal.SIGINT else SystemExit(128 + stopped[0])
        _sync(tmp)
        if (output.is_dir() and not output.is_symlink()) or tmp.is_dir():
            # a directory cannot be replaced in one rename: move the old one aside, and back on failure
            old_out = output.parent / f".{output.name}.dsort-old-{uuid.uuid4().hex[:8]}"
            if output.exists() or output.is_symlink():
                os.rename(output, old_out)
            try:
                os.rename(tmp, output)
            except BaseException:
                if old_out.exists() or old_out.is_symlink():
                    os.rename(old_out, output)
                raise
            _remove(old_out)
        else:
            os.replace(tmp, output)  # atomic: OUTPUT is the old file or the new one, never missing
        _sync(output.parent)
    except BaseException:
        _remove(tmp)
        raise
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)


def _sync(path: Path) -> None:
    """Flush a file, or a directory's entries and files, to disk before they are renamed into place."""
    paths = [path] if not path.is_dir() else [*(p for p in path.iterdir() if p.is_file()), path]
    for p in paths:
        fd = os.open(p, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
