"""Test data: Sort Benchmark records and numeric ``.npy`` arrays, generated in bounded chunks.

Records (``gensort``'s layout, 100 bytes): a 10-byte binary key, uniformly random (``skew=True``:
keys drawn from a skewed distribution, with many repeats, to stress the splitters), then the
record's index as 16 hex ASCII digits, and filler bytes (``0x20``..) up to the record size, ending
in ``\\r\\n`` as gensort's do. The payload identifies each record, so a checksum catches any loss.
``ascii=True`` (gensort's ``-a``): the key's bytes are printable (`` `` to ``~``), so every record
is a newline-terminated text line and line tools (``LC_ALL=C sort``) sort the very same records.
Deterministic for a given ``seed``, whatever the chunk size.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

CHUNK = 1 << 20  # records (or elements) generated at once


def _rng(seed, chunk: int):
    return np.random.default_rng([seed, chunk])


def record_chunk(
    start: int,
    n: int,
    *,
    seed: int,
    record_size: int = 100,
    key_size: int = 10,
    skew: bool = False,
    ascii: bool = False,
) -> np.ndarray:
    """Records ``start .. start + n`` as rows ``(n, record_size)`` of uint8 (``start`` a multiple of
    :data:`CHUNK`, or within one chunk: the random stream is keyed by chunk)."""
    out = np.empty((n, record_size), np.uint8)
    done = 0
    while done < n:
        c, off = divmod(start + done, CHUNK)
        m = min(n - done, CHUNK - off)
        rng = _rng(seed, c)
        keys = (
            rng.integers(32, 127, (CHUNK, key_size), dtype=np.uint8)
            if ascii
            else rng.integers(0, 256, (CHUNK, key_size), dtype=np.uint8)
        )
        keys = keys[off : off + m]
        if skew:
            # a few hot prefixes: the first bytes from a Zipf-like distribution over 64 values
            hot = np.minimum(rng.zipf(1.5, CHUNK)[off : off + m] - 1, 63).astype(np.uint8)
            keys[:, 0] = hot + (32 if ascii else 0)
            keys[:, 1 : min(4, key_size)] = 32 if ascii else 0
        part = out[done : done + m]
        part[:, :key_size] = keys
        payload = record_size - key_size
        if payload:
            idx = np.arange(start + done, start + done + m, dtype=np.uint64)
            digits = np.frombuffer(b"0123456789ABCDEF", np.uint8)
            hexd = digits[(idx[:, None] >> np.arange(60, -4, -4, dtype=np.uint64)) & np.uint64(15)]
            body = np.resize(np.arange(0x20, 0x7F, dtype=np.uint8), payload)
            part[:, key_size:] = body
            part[:, key_size : key_size + min(16, payload)] = hexd[:, : min(16, payload)]
            if payload >= 18:
                part[:, -2:] = (13, 10)
        done += m
    return out


def records(
    n: int,
    path,
    *,
    seed: int = 0,
    record_size: int = 100,
    key_size: int = 10,
    skew: bool = False,
    ascii: bool = False,
) -> Path:
    """Write ``n`` records to ``path`` (through a temporary name, renamed when complete)."""
    from ._output import remove_leftovers, temporary_name

    path = Path(path)
    remove_leftovers(path.parent, path.name)
    tmp = temporary_name(path)
    try:
        with open(tmp, "wb") as f:
            for s in range(0, n, CHUNK):
                f.write(
                    record_chunk(
                        s,
                        min(CHUNK, n - s),
                        seed=seed,
                        record_size=record_size,
                        key_size=key_size,
                        skew=skew,
                        ascii=ascii,
                    ).data
                )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def array_chunk(
    start: int, n: int, *, seed: int, dtype="int64", nan_fraction: float = 0.0
) -> np.ndarray:
    """Elements ``start .. start + n`` of a random array: integers over the dtype's whole range,
    floats normal (with NaNs at ``nan_fraction``), booleans fair."""
    dtype = np.dtype(dtype)
    out = np.empty(n, dtype)
    done = 0
    while done < n:
        c, off = divmod(start + done, CHUNK)
        m = min(n - done, CHUNK - off)
        rng = _rng(seed, c)
        if dtype.kind == "b":
            x = rng.integers(0, 2, CHUNK).astype(bool)
        elif dtype.kind in "iu":
            info = np.iinfo(dtype)
            x = rng.integers(info.min, info.max, CHUNK, dtype=dtype, endpoint=True)
        elif dtype.kind == "f":
            x = rng.standard_normal(CHUNK).astype(dtype)
            if nan_fraction:
                x[rng.random(CHUNK) < nan_fraction] = np.nan
        else:
            raise ValueError(f"cannot generate dtype {dtype}")
        out[done : done + m] = x[off : off + m]
        done += m
    return out


# the dtypes of .npy files that gen makes (and dsort sorts): NumPy's bools, integers and floats
NPY_DTYPES = (
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
    "float64",
)  # fmt: skip


def npy(n: int, path, *, dtype="int64", seed: int = 0, nan_fraction: float = 0.0) -> Path:
    """Write a 1-D ``.npy`` of ``n`` random elements (through a temporary name)."""
    from .npy import create
    from ._blocks import write_at

    from ._output import remove_leftovers, temporary_name

    path = Path(path)
    remove_leftovers(path.parent, path.name)
    tmp = temporary_name(path)
    try:
        start = create(tmp, dtype, n)
        size = np.dtype(dtype).itemsize
        for s in range(0, n, CHUNK):
            write_at(
                str(tmp),
                start + s * size,
                array_chunk(
                    s, min(CHUNK, n - s), seed=seed, dtype=dtype, nan_fraction=nan_fraction
                ),
            )
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path
