"""dsort.core.valsort: checksums, order and duplicates of chunks, and their combination, against zlib,
memcmp and pandas' stable sort."""

import zlib

import numpy as np
import pandas as pd
import pytest

from dsort.core import valsort

from .conftest import HAS_GPU


@pytest.mark.parametrize("width", [1, 2, 3, 10, 99, 100])
def test_crc32_rows_equals_zlib(rng, width):
    rows = rng.integers(0, 256, (3000, width), dtype=np.uint8)
    expected = np.array([zlib.crc32(r.tobytes()) for r in rows], np.uint32)
    np.testing.assert_array_equal(valsort.crc32_rows(rows), expected)
    assert valsort.crc32_rows(rows[:0]).shape == (0,)


def _chunked(x, rng):
    cuts = np.sort(rng.integers(0, len(x) + 1, 6))
    return np.split(x, cuts)


@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kind", ["bytes", "float", "int"])
def test_summaries_combine_like_the_whole(rng, kind, descending):
    n = 2000
    if kind == "bytes":
        keys = rng.integers(0, 3, (n, 2), dtype=np.uint8)
        order = np.argsort(np.ascontiguousarray(keys).view("S2").ravel(), kind="stable")
    elif kind == "float":
        keys = rng.integers(-3, 3, n).astype(np.float64)
        keys[rng.random(n) < 0.1] = np.nan
        order = np.argsort(keys, kind="stable")
    else:
        keys = rng.integers(-5, 5, n)
        order = np.argsort(keys, kind="stable")
    if descending:
        order = (
            pd.Series(list(map(bytes, keys)) if kind == "bytes" else keys)
            .sort_values(ascending=False, kind="stable", na_position="last")
            .index.to_numpy()
        )
    sorted_keys = keys[order]
    for data, is_sorted in [(sorted_keys, True), (keys, False)]:
        whole = valsort.summarize(data, descending=descending)
        parts = valsort.combine([valsort.summarize(c, descending=descending) for c in _chunked(data, rng)], descending=descending)
        assert (parts.records, parts.checksum, parts.unordered, parts.duplicates, parts.first_unordered) == (
            whole.records,
            whole.checksum,
            whole.unordered,
            whole.duplicates,
            whole.first_unordered,
        )
        assert whole.sorted == is_sorted
    # duplicates in a sorted sequence: records minus distinct keys (NaNs are one key)
    distinct = len(np.unique(sorted_keys, axis=0)) if kind == "bytes" else pd.Series(sorted_keys).nunique(dropna=False)
    assert valsort.summarize(sorted_keys, descending=descending).duplicates == n - distinct
    crc = sum(zlib.crc32(np.ascontiguousarray(k).tobytes()) for k in keys)
    assert valsort.summarize(keys).checksum == crc


@pytest.mark.parametrize("width", [1, 7, 8, 9, 10, 16, 23])
def test_byte_keys_as_words_order_like_memcmp(rng, width):
    """The GPU's order check of byte keys (eight bytes at a time) agrees with memcmp."""
    a = rng.integers(0, 3, (5000, width), dtype=np.uint8)
    b = rng.integers(0, 3, (5000, width), dtype=np.uint8)
    wrong, equal = np.zeros(len(a), bool), np.ones(len(a), bool)
    for wa, wb in zip(valsort._words(a), valsort._words(b)):
        wrong |= equal & (wb < wa)
        equal &= wa == wb
    expected = [(bytes(y) < bytes(x), bytes(x) == bytes(y)) for x, y in zip(a, b)]
    assert wrong.tolist() == [e[0] for e in expected] and equal.tolist() == [e[1] for e in expected]


# -- the GPU's check kernels (kernels/kernel_check.cu) against the NumPy path and zlib -----------

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float32", "float64"]


def _keys(rng, dtype, n, case):
    if case == "random":
        x = rng.integers(0, 5, n) if dtype == "bool" else rng.integers(-6, 7, n)
        x = x.astype(dtype) if dtype != "bool" else x.astype(bool)
    else:
        x = np.zeros(n, dtype)
    if np.dtype(dtype).kind == "f" and n:
        x[rng.random(n) < 0.2] = np.nan
        x[rng.random(n) < 0.05] = np.inf
        x[rng.random(n) < 0.05] = -np.inf
    if case == "sorted":
        x = np.sort(rng.integers(0, 3, n)).astype(dtype)
    elif case == "reverse":
        x = np.sort(rng.integers(0, 3, n))[::-1].astype(dtype)
    return x


def _fields(s):
    return (s.records, s.checksum, s.unordered, s.duplicates, s.first_unordered, s.bytes)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("case", ["random", "equal", "sorted", "reverse"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 2, 255, 257, 100_003])
def test_gpu_summary_of_numbers_equals_numpys(rng, dtype, n, case, descending):
    import cupy

    x = _keys(rng, dtype, n, case)
    want = valsort.summarize(x, descending=descending)
    got = valsort.summarize(cupy.asarray(x), descending=descending)
    assert _fields(got) == _fields(want)
    strided = cupy.asarray(np.repeat(x, 3))[::3]  # a view: element stride 3
    assert _fields(valsort.summarize(strided, rows=valsort.as_rows(cupy.asarray(x)), descending=descending)) == _fields(want)


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("width,key_size", [(1, 1), (3, 2), (10, 10), (100, 10), (101, 17), (300, 300)])
@pytest.mark.parametrize("n", [0, 1, 2, 1000, 65_537])
def test_gpu_summary_of_records_equals_numpys_and_zlib(rng, width, key_size, n, descending):
    import cupy

    rows = rng.integers(0, 3, (n, width), dtype=np.uint8)
    for data in (rows, rows[np.lexsort(rows[:, :key_size].T[::-1])]):
        want = valsort.summarize(data[:, :key_size], data, descending=descending)
        d = cupy.asarray(data)
        got = valsort.summarize(d[:, :key_size], d, descending=descending)  # keys: a strided view of the records
        assert _fields(got) == _fields(want)
        assert valsort.checksum(d) == sum(zlib.crc32(r.tobytes()) for r in data) == want.checksum
