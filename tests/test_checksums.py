"""dsort.core.checksums: valsort's checksums of file ranges, and the process that sums them apart
from a CPU sort, against zlib.crc32 of every record."""

import os

import numpy as np
import pytest

from dsort.core import checksums
from dsort.engine import crc

from .test_crc import _zlib


@pytest.mark.parametrize("width", [1, 7, 100, 257])
def test_range_sums_of_a_file_are_valsorts(tmp_path, rng, monkeypatch, width):
    """valsort's checksum of ranges of a file (the sum of each record's zlib CRC-32): empty, one
    record, ranges read in several pieces, unaligned offsets; by the checksum process and here."""
    monkeypatch.setattr(checksums, "PIECE_BYTES", 1000)  # several pieces a range
    data = rng.integers(0, 256, (3000, width), dtype=np.uint8)
    path = tmp_path / "f.bin"
    path.write_bytes(b"xyz" + data.tobytes())
    ranges = [(0, 0), (0, 1), (5, 1), (0, 3000), (17, 2000), (2999, 1)]
    items = [(str(path), 3 + a * width, n, width) for a, n in ranges]
    want = [int(_zlib(data[a : a + n]).astype(np.uint64).sum()) for a, n in ranges]
    assert checksums.range_sums(items, 3) == want
    assert checksums.range_sums([], 3) == []
    checksums.start_apart()
    assert checksums.sums_apart(items, 2) == want  # the process keeps its own PIECE_BYTES: whole ranges at once


def _file_and_sums(path, rng, n=500, width=100):
    data = rng.integers(0, 256, (n, width), dtype=np.uint8)
    path.write_bytes(data.tobytes())
    return [(str(path), 0, n, width)], [int(_zlib(data).astype(np.uint64).sum())]


def test_a_checksum_process_gone_leaves_the_sums_to_this_one(tmp_path, rng):
    """The checksum process ended (killed, say): the sums are made here, the same; a file that
    cannot be read is an error that names it, wherever it is summed; a later start makes a new one."""
    items, want = _file_and_sums(tmp_path / "f.bin", rng)
    checksums.start_apart()
    helper = checksums._helper()
    assert helper is not None
    helper.proc.kill()
    helper.proc.wait()
    assert checksums.sums_apart(items, 2) == want
    assert checksums._helper() is None  # found broken, not asked again
    with pytest.raises(OSError, match="gone.bin"):
        checksums.sums_apart([(str(tmp_path / "gone.bin"), 0, 5, 100)], 2)
    checksums.start_apart()
    assert checksums._helper() is not None and checksums._helper() is not helper and checksums.sums_apart(items, 2) == want


def test_an_interrupted_wait_ends_the_checksum_process_never_a_late_answer(tmp_path, rng, monkeypatch):
    """Ctrl-C while waiting for an answer (a notebook): the helper is ended, so its answer to that
    request can never be taken for a later one's; the later sums are right."""
    a, want_a = _file_and_sums(tmp_path / "a.bin", rng, 300)
    b, want_b = _file_and_sums(tmp_path / "b.bin", rng, 700)
    checksums.start_apart()
    helper = checksums._helper()
    real = checksums._receive

    def interrupted(stream, proc=None):
        monkeypatch.setattr(checksums, "_receive", real)
        raise KeyboardInterrupt

    monkeypatch.setattr(checksums, "_receive", interrupted)
    with pytest.raises(KeyboardInterrupt):
        checksums.sums_apart(a + a, 2)
    assert helper.broken and helper.proc.poll() is not None
    assert checksums.sums_apart(b, 2) == want_b
    checksums.start_apart()
    assert checksums.sums_apart(b + a, 2) == want_b + want_a


def test_the_checksum_process_reads_what_this_process_means(tmp_path, rng, monkeypatch):
    """Relative paths are this process's (the helper keeps its own directory); the helper runs this
    dsort, not a ``dsort`` of the directory it was started from; a line that a start-up hook prints
    is not taken for an answer."""
    checksums.stop_apart()
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "dsort" / "core").mkdir(parents=True)
    for d in ("dsort", "dsort/core"):
        (elsewhere / d / "__init__.py").write_text("")
    (elsewhere / "dsort" / "core" / "checksums.py").write_text("def _serve(fd):\n    raise SystemExit(3)\n")
    hooks = tmp_path / "hooks"
    hooks.mkdir()
    (hooks / "sitecustomize.py").write_text("print('a start-up hook says hello')\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(x for x in (str(hooks), os.environ.get("PYTHONPATH")) if x))
    monkeypatch.chdir(elsewhere)
    checksums.start_apart()
    helper = checksums._helper()
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    items, want = _file_and_sums(here / "f.bin", rng)
    monkeypatch.setattr(checksums, "range_sums", None)  # no summing here: the helper's answer or an error
    assert checksums.sums_apart([("f.bin", *items[0][1:])], 2) == want
    assert checksums._helper() is helper and helper.proc.poll() is None  # answered by the helper itself
    checksums.stop_apart()


def test_a_forked_child_never_shares_the_parents_checksum_process(tmp_path, rng):
    import multiprocessing

    items, want = _file_and_sums(tmp_path / "f.bin", rng)
    checksums.start_apart()
    parent = checksums._helper()
    pool = multiprocessing.get_context("fork").Pool(2)
    try:
        got = pool.starmap_async(checksums.sums_apart, [(items * k, 2) for k in (1, 2, 3, 4)]).get(timeout=120)
    finally:  # the workers end on their own: a SIGTERM (the pool's terminate) once left one waiting forever on a CI run
        pool.close()
        pool.join()
    assert got == [want * k for k in (1, 2, 3, 4)]
    assert checksums._helper() is parent and checksums.sums_apart(items * 3, 2) == want * 3


def test_a_large_input_is_summed_apart_and_a_smaller_one_by_tables():
    per_thread = checksums.APART_BYTES_PER_THREAD
    assert not checksums.worth_apart(crc.LOAD_BYTES, 1) and not checksums.worth_apart(16 * per_thread, 16)
    assert checksums.worth_apart(16 * per_thread + 1, 16) and checksums.worth_apart(per_thread + 1, 0)
