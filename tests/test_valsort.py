"""dsort.valsort: checksums, order and duplicates of chunks, and their combination, against zlib,
memcmp and pandas' stable sort."""

import zlib

import numpy as np
import pandas as pd
import pytest

from dsort import valsort


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
