"""valsort's checksums of fixed-width records in files, summed in a process of their own.

numba's import and the compiled CRC loop's loading (:mod:`dsort.engine.crc`) are a long stretch of
Python holding the GIL. In the background of a CPU sort on 16 threads they made its run tasks and
its cuts several times slower (each thread coming back from NumPy waited for the GIL), though no
task waited for the loop (BENCHMARKS.md section 2). The embedded CPU sort of a large input
(:func:`worth_apart`) therefore has its checksums summed by a helper process (:func:`start_apart`),
which loads the loop under its own GIL and reads the ranges from the files themselves
(:func:`sums_apart`): the input's blocks while the sort runs, the output's ranges once written.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import pickle
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from . import diskio, valsort
from ..engine import crc

PIECE_BYTES = 8 << 20  # a range is read and summed this many bytes at a time (one buffer a thread)


def range_sum(path: str, offset: int, records: int, record_bytes: int) -> int:
    """valsort's checksum (the exact sum of the records' CRC-32s) of ``records`` fixed-width
    records of ``path`` from byte ``offset``."""
    step = max(1, PIECE_BYTES // max(record_bytes, 1))
    buf = np.empty(min(step, records) * record_bytes, np.uint8)
    total = 0
    fd = os.open(path, os.O_RDONLY)
    try:
        for first in range(0, records, step):
            m = min(step, records - first)
            rows = buf[: m * record_bytes]
            try:
                diskio.pread_into(fd, rows, offset + first * record_bytes)
            except OSError as e:
                raise OSError(f"{path}: {e}") from None
            total += valsort.checksum(rows.reshape(m, record_bytes))
    finally:
        os.close(fd)
    return total


def range_sums(items, threads: int) -> list:
    """:func:`range_sum` of every ``(path, offset, records, record_bytes)`` of ``items``, on
    ``threads`` threads (the loop runs without the GIL)."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(
        max(1, min(threads, len(items))), thread_name_prefix="dsort-checksum"
    ) as pool:
        return list(pool.map(lambda it: range_sum(*it), items))


class _Apart:
    """The helper process. Requests ``(id, items, threads)`` go to its standard input; answers
    ``(id, sums or an error's text)`` come back on a pipe of their own (its fd given in its
    arguments: whatever else it prints, a start-up hook's line say, goes to its inherited output and
    cannot be taken for an answer), each a pickle after its length (8 bytes). An answer of another
    id, or none, or a wait interrupted (Ctrl-C in a notebook) leaves the helper broken: it is ended
    and this process sums the ranges itself from then on, or a later job starts a new helper."""

    def __init__(self):
        root = str(Path(__file__).resolve().parents[2])  # this dsort, wherever it was imported from
        read, write = os.pipe()
        code = (
            f"import sys; sys.path.insert(0, {root!r}); from dsort.core.checksums import "
            f"_serve; _serve({write})"
        )
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", code], stdin=subprocess.PIPE, pass_fds=(write,), cwd=root
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        # unbuffered: select sees every byte not yet read
        self.answers = os.fdopen(read, "rb", buffering=0)
        self.owner = os.getpid()  # a forked child has its own helper (the pipes are not shared)
        self.lock = threading.Lock()
        self.broken = False
        self.next_id = 0

    def sums(self, items, threads: int) -> list:
        with self.lock:
            if self.broken:
                raise OSError("the checksum process is gone")
            self.next_id += 1
            try:
                _send(self.proc.stdin, (self.next_id, items, threads))
                answer = _receive(self.answers, self.proc)
            except BaseException:
                self.end()  # an answer left unread would be taken for the next request's
                raise
            if not isinstance(answer, tuple) or len(answer) != 2 or answer[0] != self.next_id:
                self.end()
                raise OSError(
                    f"the checksum process answered out of turn (exit code {self.proc.poll()})"
                )
        if isinstance(answer[1], str):
            raise OSError(answer[1])
        return answer[1]

    def end(self) -> None:
        """End the helper now, by its PID (it takes no more requests)."""
        self.broken = True
        with contextlib.suppress(OSError):
            self.proc.kill()
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            self.proc.wait(5.0)
        with contextlib.suppress(OSError):
            self.answers.close()

    def close(self) -> None:
        """End the helper: its input closed (it exits), else after a second ended by its PID."""
        if self.owner != os.getpid():
            return  # the parent's helper, inherited by a fork: the parent ends it
        try:
            self.proc.stdin.close()
            self.proc.wait(1.0)
        except (OSError, subprocess.TimeoutExpired):
            self.end()
        with contextlib.suppress(OSError):
            self.answers.close()


MAX_MESSAGE = 1 << 30  # bytes: a longer length is not an answer (a damaged pipe)


def _send(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def _receive(stream, proc=None):
    """The next message of ``stream``, or None at its end. Where ``proc`` (the process that writes
    it) is given, its death while this waits ends the wait (an OSError), never a hang."""
    if proc is not None:
        import select

        while not select.select([stream], [], [], 1.0)[0]:
            if proc.poll() is not None:
                raise OSError(f"the checksum process ended (exit code {proc.returncode})")
    head = _read(stream, 8)
    if len(head) < 8:
        return None
    size = int.from_bytes(head, "little")
    if size > MAX_MESSAGE:
        raise OSError(f"the checksum process's pipe is damaged (a message of {size:,} bytes)")
    data = _read(stream, size)
    if len(data) < size:
        return None
    return pickle.loads(data)


def _read(stream, n: int) -> bytes:
    """``n`` bytes of ``stream``, fewer only at its end (a pipe's reads may return less)."""
    parts, got = [], 0
    while got < n:
        b = stream.read(n - got)
        if not b:
            break
        parts.append(b)
        got += len(b)
    return b"".join(parts)


def _serve(answers_fd: int) -> None:
    """The helper process's loop: the compiled loop loaded first, then every request answered on
    ``answers_fd`` until its input closes."""
    import signal

    # a Ctrl-C of the terminal's group is the parent's to handle
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out, source = os.fdopen(answers_fd, "wb"), sys.stdin.buffer
    try:
        crc.warm()
        while (request := _receive(source)) is not None:
            ident, items, threads = request
            try:
                answer = range_sums(items, threads)
            except Exception as e:  # the parent sums them itself, and says why if that fails too
                answer = f"{type(e).__name__}: {e}"
            _send(out, (ident, answer))
    # the parent gone (its pipes closed): nothing to answer
    except (OSError, EOFError, ValueError, pickle.PickleError):
        pass
    os._exit(0)  # no interpreter teardown to wait for (the pool's threads, numba's)


# inputs of more than this a thread have their checksums summed apart
APART_BYTES_PER_THREAD = 32 << 20


def worth_apart(nbytes: int, threads: int) -> bool:
    """Whether a CPU sort of ``nbytes`` on ``threads`` threads should have its checksums summed by
    the checksum process: where :mod:`dsort.engine.crc`'s slow byte tables (in and out) would cost
    more than the wait for that process to load numba (which a shorter job waits out at its end;
    BENCHMARKS.md section 3): above :data:`APART_BYTES_PER_THREAD` a thread, and never at or below
    ``crc.LOAD_BYTES``."""
    return nbytes > max(crc.LOAD_BYTES, APART_BYTES_PER_THREAD * max(1, threads))


_apart: list = []  # the helper of this process, once started
_lock = threading.Lock()


def _helper():
    """This process's helper, if it has a working one (not one inherited by a fork)."""
    helper = _apart[0] if _apart else None
    return (
        helper if helper is not None and helper.owner == os.getpid() and not helper.broken else None
    )


def start_apart() -> None:
    """Start this process's checksum helper (once, or again after one broke; it lives until the
    process ends): it loads the compiled loop at once, apart from this process's threads."""
    with _lock:
        if _apart and (_apart[0] is None or _helper() is not None):
            return
        _apart.clear()
        try:
            helper = _Apart()
        except OSError:
            _apart.append(None)  # no process to be had: sums_apart sums here
            return
        _apart.append(helper)
        atexit.register(helper.close)


def stop_apart() -> None:
    """End this process's helper now (a job that failed or was interrupted while it summed: its
    answer is not wanted); a later job starts another."""
    with _lock:
        helper = _helper()
        if helper is not None:
            helper.end()


def sums_apart(items, threads: int) -> list:
    """:func:`range_sums` of ``items`` (``(path, offset, records, record_bytes)``), computed by the
    helper process where :func:`start_apart` started one and it answers; else (none, or it failed)
    here. Paths go to it absolute: it keeps the directory it started in."""
    items = [
        (os.path.abspath(path), int(offset), int(records), int(width))
        for path, offset, records, width in items
    ]
    helper = _helper()
    if helper is not None:
        try:
            return helper.sums(items, threads)
        # broken or failed: summed here (an error of the files themselves is raised here again)
        except Exception:
            pass
    return range_sums(items, threads)
