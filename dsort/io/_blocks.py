"""Building dask arrays from byte ranges of files, and writing chunks back at their offsets.

Tasks read and write the files themselves, so a cluster's workers must see INPUT and OUTPUT under
the same paths as the client (one machine, or a shared volume).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np

from ..core import plan
from ..core.diskio import pwrite_all
from ..core.errors import InputError


def read_rows(path: str, offset: int, rows: int, row_shape: tuple, dtype: str):
    """``rows`` rows of ``row_shape`` starting at byte ``offset``: through a memory map, copied out
    (the chunk then owns its memory, and pickles or spills as data, not as a file reference)."""
    if rows == 0:
        return np.empty((0, *row_shape), dtype)
    m = np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=(rows, *row_shape))
    block = np.array(m)
    del m  # unmaps
    return block


def file_array(files, data_offsets, lengths, row_shape: tuple, dtype, rows_per_block: int):
    """One dask array over the rows of several files (concatenated), one task per block."""
    from dask.array import Array
    from dask.base import tokenize
    from dask.highlevelgraph import HighLevelGraph

    from ..collections.tasks import READ, name, task

    dtype = np.dtype(dtype)
    blocks = plan.blocks(lengths, rows_per_block)
    token = tokenize(
        READ,
        [str(f) for f in files],
        [os.stat(f).st_mtime_ns for f in files],
        row_shape,
        dtype.str,
        rows_per_block,
    )
    layer = name(READ, token)
    row_bytes = dtype.itemsize * int(np.prod(row_shape, dtype=np.int64))
    tail = (0,) * len(row_shape)
    keys = [(layer, i, *tail) for i in range(len(blocks))]
    dsk = {
        k: task(
            k,
            read_rows,
            str(files[f]),
            int(data_offsets[f]) + s * row_bytes,
            n,
            row_shape,
            dtype.str,
        )
        for k, (f, s, n) in zip(keys, blocks)
    }
    chunks = (tuple(n for _, _, n in blocks) or (0,), *((d,) for d in row_shape))
    if not blocks:
        empty = (layer, 0, *tail)
        dsk = {empty: task(empty, np.empty, (0, *row_shape), dtype.str)}
    graph = HighLevelGraph.from_collections(layer, dsk, dependencies=())
    return Array(
        graph, layer, chunks, dtype=dtype, meta=np.empty((0,) * (1 + len(row_shape)), dtype)
    )


def write_at(path, offset: int, data: np.ndarray) -> None:
    """Write ``data``'s bytes at ``offset`` of an existing file (parallel writers, disjoint
    ranges)."""
    fd = os.open(path, os.O_WRONLY)
    try:
        pwrite_all(fd, np.ascontiguousarray(data).reshape(-1).view(np.uint8), offset)
    finally:
        os.close(fd)


def allocate(path: Path, size: int) -> None:
    """Create ``path`` with ``size`` bytes, its blocks reserved where the file system can (so a
    full disk shows now, not in the middle of the sort), else sparse."""
    with open(path, "r+b" if path.exists() else "wb") as f:
        if size:
            try:
                os.posix_fallocate(f.fileno(), 0, size)
                return
            except OSError as e:
                if e.errno == errno.ENOSPC:
                    raise InputError(
                        f"no space for OUTPUT: {size:,} bytes needed in {path.parent}"
                    ) from None
        f.truncate(size)
