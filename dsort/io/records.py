"""Fixed-width binary records (the Sort Benchmark's format): ``record_size`` bytes each, the first
``key_size`` of them the key, compared as unsigned bytes; files are read through memory maps in
bounded blocks, the key as byte rows ``(n, key_size)`` and the rest as payload rows."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from .. import check as C
from ._blocks import allocate, file_array, plan_blocks, read_rows, to_host, write_at
from ._job import SortJob, each, per_block
from .errors import InputError


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
        raise InputError(f"--key-size must be between 1 and --record-size ({record_size}), got {key_size}")


def read(files, record_size: int, rows_per_block: int):
    """The records of ``files`` (concatenated) as one dask array ``(n, record_size)`` of uint8."""
    return file_array("dsort-read", files, [0] * len(files), lengths(files, record_size), (record_size,), np.uint8, rows_per_block)


def _keys(block, key_size):
    return block[:, :key_size].copy()  # copy: C-contiguous byte rows, as the engines take them


def _payload(block, key_size):
    return block[:, key_size:].copy()


def _tally(block) -> C.Summary:
    crc = C.crc32_rows(block)
    return C.Summary(records=len(block), checksum=C.exact_sum(crc), bytes=block.size)


def _write(keys, payload, path, offset, descending):
    xp = C._xp(keys)
    rows = keys if payload is None else xp.concatenate([keys, payload], axis=1)
    s = C.summarize(keys, rows, descending=descending)
    write_at(path, offset, to_host(rows))
    return s


def sort_job(files, tmp: Path, *, record_size: int, key_size: int, rows_per_block: int, descending: bool, to_device=None) -> SortJob:
    """Tasks that sort the records of ``files`` by key into the file ``tmp`` (allocated here)."""
    from dask.base import tokenize

    from ..array import sort, sort_by_key

    check_sizes(record_size, key_size)
    n = sum(lengths(files, record_size))
    allocate(tmp, n * record_size)
    job = SortJob(records=n, nbytes=n * record_size)
    if n == 0:
        return job
    rec = read(files, record_size, rows_per_block)
    if to_device is not None:
        rec = rec.map_blocks(to_device, dtype=rec.dtype, name=f"dsort-to-device-{tokenize(rec)}")
    tok = tokenize(rec, key_size)
    keys = rec.map_blocks(_keys, key_size, chunks=(rec.chunks[0], (key_size,)), dtype=np.uint8, name=f"dsort-keys-{tok}")
    if key_size < record_size:
        payload = rec.map_blocks(_payload, key_size, chunks=(rec.chunks[0], (record_size - key_size,)), dtype=np.uint8, name=f"dsort-payload-{tok}")
        sk, sv = sort_by_key(keys, payload, descending=descending)
        sv_blocks = list(sv.to_delayed(optimize_graph=False).ravel())
    else:
        sk, sv_blocks = sort(keys, descending=descending), [None] * len(rec.chunks[0])
    offsets = np.concatenate([[0], np.cumsum(sk.chunks[0])[:-1]]) * record_size
    job.inputs = per_block("dsort-checksum-input", _tally, rec.to_delayed(optimize_graph=False).ravel())
    job.outputs = per_block(
        "dsort-write", _write, sk.to_delayed(optimize_graph=False).ravel(), each(sv_blocks), str(tmp), each(offsets.tolist()), descending
    )
    return job


def _check_block(path, offset, rows, record_size, key_size, descending):
    block = read_rows(path, offset, rows, (record_size,), "u1")
    return C.summarize(block[:, :key_size], block, descending=descending)


def check_tasks(files, *, record_size: int, key_size: int, rows_per_block: int, descending: bool = False):
    """One task per block of ``files``, each giving the block's :class:`~dsort.check.Summary`."""
    from dask.delayed import delayed

    check_sizes(record_size, key_size)
    from dask.base import tokenize

    blocks = plan_blocks(lengths(files, record_size), rows_per_block)
    name = f"dsort-check-{tokenize([str(f) for f in files], record_size, key_size, rows_per_block, descending)}"
    return [
        delayed(_check_block, pure=True)(str(files[f]), s * record_size, m, record_size, key_size, descending, dask_key_name=(name, i))
        for i, (f, s, m) in enumerate(blocks)
    ]
