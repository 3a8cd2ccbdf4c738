"""Files at byte offsets: positioned reads and writes that finish (``pread_into``, ``pwrite_all``),
open handles kept for the reads of a block or of a store's life (:class:`BlockFiles`,
:class:`Handles`), whole-file reads and writes of rows, and the start of the kernel's writeback."""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

import numpy as np

from ..engine import device as dev


def pread_into(fd: int, buf, offset: int) -> None:
    """Fill ``buf`` (a writable uint8 buffer) from byte ``offset`` of open file ``fd``."""
    view, done, n = memoryview(buf).cast("B"), 0, len(buf)
    while done < n:
        got = os.preadv(fd, [view[done:]], offset + done)
        if got == 0:
            raise OSError(f"unexpected end of file at byte {offset + done:,}")
        done += got


def pwrite_all(fd: int, buf, offset: int) -> None:
    """Write all of ``buf`` at byte ``offset`` of open file ``fd``."""
    view, done = memoryview(buf).cast("B"), 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


class BlockFiles:
    """Open run files, one read-only handle per path, for the reads of one block (closed at its end)."""

    def __enter__(self):
        self._fds: dict = {}
        return self

    def __exit__(self, *exc):
        for fd in self._fds.values():
            os.close(fd)

    def read(self, path, offset: int, rows: int, row_bytes: int) -> np.ndarray:
        """:func:`read_file` through this block's handle of ``path``."""
        fd = self._fds.get(path)
        if fd is None:
            fd = self._fds[path] = os.open(path, os.O_RDONLY)
        buf = np.empty(rows * row_bytes, np.uint8)
        try:
            pread_into(fd, buf, offset)
        except OSError as e:
            raise OSError(f"{path}: {e}") from None
        return buf.reshape(rows, row_bytes)


class Handles(BlockFiles):
    """Read handles of run files kept open across reads, for a store's life: every merge reads a
    slice of every run, and opening each file again for each slice cost more than reading it (385
    runs x 385 output ranges: 148,000 opens, the merges' largest cost). At most :data:`MAX_HANDLES`
    at once (the oldest closed first), within the process's open-file limit."""

    def __init__(self):
        self._fds: dict = {}
        self._lock = threading.Lock()
        self._cap = max(16, min(MAX_HANDLES, open_file_limit() // 4))

    def read(self, path, offset: int, rows: int, row_bytes: int) -> np.ndarray:
        buf = np.empty(rows * row_bytes, np.uint8)
        self.pread_into(path, buf, offset)
        return buf.reshape(rows, row_bytes)

    def pread_into(self, path, buf, offset: int) -> None:
        """Fill ``buf`` from byte ``offset`` of ``path``."""
        with self._lock:
            fd = self._fds.get(path)
            if fd is None:
                if len(self._fds) >= self._cap:
                    os.close(self._fds.pop(next(iter(self._fds))))
                fd = self._fds[path] = os.open(path, os.O_RDONLY)
            fd = os.dup(fd)  # this read's own: closing the cached one meanwhile cannot reach it
        try:
            pread_into(fd, buf, offset)
        except OSError as e:
            raise OSError(f"{path}: {e}") from None
        finally:
            os.close(fd)

    def forget(self, path) -> None:
        """Close ``path``'s handle, if open (the file is about to be written again)."""
        with self._lock:
            fd = self._fds.pop(path, None)
        if fd is not None:
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            fds, self._fds = list(self._fds.values()), {}
        for fd in fds:
            os.close(fd)


MAX_HANDLES = 4096


def open_file_limit() -> int:
    """The soft limit on open files, raised to the hard limit first where it is lower (Linux: 1024
    soft, 524288 hard by default)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            want = MAX_HANDLES * 4 if hard == resource.RLIM_INFINITY else min(hard, MAX_HANDLES * 4)
            if want > soft:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                soft = want
        return soft
    except (ImportError, ValueError, OSError):
        return 1024


def read_file(path, offset: int, rows: int, row_bytes: int) -> np.ndarray:
    """``rows`` rows of ``row_bytes`` bytes at byte ``offset`` of ``path``, as ``(rows, row_bytes)`` uint8."""
    with BlockFiles() as files:
        return files.read(path, offset, rows, row_bytes)


def write_file(path, rows) -> None:
    """Write ``rows`` (NumPy or CuPy) as a new file."""
    host = dev.to_host(rows) if dev.is_device_array(rows) else np.ascontiguousarray(rows)
    with open(path, "wb") as f:
        f.write(memoryview(host.reshape(-1).view(np.uint8)))


_SYNC_FILE_RANGE_WRITE = 2
_sync_file_range = None


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Ask the kernel to start writing ``[offset, offset + nbytes)`` of ``fd`` to disk now, without
    waiting (``sync_file_range``), so the final fsync finds little left to do. A no-op where the
    call does not exist."""
    global _sync_file_range
    if _sync_file_range is None:
        try:
            fn = ctypes.CDLL(None, use_errno=True).sync_file_range
            fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
            _sync_file_range = fn
        except (OSError, AttributeError):
            _sync_file_range = False
    if _sync_file_range:
        with contextlib.suppress(Exception):
            _sync_file_range(fd, offset, nbytes, _SYNC_FILE_RANGE_WRITE)
