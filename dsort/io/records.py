"""Fixed-width binary records (the Sort Benchmark's format): ``record_size`` bytes each, the first
``key_size`` of them the key, compared as unsigned bytes; files are read through memory maps in
bounded blocks, the key as byte rows ``(n, key_size)`` and the rest as payload rows."""

from __future__ import annotations

import os

import numpy as np

from ..core import valsort
from ..core import plan
from ._blocks import file_array, read_rows
from ..core.errors import InputError


def lengths(files, record_size: int) -> list[int]:
    """Records per file; a file whose size is not a multiple of ``record_size`` is refused."""
    if record_size < 1:
        raise InputError(f"--record-size must be positive, got {record_size}")
    out = []
    for f in files:
        size = os.path.getsize(f)
        if size % record_size:
            raise InputError(
                f"{f}: size {size:,} bytes is not a multiple of the record size {record_size} "
                f"({size // record_size:,} records and {size % record_size} bytes left over)"
            )
        out.append(size // record_size)
    return out


def check_sizes(record_size: int, key_size: int) -> None:
    if not 0 < key_size <= record_size:
        raise InputError(
            f"--key-size must be between 1 and --record-size ({record_size}), got {key_size}"
        )


def read(files, record_size: int, rows_per_block: int):
    """The records of ``files`` (concatenated) as one dask array ``(n, record_size)`` of uint8."""
    return file_array(
        files,
        [0] * len(files),
        lengths(files, record_size),
        (record_size,),
        np.uint8,
        rows_per_block,
    )


def _check_block(path, offset, rows, record_size, key_size, descending):
    block = read_rows(path, offset, rows, (record_size,), "u1")
    return valsort.summarize(block[:, :key_size], block, descending=descending)


def check_tasks(
    files, *, record_size: int, key_size: int, rows_per_block: int, descending: bool = False
):
    """One task per block of ``files``, each giving the block's
    :class:`~dsort.core.valsort.Summary`."""
    from dask.base import tokenize

    from ..collections import tasks

    check_sizes(record_size, key_size)
    blocks = plan.blocks(lengths(files, record_size), rows_per_block)
    token = tokenize([str(f) for f in files], record_size, key_size, rows_per_block, descending)
    rows = [
        (str(files[f]), s * record_size, m, record_size, key_size, descending) for f, s, m in blocks
    ]
    return tasks.each(tasks.CHECK, token, _check_block, rows)
