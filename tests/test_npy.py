"""dsort.io.npy: 1-D ``.npy`` files, their headers checked, read in bounded blocks, created for
output, and checked block by block; NumPy's own ``np.load``/``np.save`` and a plain Python count
(``summary_reference``) are the references."""

import numpy as np
import pytest

from dsort.io import InputError
from dsort.io import npy as npyio
from dsort.io._blocks import write_at

from .reference import CASES, FLOAT_DTYPES, INT_DTYPES, argsort, make_keys
from .summary_reference import combined, expected

NPY_DTYPES = ["bool", *INT_DTYPES, *FLOAT_DTYPES]


def test_npy_headers_are_checked(tmp_path):
    np.save(tmp_path / "two.npy", np.zeros((2, 2)))
    np.save(tmp_path / "half.npy", np.zeros(3, np.float16))
    np.save(tmp_path / "text.npy", np.array([b"a", b"b"]))
    np.save(tmp_path / "big.npy", np.arange(3, dtype=">i8"))
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    for name, msg in [
        ("two", "1-D"),
        ("half", "unsupported dtype float16"),
        ("text", "unsupported dtype"),
        ("big", "byte order"),
        ("junk", "not a readable .npy"),
    ]:
        with pytest.raises(InputError, match=msg):
            npyio.header(tmp_path / f"{name}.npy")
    np.save(tmp_path / "a.npy", np.arange(3, dtype=np.int32))
    np.save(tmp_path / "b.npy", np.arange(3, dtype=np.int64))
    with pytest.raises(InputError, match="different dtypes"):
        npyio.inspect([tmp_path / "a.npy", tmp_path / "b.npy"])


@pytest.mark.parametrize("dtype", NPY_DTYPES)
@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_header_locates_the_data(tmp_path, rng, dtype, version):
    """The data of every length, as NumPy wrote it, lies at the offset the header gives."""
    for n in (0, 1, int(rng.integers(2, 1000))):
        x = make_keys(dtype, "random", n, rng)
        path = tmp_path / f"x{n}.npy"
        with open(path, "wb") as f:
            np.lib.format.write_array(f, x, version=version)
        got_dtype, length, offset = npyio.header(path)
        raw = path.read_bytes()
        assert (got_dtype, length) == (x.dtype, n) and len(raw) == offset + x.nbytes
        assert raw[offset:] == x.tobytes()


def test_one_byte_dtypes_of_either_byte_order_are_accepted(tmp_path):
    for dtype in ("|u1", "|i1", "|b1"):
        np.save(tmp_path / "x.npy", np.zeros(4, dtype))
        assert npyio.header(tmp_path / "x.npy")[:2] == (np.dtype(dtype), 4)
    for dtype in (">f8", ">u4", "c16", "O", "M8[s]"):
        np.save(tmp_path / "x.npy", np.zeros(4, dtype), allow_pickle=True)
        with pytest.raises(InputError):
            npyio.header(tmp_path / "x.npy")


def test_a_truncated_npy_file_says_so(tmp_path, rng):
    n = int(rng.integers(2, 100))
    np.save(tmp_path / "x.npy", rng.integers(0, 9, n))
    raw = (tmp_path / "x.npy").read_bytes()
    (tmp_path / "x.npy").write_bytes(raw[: len(raw) - int(rng.integers(1, 8 * n))])
    with pytest.raises(InputError, match="truncated .npy file"):
        npyio.header(tmp_path / "x.npy")


def test_inspect_gives_every_files_length_and_offset(tmp_path, rng):
    dtype = str(rng.choice(NPY_DTYPES))
    lens = [0, 1, *(int(v) for v in rng.integers(0, 500, 3))]
    files = []
    for i, n in enumerate(lens):
        files.append(tmp_path / f"f{i}.npy")
        with open(files[-1], "wb") as f:  # headers of two versions: two different offsets
            np.lib.format.write_array(f, make_keys(dtype, "random", n, rng), version=(1, 0) if i % 2 else (2, 0))
    got_dtype, got_lens, offsets = npyio.inspect(files)
    assert got_dtype == np.dtype(dtype) and got_lens == lens
    for f, n, off in zip(files, lens, offsets):
        assert f.stat().st_size == off + n * np.dtype(dtype).itemsize
    assert npyio.inspect([]) == (np.dtype(np.float64), [], [])


@pytest.mark.parametrize("dtype", NPY_DTYPES)
def test_read_is_the_arrays_concatenated(tmp_path, rng, dtype):
    parts = [make_keys(dtype, "random", int(n), rng) for n in [0, *rng.integers(0, 700, 3)]]
    files = []
    for i, p in enumerate(parts):
        files.append(tmp_path / f"f{i}.npy")
        np.save(files[-1], p)
    for rows_per_block in (1, int(rng.integers(2, 300)), 10**6):
        x = npyio.read(files, rows_per_block)
        assert max(x.chunks[0]) <= rows_per_block
        got = x.compute(scheduler="sync")
        want = np.concatenate(parts)
        assert got.dtype == want.dtype and got.tobytes() == want.tobytes()  # NaN payloads and -0.0 too


@pytest.mark.parametrize("dtype", NPY_DTYPES)
def test_create_then_write_is_what_numpy_loads(tmp_path, rng, dtype):
    for n in (0, 1, int(rng.integers(2, 5000))):
        x = make_keys(dtype, "special" if dtype != "bool" else "random", n, rng)
        path = tmp_path / f"out{n}.npy"
        offset = npyio.create(path, x.dtype, n)
        assert path.stat().st_size == offset + x.nbytes
        cut = int(rng.integers(0, n + 1))
        write_at(path, offset + x[:cut].nbytes, x[cut:])
        write_at(path, offset, x[:cut])
        y = np.load(path)
        assert y.dtype == x.dtype and y.tobytes() == x.tobytes()
        assert npyio.header(path) == (x.dtype, n, offset)


def _py(v):
    return float(v) if isinstance(v, np.floating) else int(v)


@pytest.mark.parametrize("dtype", ["bool", "int8", "uint16", "int64", "uint64", "float32", "float64"])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("descending", [False, True])
def test_check_tasks_count_like_python(tmp_path, rng, dtype, case, descending):
    n = int(rng.integers(0, 2500))
    x = make_keys(dtype, case, n, rng)
    if case == "random" and n:  # also a sorted run in the checked order, with ties and NaN
        x = np.concatenate([x, x[argsort(x, descending)]])
    cut = int(rng.integers(0, len(x) + 1))
    np.save(tmp_path / "a.npy", x[:cut])
    np.save(tmp_path / "b.npy", x[cut:])
    want = expected([_py(v) for v in x], [x[i : i + 1].tobytes() for i in range(len(x))], descending)
    for rows_per_block in (int(rng.integers(1, 8)), int(rng.integers(8, 300)), 10**6):
        tasks = npyio.check_tasks([tmp_path / "a.npy", tmp_path / "b.npy"], rows_per_block=rows_per_block, descending=descending)
        assert combined(tasks, descending) == want
