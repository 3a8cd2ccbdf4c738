"""dsort.io._blocks: rows read from byte ranges of files (memory maps, copied out), dask arrays over
several files in bounded blocks, chunks written back at their offsets, files allocated whole.
The reference is NumPy reading the same bytes (``np.fromfile``) and slicing them."""

import errno
import os
import pickle

import numpy as np
import pytest

from dsort.io import InputError
from dsort.io._blocks import allocate, file_array, read_rows, write_at

SHAPES = [((), "int64"), ((), "float32"), ((), "bool"), ((7,), "uint8"), ((2, 3), "int16")]


def _write(path, rng, rows, row_shape, dtype, header=b""):
    data = rng.integers(0, 256, rows * int(np.prod(row_shape, dtype=np.int64)) * np.dtype(dtype).itemsize, dtype=np.uint8)
    if np.dtype(dtype) == bool:
        data &= 1
    path.write_bytes(header + data.tobytes())
    return data.view(dtype).reshape(rows, *row_shape)


@pytest.mark.parametrize("row_shape, dtype", SHAPES)
def test_read_rows_is_the_byte_range(tmp_path, rng, row_shape, dtype):
    n = int(rng.integers(1, 300))
    header = bytes(int(rng.integers(0, 40)))
    data = _write(tmp_path / "f", rng, n, row_shape, dtype, header)
    row_bytes = data[:1].nbytes
    for start, rows in [(0, n), (0, 0), (n, 0), (n - 1, 1), *((int(s), int(rng.integers(0, n - s + 1))) for s in rng.integers(0, n, 5))]:
        got = read_rows(str(tmp_path / "f"), len(header) + start * row_bytes, rows, row_shape, dtype)
        assert got.dtype == np.dtype(dtype) and got.shape == (rows, *row_shape)
        np.testing.assert_array_equal(got, data[start : start + rows])
        # a copy that owns its memory: writable, pickles as data, independent of the file
        assert got.flags.owndata and got.flags.writeable and not isinstance(got, np.memmap)
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(got)), data[start : start + rows])


def _chunks(lengths, rows_per_block):
    """The blocks' sizes as an independent count: whole blocks of each file, then its remainder."""
    out = []
    for n in lengths:
        out += [rows_per_block] * (n // rows_per_block) + ([n % rows_per_block] if n % rows_per_block else [])
    return tuple(out)


@pytest.mark.parametrize("row_shape, dtype", SHAPES)
@pytest.mark.parametrize("lengths", [[], [0], [0, 0], [1], [5, 0, 3], "random"])
def test_file_array_is_the_files_concatenated(tmp_path, rng, row_shape, dtype, lengths):
    if lengths == "random":
        lengths = [int(v) for v in rng.integers(0, 200, int(rng.integers(1, 5)))]
    offsets = [int(v) for v in rng.integers(0, 64, len(lengths))]
    files, parts = [], []
    for i, (n, off) in enumerate(zip(lengths, offsets)):
        files.append(tmp_path / f"f{i}")
        parts.append(_write(files[-1], rng, n, row_shape, dtype, bytes(off)))
    for rows_per_block in (1, 3, 64, 10**6):
        x = file_array(files, offsets, lengths, row_shape, dtype, rows_per_block)
        assert x.dtype == np.dtype(dtype) and x.shape == (sum(lengths), *row_shape)
        assert x.chunks[0] == (_chunks(lengths, rows_per_block) or (0,))
        want = np.concatenate(parts) if parts else np.empty((0, *row_shape), dtype)
        got = x.compute(scheduler="sync")
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_file_array_names_change_with_the_files(tmp_path, rng):
    """Its tasks are named from the files, their modification times and the layout: a rewritten
    file is a new array, never a cached old one."""
    data = _write(tmp_path / "f", rng, 100, (), "int32")
    a = file_array([tmp_path / "f"], [0], [100], (), "int32", 10)
    assert a.name == file_array([tmp_path / "f"], [0], [100], (), "int32", 10).name
    assert a.name != file_array([tmp_path / "f"], [0], [100], (), "int32", 20).name
    assert a.name != file_array([tmp_path / "f"], [0], [100], (), "uint32", 10).name
    os.utime(tmp_path / "f", ns=(0, os.stat(tmp_path / "f").st_mtime_ns + 10**9))
    assert a.name != file_array([tmp_path / "f"], [0], [100], (), "int32", 10).name
    assert a.name.startswith("dsort-read-")
    np.testing.assert_array_equal(a.compute(scheduler="sync"), data)


def test_write_at_fills_disjoint_ranges(tmp_path, rng):
    """Random pieces written in random order at their offsets make the whole, bytes for bytes;
    what is not written stays as it was."""
    n = int(rng.integers(50, 2000))
    whole = rng.integers(-(2**62), 2**62, (n, 3))
    path = tmp_path / "out"
    allocate(path, whole.nbytes + 16)
    cuts = np.unique(np.concatenate([[0, n], rng.integers(0, n + 1, 8)]))
    pieces = list(zip(cuts[:-1], cuts[1:]))
    for i in rng.permutation(len(pieces)):
        s, e = pieces[i]
        write_at(path, 8 + int(s) * whole[0].nbytes, whole[s:e])
    write_at(path, 8, whole[:0])  # nothing: changes nothing
    raw = path.read_bytes()
    assert len(raw) == whole.nbytes + 16 and raw[:8] == bytes(8) and raw[-8:] == bytes(8)
    np.testing.assert_array_equal(np.frombuffer(raw[8:-8], np.int64).reshape(n, 3), whole)
    write_at(path, 8, whole[::-2])  # strided input: written as its elements, in order
    np.testing.assert_array_equal(np.frombuffer(path.read_bytes()[8 : 8 + whole[::-2].nbytes], np.int64).reshape(-1, 3), whole[::-2])


def test_write_at_needs_an_existing_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_at(tmp_path / "missing", 0, np.arange(3))


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 4097, 3 << 20])
def test_allocate_makes_a_file_of_the_size(tmp_path, size):
    path = tmp_path / "new"
    allocate(path, size)
    assert path.stat().st_size == size and path.read_bytes() == bytes(size)
    grown = tmp_path / "grown"  # an existing file (a .npy header, say) keeps its bytes and grows
    grown.write_bytes(b"head")
    allocate(grown, size + 4)
    assert grown.read_bytes() == b"head" + bytes(size)


def test_allocate_falls_back_to_a_sparse_file_and_reports_a_full_disk(tmp_path, monkeypatch):
    def unsupported(fd, offset, length):
        raise OSError(errno.EOPNOTSUPP, "not supported")

    monkeypatch.setattr(os, "posix_fallocate", unsupported)
    allocate(tmp_path / "sparse", 12345)
    assert (tmp_path / "sparse").stat().st_size == 12345

    def full(fd, offset, length):
        raise OSError(errno.ENOSPC, "no space")

    monkeypatch.setattr(os, "posix_fallocate", full)
    with pytest.raises(InputError, match=f"no space for OUTPUT: 12,345 bytes needed in {tmp_path}"):
        allocate(tmp_path / "full", 12345)
