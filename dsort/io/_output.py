"""Output that appears whole or not at all, and never at the cost of what dsort did not write.

OUTPUT is written under a temporary name beside it (``.NAME.dsort-tmp-PID-XXXXXXXX``) and published
by one rename when complete:

* without ``overwrite`` the rename refuses to replace anything (``renameat2(RENAME_NOREPLACE)``), so
  of two runs that started before OUTPUT existed the second to finish fails clearly and the first
  one's result stays;
* with ``overwrite`` OUTPUT may be a file (or a symbolic link, which is replaced, not followed) or a
  directory that dsort wrote (its manifest :data:`MARKER` inside); anything else is refused. The new
  output and the old one trade places in one atomic exchange (``RENAME_EXCHANGE``), so OUTPUT is
  never missing, then the old one, now under the temporary name, is removed.

Only what dsort wrote is flushed (its files, then the directory entry of OUTPUT), never the other
files beside OUTPUT.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import re
import shutil
import signal
import stat
import sys
import threading
import uuid
from pathlib import Path

from ..core.run_lifetime import alive
from ..core.errors import InputError

MARKER = "_dsort.json"  # inside every directory dsort writes: its manifest
TMP_TAG = ".dsort-tmp-"  # temporary names: ".{OUTPUT name}.dsort-tmp-{pid}-{random}"


class OutputExists(InputError):
    """OUTPUT appeared while the sort ran (another run wrote it): this run's result is dropped."""


def _foreign_files(path: Path) -> list | None:
    """None unless ``path`` is a directory dsort wrote: its manifest readable and naming itself
    dsort's; else the names in it that the manifest does not list (an empty list: all are ours)."""
    import json

    try:
        manifest = json.loads((path / MARKER).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(manifest, dict) or manifest.get("format") != "dsort-parquet":
        return None
    ours = {MARKER, *(p.get("path") for p in manifest.get("parts", []) if isinstance(p, dict))}
    return sorted(n for n in os.listdir(path) if n not in ours)


def _written_by_dsort(path: Path) -> bool:
    return _foreign_files(path) == []


def _check_replaceable(out: Path, shown) -> None:
    """Raise unless ``--overwrite`` may replace what is at ``out``."""
    st = os.lstat(out)
    if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
        return
    if stat.S_ISDIR(st.st_mode):
        foreign = _foreign_files(out)
        if foreign == []:
            return
        what = (
            "holds files dsort did not write "
            f"({', '.join(foreign[:5])}{' ...' if len(foreign) > 5 else ''})"
            if foreign
            else f"is a directory that dsort did not write (no valid {MARKER} inside)"
        )
        raise InputError(
            f"OUTPUT {shown} {what}; --overwrite replaces only files and directories that dsort "
            "wrote, whole. "
            "Remove it yourself, or choose another OUTPUT"
        )
    raise InputError(
        f"OUTPUT {shown} exists and is not a regular file or directory; dsort will not replace it"
    )


def check_destination(output, inputs, *, overwrite: bool, input_dirs=()) -> Path:
    """Refuse an OUTPUT that would clobber or feed on the input; return it as an absolute path.

    Refused: an existing OUTPUT without ``overwrite``, and with it anything but a file or a
    directory dsort wrote; OUTPUT equal to an input file or inside an input directory (with
    ``overwrite`` too: the next run would read its own output); a missing or unwritable parent
    directory.
    """
    out = Path(output).absolute()
    real = Path(os.path.realpath(out))
    for p in inputs:
        if real == Path(os.path.realpath(p)):
            raise InputError(
                f"OUTPUT {output} is one of the input files; write the sorted data elsewhere"
            )
    for d in input_dirs:
        d = Path(os.path.realpath(d))
        if real == d or d in real.parents:
            raise InputError(
                f"OUTPUT {output} is inside INPUT {d}; write the sorted data elsewhere"
            )
    for p in [*inputs, *input_dirs]:
        if real in Path(os.path.realpath(p)).parents:  # replacing OUTPUT would delete the input
            raise InputError(
                f"INPUT {p} is inside OUTPUT {output}; write the sorted data elsewhere"
            )
    if out.exists() or out.is_symlink():
        if not overwrite:
            raise InputError(f"OUTPUT {output} exists; pass --overwrite to replace it")
        _check_replaceable(out, output)
    if not out.parent.is_dir():
        raise InputError(f"the directory of OUTPUT {output} does not exist: {out.parent}")
    if not os.access(out.parent, os.W_OK | os.X_OK):
        raise InputError(f"the directory of OUTPUT {output} is not writable: {out.parent}")
    return out


def temporary_name(output: Path, kind: str = "tmp") -> Path:
    """A hidden name beside ``output`` that says who made it: ``.NAME.dsort-KIND-PID-RANDOM``."""
    return output.parent / f".{output.name}.dsort-{kind}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


_LEFTOVER = re.compile(r"\.dsort-(tmp|old|runs)-(\d+)-[0-9a-f]{8}$")


def remove_leftovers(directory: Path, name: str, stream=None) -> list:
    """Remove what an earlier dsort run for OUTPUT ``name`` left in ``directory`` when it was
    killed (SIGKILL, a power cut): ``.NAME.dsort-tmp-PID-…`` outputs, ``-old-`` replaced outputs
    and ``-runs-`` run directories whose process ``PID`` is gone. Says so in one line each."""
    removed = []
    prefix = f".{name}"
    try:
        entries = [e for e in os.scandir(directory) if e.name.startswith(prefix)]
    except OSError:
        return removed
    for e in entries:
        m = _LEFTOVER.search(e.name[len(prefix) :])
        if not m or not e.name[len(prefix) :].startswith(".dsort-") or alive(int(m.group(2))):
            continue
        _remove(Path(e.path))
        removed.append(Path(e.path))
        print(
            f"dsort: removed {e.path}, left by an earlier run (process {m.group(2)}) that did not "
            "finish",
            file=stream or sys.stderr,
        )
    return removed


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


# -- one atomic rename -----------------------------------------------------------------------------

_NOREPLACE, _EXCHANGE = 1, 2
_AT_FDCWD = -100
_renameat2 = None


def _rename2(src: Path, dst: Path, flags: int) -> bool:
    """``renameat2(src, dst, flags)``; False where the kernel or file system lacks it (then the
    caller falls back), an ``OSError`` for any other failure."""
    global _renameat2
    if _renameat2 is None:
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fn = libc.renameat2
            fn.argtypes = [
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_int,
                ctypes.c_char_p,
                ctypes.c_uint,
            ]
            _renameat2 = fn
        except (OSError, AttributeError):
            _renameat2 = False
    if _renameat2 is False:
        return False
    if _renameat2(_AT_FDCWD, os.fsencode(src), _AT_FDCWD, os.fsencode(dst), flags) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(err, os.strerror(err), str(dst))


def _publish_new(tmp: Path, output: Path) -> None:
    """Move ``tmp`` to ``output``, which must not exist: :class:`OutputExists` if it does."""
    try:
        if _rename2(tmp, output, _NOREPLACE):
            return
        if tmp.is_dir():  # fallback: rename replaces only an empty directory, never a file
            if output.exists() or output.is_symlink():
                raise FileExistsError(errno.EEXIST, "exists", str(output))
            os.rename(tmp, output)
        else:
            os.link(tmp, output)  # fails if output exists
            tmp.unlink()
    except (FileExistsError, IsADirectoryError, NotADirectoryError) as e:
        raise OutputExists(
            f"OUTPUT {output} appeared while this sort ran (another run?); it was left as it is "
            "and nothing of this run was written"
        ) from e
    except OSError as e:
        if e.errno in (errno.EEXIST, errno.ENOTEMPTY):
            raise OutputExists(
                f"OUTPUT {output} appeared while this sort ran (another run?); it was left as it "
                "is and nothing of this run was written"
            ) from None
        raise


def _publish_over(tmp: Path, output: Path) -> None:
    """Put ``tmp`` at ``output`` in one step, replacing what is there if dsort may."""
    if not (output.exists() or output.is_symlink()):
        with contextlib.suppress(OutputExists):
            return _publish_new(tmp, output)
    _check_replaceable(output, output)  # again: it may have changed while the sort ran
    if _rename2(tmp, output, _EXCHANGE):  # the old output now sits at tmp
        _remove(tmp)
        return
    if not tmp.is_dir() and not (output.is_dir() and not output.is_symlink()):
        os.replace(tmp, output)
        return
    # no exchange on this file system: move the old directory aside under a name that says so,
    # and back if the new one cannot take its place
    old = temporary_name(output, "old")
    os.rename(output, old)
    try:
        os.rename(tmp, output)
    except BaseException:
        os.rename(old, output)
        raise
    _remove(old)


# -- staging
# -----------------------------------------------------------------------------------------


@contextlib.contextmanager
def staged(output: Path, *, directory: bool = False, overwrite: bool = False):
    """Yield a temporary path in OUTPUT's directory; publish it at OUTPUT if the block succeeds.

    On any exception (``KeyboardInterrupt`` and SIGTERM included: SIGTERM is turned into
    ``SystemExit`` while the block runs; a signal also vetoes the rename) the temporary path is
    removed and OUTPUT is left as it was. Without ``overwrite`` an OUTPUT that appeared meanwhile
    is kept and :class:`OutputExists` raised; with it, OUTPUT is replaced in one atomic exchange.
    """
    output = Path(output)
    remove_leftovers(output.parent, output.name)
    tmp = temporary_name(output)
    if directory:
        tmp.mkdir()
    stopped = []
    flushes = _flushes(tmp) if directory else contextlib.nullcontext()

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
        with flushes:
            yield tmp
            if stopped:
                raise (
                    KeyboardInterrupt
                    if stopped[0] == signal.SIGINT
                    else SystemExit(128 + stopped[0])
                )
            _wait_flushes(tmp)  # the parts' flushes begun as they were written
        _sync_tree(tmp)
        (_publish_over if overwrite else _publish_new)(tmp, output)
        _sync_dir(output.parent)
    except BaseException:
        _remove(tmp)
        raise
    finally:
        for sig, h in handlers.items():
            signal.signal(sig, h)


def fsync(path: Path) -> None:
    """Flush a file (or a directory's entries) to its disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


FLUSHERS = 4  # threads that flush parts in the background (flush_soon)
_flusher = None
# directories being staged by this process (:func:`staged`) -> their files' background flushes
_staging: dict = {}
_flusher_lock = threading.Lock()


def flush_soon(path: Path) -> None:
    """Flush a file dsort wrote to its disk. Where this process stages the directory it is in
    (:func:`staged`: the command line's embedded threads), on a thread of its own, and return:
    the task that wrote it goes on with the next one, the disk's writes overlap the sort (a flush
    waited for the disk in the task: 37 ms a Parquet part on 16 cores, 7% of the threads' time,
    BENCHMARKS.md section 10); the publish waits for every such flush and fails with the first
    error (a flush that failed once may not fail again: Linux reports a lost write to the
    descriptors open then). Elsewhere (a cluster's worker) in the task itself, whose error it is."""
    path = Path(os.path.abspath(path))
    with _flusher_lock:
        pending = _staging.get(path.parent)
        if pending is not None:
            global _flusher
            if _flusher is None:
                from concurrent.futures import ThreadPoolExecutor

                _flusher = ThreadPoolExecutor(FLUSHERS, thread_name_prefix="dsort-flush")
            pending.append(_flusher.submit(fsync, path))
            return
    fsync(path)


@contextlib.contextmanager
def _flushes(directory: Path):
    """Files written into ``directory`` meanwhile are flushed in the background
    (:func:`flush_soon`); :func:`_wait_flushes` waits for them."""
    key = Path(os.path.abspath(directory))
    with _flusher_lock:
        _staging[key] = []
    try:
        yield
    finally:
        with _flusher_lock:
            _staging.pop(key, None)


def _wait_flushes(directory: Path) -> None:
    """Wait for the background flushes of files in ``directory``; raise the first one's error."""
    with _flusher_lock:
        pending = list(_staging.get(Path(os.path.abspath(directory)), ()))
    for f in pending:
        f.result()


def _forget_flusher() -> None:
    """In a child made by ``fork``: the parent's flusher threads are not there (nor a lock one of
    them held), and it stages nothing; its first flush in a staged directory makes its own."""
    global _flusher, _flusher_lock, _staging
    _flusher, _flusher_lock, _staging = None, threading.Lock(), {}


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_flusher)


def _sync_tree(path: Path) -> None:
    """Flush what dsort wrote at ``path``: the file, or the directory's files and then its
    entries."""
    if path.is_dir():
        for p in path.iterdir():
            if p.is_file() and not p.is_symlink():
                fsync(p)
    fsync(path)


def _sync_dir(path: Path) -> None:
    """Flush a directory's entries (a rename into it), not the files in it."""
    with contextlib.suppress(FileNotFoundError):
        fsync(path)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()
