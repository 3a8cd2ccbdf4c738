"""CRC-32 (zlib's) of every fixed-width record, on the CPU, at memory speed.

``valsort``'s checksum sums one CRC-32 per record, so a sort's checksum stage reads every byte once
and must not cost more than reading it. A vectorized NumPy formulation needs one table lookup per
byte or two in tables no cache holds (0.2-0.5 GB/s); the loop here is compiled by numba
(:mod:`._crc_jit`): the table-driven CRC four bytes at a time (slicing by 4, 4 KiB of tables, in
L1), four records at a time so their lookups overlap, without the GIL so that threads scale. About
6 GB/s per core on 100-byte records, against 0.16-0.5 GB/s before.

Small inputs take a Python loop of ``zlib.crc32`` instead: no numba import, no compiled function to
load, a fraction of a microsecond per record; inputs up to :data:`LOAD_BYTES` take byte tables
(:func:`byte_tables`: NumPy gathers, 0.2-0.25 GB/s a core, threads scaling) while the loop is not loaded. The
embedded CPU sort of a large input sums its records' checksums in a process of its own
(:func:`start_apart`, :func:`sums_apart`, :func:`worth_apart`), from the files. The GPU's checksum is in
:mod:`dsort.core.valsort` (table lookups there are cheap).
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
import pickle
import subprocess
import sys
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

SMALL_BYTES = 1 << 16  # inputs up to this many bytes take the zlib loop, always
LOAD_BYTES = 32 << 20  # and up to this many the byte tables while the compiled loop is not loaded: loading
# it (numba's import and cache, 0.3 s to 2 s by machine) costs more than their 0.4-0.5 GB/s a core


@functools.lru_cache(maxsize=1)
def tables() -> np.ndarray:
    """``(4, 256)`` uint32: ``T[0]`` the byte-at-a-time table of the reflected polynomial
    0xEDB88320 (zlib's CRC-32), ``T[k][b]`` the CRC of byte ``b`` followed by ``k`` zero bytes."""
    t = np.zeros((4, 256), np.uint32)
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0xEDB88320 if c & 1 else 0)
        t[0, b] = c
    for k in range(1, 4):
        t[k] = (t[k - 1] >> 8) ^ t[0, t[k - 1] & 0xFF]
    return t


@functools.lru_cache(maxsize=8)
def byte_tables(width: int) -> np.ndarray:
    """``(width, 256)`` uint32: ``B[j][b]``, what byte ``b`` at position ``j`` of a ``width``-byte
    record adds (XOR) to its CRC-32: the CRC register after ``b`` then ``width - 1 - j`` zero
    bytes, from a zero register. CRC-32 is affine in the record's bits: ``zlib.crc32(r)`` is
    ``zlib.crc32(bytes(width))`` XOR every ``B[j][r[j]]``."""
    t0 = tables()[0]
    b = np.empty((width, 256), np.uint32)
    if width:
        b[width - 1] = t0
    for j in range(width - 2, -1, -1):
        b[j] = (b[j + 1] >> 8) ^ t0[b[j + 1] & 0xFF]
    return b


TABLE_BLOCK = 8192  # records a step of the table path (their columns and lookups stay in the cache)


def _crc32_by_tables(rows: np.ndarray) -> np.ndarray:
    """:func:`crc32_rows` by :func:`byte_tables`, no compiled loop to load: for each block of
    :data:`TABLE_BLOCK` records one NumPy gather of every byte's table entry and one XOR reduction,
    each a long call that releases the GIL (0.2-0.25 GB/s a core, threads scaling: a gather and an
    XOR per byte column, 0.44 GB/s on one thread, fell to 15 MB/s a thread on 16 threads, every
    short call a fight for the GIL)."""
    n, w = rows.shape
    b = byte_tables(w)
    out = np.full(n, zlib.crc32(bytes(w)), np.uint32)
    at = np.arange(w)[:, None]
    for a in range(0, n if w else 0, TABLE_BLOCK):
        m = min(TABLE_BLOCK, n - a)
        out[a : a + m] ^= np.bitwise_xor.reduce(b[at, np.ascontiguousarray(rows[a : a + m].T)], axis=0)
    return out


def crc32_rows(rows: np.ndarray) -> np.ndarray:
    """uint32 CRC-32 of each row of a 2-D ``uint8`` NumPy array, equal to ``zlib.crc32(row)``:
    zlib's loop up to :data:`SMALL_BYTES`, byte tables (:func:`_crc32_by_tables`) up to
    :data:`LOAD_BYTES` while the compiled loop is not loaded, else the compiled loop."""
    n = rows.shape[0]
    if rows.size <= SMALL_BYTES:
        rows = np.ascontiguousarray(rows)
        return np.fromiter((zlib.crc32(r) for r in rows), np.uint32, n)
    if rows.size <= LOAD_BYTES and not loaded():
        return _crc32_by_tables(rows)
    from ._crc_jit import crc32_rows_into

    out = np.empty(n, np.uint32)
    crc32_rows_into(np.ascontiguousarray(rows), tables(), out)
    return out


def loaded() -> bool:
    """Whether the compiled loop is loaded in this process."""
    return "dsort.engine._crc_jit" in sys.modules


def warm() -> None:
    """Compile (or load from numba's cache) the loop now, not in the first large checksum."""
    from ._crc_jit import crc32_rows_into

    crc32_rows_into(np.zeros((4, 8), np.uint8), tables(), np.empty(4, np.uint32))


_lock = threading.Lock()


# -- checksums of file ranges, in a process of their own -------------------------------------------
#
# numba's import and the loop's loading are about a second and a half of Python holding the GIL. In
# the background of a CPU sort on 16 threads they made its run tasks 3x slower and its cuts 4x
# (each thread coming back from NumPy waited for the GIL), though no task waited for the loop. The
# embedded CPU sort therefore has the records' checksums summed by a helper process
# (:func:`start_apart`), which loads the loop under its own GIL and reads the ranges from the files
# themselves: the input's blocks while the sort runs, the output's ranges once written.

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
            view = memoryview(buf)[: m * record_bytes]
            done = 0
            while done < len(view):
                got = os.preadv(fd, [view[done:]], offset + first * record_bytes + done)
                if got <= 0:
                    raise OSError(f"{path}: unexpected end of file at byte {offset + first * record_bytes + done:,}")
                done += got
            total += int(crc32_rows(buf[: m * record_bytes].reshape(m, record_bytes)).astype(np.uint64).sum())
    finally:
        os.close(fd)
    return total


def range_sums(items, threads: int) -> list:
    """:func:`range_sum` of every ``(path, offset, records, record_bytes)`` of ``items``, on
    ``threads`` threads (the loop runs without the GIL)."""
    items = list(items)
    if not items:
        return []
    with ThreadPoolExecutor(max(1, min(threads, len(items))), thread_name_prefix="dsort-checksum") as pool:
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
        code = f"import sys; sys.path.insert(0, {root!r}); from dsort.engine.crc import _serve; _serve({write})"
        try:
            self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, pass_fds=(write,), cwd=root)
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        self.answers = os.fdopen(read, "rb", buffering=0)  # unbuffered: select sees every byte not yet read
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
                raise OSError(f"the checksum process answered out of turn (exit code {self.proc.poll()})")
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

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl-C of the terminal's group is the parent's to handle
    out, source = os.fdopen(answers_fd, "wb"), sys.stdin.buffer
    try:
        warm()
        while (request := _receive(source)) is not None:
            ident, items, threads = request
            try:
                answer = range_sums(items, threads)
            except Exception as e:  # the parent sums them itself, and says why if that fails too
                answer = f"{type(e).__name__}: {e}"
            _send(out, (ident, answer))
    except (OSError, EOFError, ValueError, pickle.PickleError):  # the parent gone (its pipes closed): nothing to answer
        pass
    os._exit(0)  # no interpreter teardown to wait for (the pool's threads, numba's)


APART_BYTES_PER_THREAD = 32 << 20  # inputs of more than this a thread have their checksums summed apart


def worth_apart(nbytes: int, threads: int) -> bool:
    """Whether a CPU sort of ``nbytes`` on ``threads`` threads should have its checksums summed by
    the checksum process: where the byte tables' 0.2-0.25 GB/s a core (in and out) would cost more
    than the wait for that process to load numba (1-1.6 s, which a shorter job waits out at its
    end): above :data:`APART_BYTES_PER_THREAD` a thread, and never at or below :data:`LOAD_BYTES`."""
    return nbytes > max(LOAD_BYTES, APART_BYTES_PER_THREAD * max(1, threads))


_apart: list = []  # the helper of this process, once started


def _helper():
    """This process's helper, if it has a working one (not one inherited by a fork)."""
    helper = _apart[0] if _apart else None
    return helper if helper is not None and helper.owner == os.getpid() and not helper.broken else None


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
    items = [(os.path.abspath(path), int(offset), int(records), int(width)) for path, offset, records, width in items]
    helper = _helper()
    if helper is not None:
        try:
            return helper.sums(items, threads)
        except Exception:  # broken or failed: summed here (an error of the files themselves is raised here again)
            pass
    return range_sums(items, threads)
