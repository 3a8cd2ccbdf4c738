"""CRC-32 (zlib's) of every fixed-width record, on the CPU, at memory speed.

``valsort``'s checksum sums one CRC-32 per record, so a sort's checksum stage reads every byte once
and must not cost more than reading it. A vectorized NumPy formulation needs one table lookup per
byte or two in tables no cache holds (0.2-0.5 GB/s); the loop here is compiled by numba
(:mod:`._crc_jit`): the table-driven CRC four bytes at a time (slicing by 4, 4 KiB of tables, in
L1), four records at a time so their lookups overlap, without the GIL so that threads scale. About
6 GB/s per core on 100-byte records, against 0.16-0.5 GB/s before.

Small inputs take a Python loop of ``zlib.crc32`` instead: no numba import, no compiled function to
load, a fraction of a microsecond per record; so do inputs up to :data:`LOAD_BYTES` while the loop
is not loaded (a job that will checksum more starts loading it in the background). The GPU's checksum is in
:mod:`dsort.core.valsort` (table lookups there are cheap).
"""

from __future__ import annotations

import functools
import sys
import threading
import zlib

import numpy as np

SMALL_BYTES = 1 << 16  # inputs up to this many bytes take the zlib loop, always
LOAD_BYTES = 32 << 20  # and up to this many while the compiled loop is not loaded: loading it
# (numba's import and cache, 0.3 s to 2 s by machine) costs more than the loop's 0.2-0.5 GB/s


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


def crc32_rows(rows: np.ndarray) -> np.ndarray:
    """uint32 CRC-32 of each row of a 2-D ``uint8`` NumPy array, equal to ``zlib.crc32(row)``."""
    n = rows.shape[0]
    if rows.size <= SMALL_BYTES or (rows.size <= LOAD_BYTES and not loaded()):
        rows = np.ascontiguousarray(rows)
        return np.fromiter((zlib.crc32(r) for r in rows), np.uint32, n)
    from ._crc_jit import crc32_rows_into

    out = np.empty(n, np.uint32)
    crc32_rows_into(np.ascontiguousarray(rows), tables(), out)
    return out


def loaded() -> bool:
    """Whether the compiled loop is loaded in this process."""
    return "dsort.engine._crc_jit" in sys.modules and not (_warming and _warming[0].is_alive())


def loading() -> bool:
    """Whether :func:`warm_in_background` is loading the loop right now."""
    with _lock:
        return bool(_warming) and _warming[0].is_alive()


def warm() -> None:
    """Compile (or load from numba's cache) the loop now, not in the first large checksum."""
    from ._crc_jit import crc32_rows_into

    crc32_rows_into(np.zeros((4, 8), np.uint8), tables(), np.empty(4, np.uint32))


def wait_loaded() -> bool:
    """Wait for a :func:`warm_in_background` still loading; True if there was one to wait for (a
    job times that wait as its own stage, apart from the checksums)."""
    with _lock:
        t = _warming[0] if _warming else None
    if t is None or not t.is_alive():
        return False
    t.join()
    return True


_warming: list[threading.Thread] = []
_lock = threading.Lock()


def warm_in_background() -> None:
    """Start :func:`warm` in a thread of its own, once per process: a job that will checksum on the
    CPU calls it first, so that numba's import and the loop's loading overlap the job's start, and
    its threads' first checksums wait for them once (numba compiles a function once, under its
    lock), not one after another."""
    with _lock:
        if not _warming:
            _warming.append(threading.Thread(target=warm, name="dsort-crc-warm", daemon=True))
            _warming[0].start()
