"""dsort.engine.crc: the CPU's record checksum, both its paths, against zlib.crc32 of every record."""

import os
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


@pytest.mark.parametrize("width", [1, 7, 100, 257])
def test_range_sums_of_a_file_are_valsorts(tmp_path, rng, monkeypatch, width):
    """valsort's checksum of ranges of a file (the sum of each record's zlib CRC-32): empty, one
    record, ranges read in several pieces, unaligned offsets; by the checksum process and here."""
    monkeypatch.setattr(crc, "PIECE_BYTES", 1000)  # several pieces a range
    data = rng.integers(0, 256, (3000, width), dtype=np.uint8)
    path = tmp_path / "f.bin"
    path.write_bytes(b"xyz" + data.tobytes())
    ranges = [(0, 0), (0, 1), (5, 1), (0, 3000), (17, 2000), (2999, 1)]
    items = [(str(path), 3 + a * width, n, width) for a, n in ranges]
    want = [int(_zlib(data[a : a + n]).astype(np.uint64).sum()) for a, n in ranges]
    assert crc.range_sums(items, 3) == want
    assert crc.range_sums([], 3) == []
    crc.start_apart()
    assert crc.sums_apart(items, 2) == want  # the process keeps its own PIECE_BYTES: whole ranges at once


def _file_and_sums(path, rng, n=500, width=100):
    data = rng.integers(0, 256, (n, width), dtype=np.uint8)
    path.write_bytes(data.tobytes())
    return [(str(path), 0, n, width)], [int(_zlib(data).astype(np.uint64).sum())]


def test_a_checksum_process_gone_leaves_the_sums_to_this_one(tmp_path, rng):
    """The checksum process ended (killed, say): the sums are made here, the same; a file that
    cannot be read is an error that names it, wherever it is summed; a later start makes a new one."""
    items, want = _file_and_sums(tmp_path / "f.bin", rng)
    crc.start_apart()
    helper = crc._helper()
    assert helper is not None
    helper.proc.kill()
    helper.proc.wait()
    assert crc.sums_apart(items, 2) == want
    assert crc._helper() is None  # found broken, not asked again
    with pytest.raises(OSError, match="gone.bin"):
        crc.sums_apart([(str(tmp_path / "gone.bin"), 0, 5, 100)], 2)
    crc.start_apart()
    assert crc._helper() is not None and crc._helper() is not helper and crc.sums_apart(items, 2) == want


def test_an_interrupted_wait_ends_the_checksum_process_never_a_late_answer(tmp_path, rng, monkeypatch):
    """Ctrl-C while waiting for an answer (a notebook): the helper is ended, so its answer to that
    request can never be taken for a later one's; the later sums are right."""
    a, want_a = _file_and_sums(tmp_path / "a.bin", rng, 300)
    b, want_b = _file_and_sums(tmp_path / "b.bin", rng, 700)
    crc.start_apart()
    helper = crc._helper()
    real = crc._receive

    def interrupted(stream, proc=None):
        monkeypatch.setattr(crc, "_receive", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(crc, "_receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        crc.sums_apart(a + a, 2)
    assert helper.broken and helper.proc.poll() is not None
    assert crc.sums_apart(b, 2) == want_b
    crc.start_apart()
    assert crc.sums_apart(b + a, 2) == want_b + want_a


def test_the_checksum_process_reads_what_this_process_means(tmp_path, rng, monkeypatch):
    """Relative paths are this process's (the helper keeps its own directory); the helper runs this
    dsort, not a ``dsort`` of the directory it was started from; a line that a start-up hook prints
    is not taken for an answer."""
    crc.stop_apart()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "dsort" / "engine").mkdir(parents=True)
    for d in ("dsort", "dsort/engine"):
        (elsewhere / d / "__init__.py").write_text("")
    (elsewhere / "dsort" / "engine" / "crc.py").write_text("def _serve(fd):\n    raise SystemExit(3)\n")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text("print('a start-up hook says hello')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(x for x in (str(hooks), os.environ.get("PYTHONPATH")) if x))
    monkeypatch.chdir(elsewhere)
    crc.start_apart()
    helper = crc._helper()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    items, want = _file_and_sums(here / "f.bin", rng)
    monkeypatch.setattr(crc, "range_sums", None)  # no summing here: the helper's answer or an error
    assert crc.sums_apart([("f.bin", *items[0][1:])], 2) == want
    assert crc._helper() is helper and helper.proc.poll() is None  # answered by the helper itself
    crc.stop_apart()


def test_a_forked_child_never_shares_the_parents_checksum_process(tmp_path, rng):
    import multiprocessing

    items, want = _file_and_sums(tmp_path / "f.bin", rng)
    crc.start_apart()
    parent = crc._helper()
    with multiprocessing.get_context("fork").Pool(2) as pool:
        got = pool.starmap(crc.sums_apart, [(items * k, 2) for k in (1, 2, 3, 4)])
    assert got == [want * k for k in (1, 2, 3, 4)]
    assert crc._helper() is parent and crc.sums_apart(items * 3, 2) == want * 3
