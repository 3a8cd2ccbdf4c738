"""dsort.engine.crc: the CPU's record checksum, both its paths, against zlib.crc32 of every record."""

import zlib

import numpy as np
import pytest

from dsort.engine import crc


@pytest.fixture
def compiled():
    """The compiled loop loaded, so that inputs over SMALL_BYTES take it (else up to LOAD_BYTES
    take the zlib loop)."""
    crc.warm()
    assert crc.loaded()


def _zlib(rows):
    return np.array([zlib.crc32(r.tobytes()) for r in rows], np.uint32).reshape(len(rows))


def test_random_widths_on_both_paths(rng, compiled):
    for width in [*range(1, 18), *rng.integers(18, 301, 12)]:
        for n in (1, 2, 3, 4, 5, 7, 8, 9, int(rng.integers(10, 40)), crc.SMALL_BYTES // width + int(rng.integers(1, 9))):
            rows = rng.integers(0, 256, (n, width), dtype=np.uint8)
            np.testing.assert_array_equal(crc.crc32_rows(rows), _zlib(rows), err_msg=f"{n} x {width}")


@pytest.mark.parametrize("n", [0, 1, 4, 4099])
def test_edge_shapes(rng, n, compiled):
    for width in (0, 1, 100):
        rows = rng.integers(0, 256, (n, width), dtype=np.uint8)
        got = crc.crc32_rows(rows)
        assert got.dtype == np.uint32 and got.shape == (n,)
        np.testing.assert_array_equal(got, _zlib(rows))


def test_compiled_path_on_rows_that_are_views(rng, compiled):
    """Non-contiguous rows (every other record, a column range) and constant bytes."""
    base = rng.integers(0, 256, (40000, 120), dtype=np.uint8)
    for rows in (base[::2, 3:103], base[:, :100][::-1], np.zeros((5000, 100), np.uint8), np.full((5000, 33), 255, np.uint8)):
        assert rows.size > crc.SMALL_BYTES
        np.testing.assert_array_equal(crc.crc32_rows(rows), _zlib(rows))


def test_tables_are_zlibs():
    """T[k][b]: the CRC register after byte b then k zero bytes, from a zero register (zlib.crc32 with
    start 0xFFFFFFFF begins from a zero register; its result is the register inverted)."""
    t = crc.tables()
    for b in (0, 1, 0x80, 255):
        for k in range(4):
            assert zlib.crc32(bytes([b]) + bytes(k), 0xFFFFFFFF) ^ 0xFFFFFFFF == t[k][b]


def test_the_loop_is_not_loaded_for_what_the_zlib_loop_does_faster(rng, monkeypatch):
    """Not loaded: inputs up to LOAD_BYTES take the byte tables (loading costs more); larger ones load it."""
    import dsort.engine._crc_jit as jit

    calls = []
    real = jit.crc32_rows_into
    monkeypatch.setattr(jit, "crc32_rows_into", lambda *a: calls.append(a[0].size) or real(*a))
    monkeypatch.setattr(crc, "LOAD_BYTES", 1 << 20)
    monkeypatch.setattr(crc, "loaded", lambda: False)
    mid = rng.integers(0, 256, ((1 << 20) // 100, 100), dtype=np.uint8)
    np.testing.assert_array_equal(crc.crc32_rows(mid), _zlib(mid))
    assert calls == []
    big = rng.integers(0, 256, ((1 << 20) // 100 + 1, 100), dtype=np.uint8)
    np.testing.assert_array_equal(crc.crc32_rows(big), _zlib(big))
    assert calls == [big.size]


def test_byte_tables_path_against_zlib(rng, monkeypatch):
    """The byte tables (no compiled loop): random widths 1-300, no records, one record, blocks of
    TABLE_BLOCK records and a part of one, rows that are views; as crc32_rows takes them while the
    loop is not loaded; and the affine identity they rest on, for every width tried."""
    monkeypatch.setattr(crc, "loaded", lambda: False)
    monkeypatch.setattr(crc, "SMALL_BYTES", 0)  # every input past zlib's loop
    for width in [1, 2, 3, 4, 5, 99, 100, 300, *rng.integers(1, 301, 6)]:
        for n in (0, 1, 3, crc.TABLE_BLOCK, crc.TABLE_BLOCK + int(rng.integers(1, 50))):
            rows = rng.integers(0, 256, (n, int(width)), dtype=np.uint8)
            got = crc.crc32_rows(rows)
            assert got.dtype == np.uint32 and got.shape == (n,)
            np.testing.assert_array_equal(got, _zlib(rows), err_msg=f"{n} x {width}")
    base = rng.integers(0, 256, (3000, 120), dtype=np.uint8)
    np.testing.assert_array_equal(crc.crc32_rows(base[::3, 7:107]), _zlib(base[::3, 7:107]))
    assert crc.crc32_rows(np.zeros((4, 0), np.uint8)).tolist() == [0] * 4
    b = crc.byte_tables(5)
    r = bytes([9, 0, 200, 1, 77])
    assert zlib.crc32(r) == zlib.crc32(bytes(5)) ^ int(np.bitwise_xor.reduce([b[j][r[j]] for j in range(5)]))
