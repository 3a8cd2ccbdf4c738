"""``.npy`` files of 1-D numeric arrays: read through memory maps in bounded blocks, written with
NumPy's own header. Several files are one array, concatenated (they must share one dtype)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core import valsort
from ..core import plan
from ._blocks import allocate, file_array, read_rows
from ..core.errors import InputError

_KINDS = "biuf"


def header(path) -> tuple[np.dtype, int, int]:
    """``(dtype, length, data offset)`` of a 1-D ``.npy`` file dsort can sort, else
    :class:`InputError`."""
    try:  # the header alone (a memory map would refuse a truncated file before its size is checked)
        with open(path, "rb") as f:
            version = np.lib.format.read_magic(f)
            read = (
                np.lib.format.read_array_header_1_0
                if version == (1, 0)
                else np.lib.format.read_array_header_2_0
            )
            shape, fortran, dtype = read(f, max_header_size=1 << 20)
            offset = f.tell()
    # NumPy raises many types for a damaged header (ValueError, SyntaxError, TokenError...)
    except Exception as e:
        raise InputError(
            f"{path}: not a readable .npy file (damaged or not .npy: {type(e).__name__})"
        ) from None
    if len(shape) != 1:
        raise InputError(f"{path}: dsort sorts 1-D arrays; this .npy holds shape {shape}")
    if (
        dtype.kind not in _KINDS
        or (dtype.kind == "f" and dtype.itemsize not in (4, 8))
        or dtype.hasobject
    ):
        raise InputError(
            f"{path}: unsupported dtype {dtype}; dsort sorts .npy arrays of bool, (u)int8-64, "
            "float32 or float64"
        )
    if not dtype.isnative and dtype.itemsize > 1:
        raise InputError(
            f"{path}: dtype {dtype.str} is not in this machine's byte order; convert it with "
            f"astype({dtype.newbyteorder('=').str!r})"
        )
    n = shape[0]
    expected = offset + n * dtype.itemsize
    size = Path(path).stat().st_size
    if size < expected:
        raise InputError(
            f"{path}: truncated .npy file ({size:,} bytes, its header promises {expected:,})"
        )
    return dtype, n, offset


def inspect(files) -> tuple[np.dtype, list[int], list[int]]:
    """``(dtype, lengths, data offsets)`` of ``files``, which must share one dtype."""
    heads = [header(f) for f in files]
    dtypes = {h[0] for h in heads}
    if len(dtypes) > 1:
        raise InputError(
            f"the input .npy files have different dtypes ({', '.join(sorted(map(str, dtypes)))}); "
            "dsort sorts one dtype"
        )
    dtype = heads[0][0] if heads else np.dtype(np.float64)
    return dtype, [h[1] for h in heads], [h[2] for h in heads]


def read(files, rows_per_block: int):
    dtype, lens, offsets = inspect(files)
    return file_array(files, offsets, lens, (), dtype, rows_per_block)


def create(path: Path, dtype, n: int) -> int:
    """Write a ``.npy`` header for ``n`` elements of ``dtype`` at ``path`` and allocate the data;
    return the data's offset."""
    head = np.lib.format.header_data_from_array_1_0(np.empty(0, dtype))
    head["shape"] = (n,)
    with open(path, "wb") as f:
        np.lib.format.write_array_header_1_0(f, head)
        offset = f.tell()
    allocate(path, offset + n * np.dtype(dtype).itemsize)
    return offset


def _check_block(path, offset, rows, dtype, descending):
    return valsort.summarize(read_rows(path, offset, rows, (), dtype), descending=descending)


def check_tasks(files, *, rows_per_block: int, descending: bool = False):
    """One task per block of ``files``, each giving the block's
    :class:`~dsort.core.valsort.Summary`."""
    from dask.base import tokenize

    from ..collections import tasks

    dtype, lens, offsets = inspect(files)
    token = tokenize([str(f) for f in files], rows_per_block, descending)
    rows = [
        (str(files[f]), offsets[f] + s * dtype.itemsize, m, dtype.str, descending)
        for f, s, m in plan.blocks(lens, rows_per_block)
    ]
    return tasks.each(tasks.CHECK, token, _check_block, rows)
