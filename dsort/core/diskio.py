"""Files at byte offsets: positioned reads and writes that finish (``pread_into``, ``pwrite_all``),
open handles kept for the reads of a block (:class:`BlockFiles`), run files mapped for a store's
life (:class:`Handles`), whole-file reads and writes of rows, and the start of the kernel's
writeback."""

from __future__ import annotations

import contextlib
import ctypes
import mmap
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
    """Open run files, one read-only handle per path, for the reads of one block (closed at its
    end)."""

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


class Handles:
    """Run files mapped into memory for a store's life, read as views: every merge reads a slice of
    every run, and a slice's cost is then a view of pages already in the page cache, no system
    call, no lock held across it, no copy (one copy per slice through ``pread``, with the GIL held,
    was most of a merge's time over many runs and ranges; opening each file again for each slice
    cost more than reading it: BENCHMARKS.md section 2). Each
    mapping holds a file handle (CPython's mmap keeps one): at most :data:`MAX_MAPS` are kept,
    within the process's open-file limit, the oldest dropped first (views already handed out keep
    theirs). Run files are written as new files (:func:`write_file`), never over a mapped one, so a
    view taken before a run is written again keeps the old pages."""

    def __init__(self):
        # path -> (its bytes as a NumPy view, the mapping or None for an empty file)
        self._maps: dict = {}
        self._lock = threading.Lock()
        self._cap = max(16, min(MAX_MAPS, open_file_limit() // 4))

    def _map(self, path):
        with self._lock:
            got = self._maps.get(path)
        if got is not None:
            return got[0]
        try:
            fd = os.open(path, os.O_RDONLY)
            try:
                size = os.fstat(fd).st_size
                mm = mmap.mmap(fd, size, access=mmap.ACCESS_READ) if size else None
                m = np.frombuffer(mm, np.uint8) if size else np.empty(0, np.uint8)
            finally:
                os.close(fd)
        except OSError as e:
            raise OSError(f"{path}: {e}") from None
        with self._lock:
            while len(self._maps) >= self._cap:
                self._maps.pop(next(iter(self._maps)))
            return self._maps.setdefault(path, (m, mm))[0]

    def read(self, path, offset: int, rows: int, row_bytes: int) -> np.ndarray:
        """Rows ``[offset, offset + rows * row_bytes)`` bytes of ``path`` as a read-only view
        ``(rows, row_bytes)``."""
        end = offset + rows * row_bytes
        m = self._map(path) if rows else np.empty(0, np.uint8)
        if end > len(m) and rows:
            raise OSError(f"{path}: unexpected end of file at byte {len(m):,} (reading to {end:,})")
        return m[offset:end].reshape(rows, row_bytes)

    def pread_into(self, path, buf, offset: int) -> None:
        """Fill ``buf`` from byte ``offset`` of ``path``."""
        n = len(memoryview(buf).cast("B"))
        np.copyto(np.frombuffer(buf, np.uint8, n), self.read(path, offset, n, 1).reshape(-1))

    def release(self, path, offset: int, nbytes: int) -> None:
        """Let this process's mapping of bytes ``[offset, offset + nbytes)`` of ``path`` go (its
        pages leave the process's resident memory; the page cache keeps them while the system has
        room): a merge is done with its slices. Views of them stay valid (read again from the
        file, which is never written over). Whole pages around the range go: a neighbour's page
        is read again if needed."""
        with self._lock:
            mm = self._maps.get(path, (None, None))[1]
        if mm is None or nbytes <= 0 or not hasattr(mmap, "MADV_DONTNEED"):
            return
        page = mmap.PAGESIZE
        start = offset - offset % page
        end = min(len(mm), -(-(offset + nbytes) // page) * page)
        if end > start:
            # advice only (locked pages, a closed mapping)
            with contextlib.suppress(OSError, ValueError):
                mm.madvise(mmap.MADV_DONTNEED, start, end - start)

    def forget(self, path) -> None:
        """Drop ``path``'s mapping, if any (the file was removed, or is about to be written
        again)."""
        with self._lock:
            self._maps.pop(path, None)

    def close(self) -> None:
        with self._lock:
            self._maps = {}


MAX_MAPS = 4096


def open_file_limit() -> int:
    """The soft limit on open files, raised to the hard limit first where it is lower (Linux: 1024
    soft, 524288 hard by default)."""
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard == resource.RLIM_INFINITY or soft < hard:
            want = MAX_MAPS * 4 if hard == resource.RLIM_INFINITY else min(hard, MAX_MAPS * 4)
            if want > soft:
                resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
                soft = want
        return soft
    except (ImportError, ValueError, OSError):
        return 1024


def read_file(path, offset: int, rows: int, row_bytes: int) -> np.ndarray:
    """``rows`` rows of ``row_bytes`` bytes at byte ``offset`` of ``path``, as ``(rows, row_bytes)``
    uint8."""
    with BlockFiles() as files:
        return files.read(path, offset, rows, row_bytes)


def write_file(path, rows) -> None:
    """Write ``rows`` (NumPy or CuPy) as a new file: under a temporary name, then renamed over
    ``path``, so a file of that name mapped by a reader is never truncated under it (a mapped page
    of a truncated file kills its reader with SIGBUS)."""
    host = dev.to_host(rows) if dev.is_device_array(rows) else np.ascontiguousarray(rows)
    tmp = f"{path}.{os.getpid()}-{threading.get_ident()}.tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(memoryview(host.reshape(-1).view(np.uint8)))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


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
