"""Host copies to and from a CUDA device (``dsort.engine.device``'s GPU paths), around the
page-locked path's size threshold and from threads whose pages overlap (needs a CUDA device).
The CuPy engine's own tests are in test_cupy_engine.py."""

import numpy as np
import pytest


from .conftest import HAS_GPU
from .reference import make_keys

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")]

if HAS_GPU:
    import cupy

    from dsort.engine import device as dv


def same(x, y):
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.view(np.uint8).tobytes() == y.view(np.uint8).tobytes()


@pytest.mark.parametrize("rows", [0, 1, 1000, "threshold-1", "threshold", "threshold+1", 3_000_001])
@pytest.mark.parametrize("kind", ["int64", "float32", "rows10", "strided", "read-only"])
def test_host_copies(rng, rows, kind, tmp_path):
    """from_host/to_host give back every byte, from any host array, leave the input unchanged, and
    hand out independent writable NumPy arrays; around the page-locked path's size threshold."""
    dtype = {"rows10": "rows10", "float32": "float32"}.get(kind, "int64")
    row = 10 if dtype == "rows10" else np.dtype(dtype).itemsize
    if isinstance(rows, str):
        rows = dv.PINNED_MIN_BYTES // row + {"-1": -1, "": 0, "+1": 1}[rows.removeprefix("threshold")]
    a = make_keys(dtype, "random", rows * (2 if kind == "strided" else 1), rng)
    if kind == "strided":
        a = a[::2]
    if kind == "read-only":
        path = tmp_path / "a.npy"
        np.save(path, a)
        a = np.load(path, mmap_mode="r")
    before = np.array(a, copy=True)
    d = dv.from_host(a)
    assert isinstance(d, cupy.ndarray) and same(cupy.asnumpy(d), before)
    assert same(np.asarray(a), before)
    h = dv.to_host(d[::-1] if len(d) else d)
    assert type(h) is np.ndarray and h.flags.writeable and h.flags.c_contiguous
    assert same(h, before[::-1])
    if len(h):
        h[0] = h[-1]  # writing the result touches neither the device copy nor the input
        assert same(cupy.asnumpy(d), before) and same(np.asarray(a), before)


def test_host_copies_overlapping_threads(rng):
    """Two threads copying neighbouring slices of one array (their pages overlap, so only one can
    lock them) both get their data: the other falls back to the plain copy."""
    from concurrent.futures import ThreadPoolExecutor

    a = rng.integers(-(2**62), 2**62, 8 * dv.PINNED_MIN_BYTES // 8 + 3, dtype=np.int64)
    cuts = [0, len(a) // 3 + 1, 2 * len(a) // 3 + 1, len(a)]
    with ThreadPoolExecutor(3) as pool:
        for _ in range(5):
            outs = list(pool.map(lambda i: dv.from_host(a[cuts[i] : cuts[i + 1]]), range(3)))
            assert same(np.concatenate([cupy.asnumpy(o) for o in outs]), a)


# -- rows gathered and copied by dsort's kernel (k_gather_rows) --------------------------------


@pytest.mark.parametrize(
    "shape,dtype",
    [
        ((0,), "int64"),
        ((1,), "int8"),
        ((1000,), "float64"),
        ((300, 100), "uint8"),
        ((300, 10), "uint8"),
        ((257, 3), "uint8"),
        ((64, 3, 2), "int32"),
        ((5, 0), "uint8"),
    ],
)
@pytest.mark.parametrize("view", ["whole", "columns", "every other row"])
@pytest.mark.parametrize("pos", ["none", "int64", "int32", "strided"])
def test_take_rows_and_copies_equal_numpys(rng, shape, dtype, view, pos):
    """engine.take_rows (a gather) and _codes.contiguous (a copy) of arrays and their views, with
    positions of 4 or 8 bytes, contiguous or not: NumPy's fancy indexing, bit for bit."""
    from dsort import engine
    from dsort.engine import _codes

    d = cupy.asarray(rng.integers(0, 100, shape).astype(dtype))
    host = cupy.asnumpy(d)
    if view == "columns" and d.ndim == 2 and d.shape[1] > 2:
        d, host = d[:, 1:-1], host[:, 1:-1]
    elif view == "every other row":
        d, host = d[::2], host[::2]
    if pos == "none":
        got, want = _codes.contiguous(d), host
        assert got.flags.c_contiguous
    else:
        p = rng.integers(0, max(len(host), 1), 2 * len(host) + 1 if len(host) else 0)
        dp = cupy.asarray(p.astype("int32" if pos == "int32" else "int64"))
        if pos == "strided":
            dp, p = cupy.asarray(np.repeat(p, 2))[::2], p
        got, want = engine.take_rows(d, dp), host[p]
    assert same(cupy.asnumpy(got), want)
    if pos != "none":
        with pytest.raises(TypeError, match="integers"):
            engine.take_rows(d, dp.astype("float64"))


@pytest.mark.parametrize("start,stop,step", [(0, 0, 1), (0, 1, 1), (0, 1000, 1), (5, 70_000, 1), (999, -1, -1), (3, 10, 4)])
def test_arange_equals_numpys(start, stop, step):
    from dsort.engine import cupy_engine

    assert same(cupy.asnumpy(cupy_engine.arange(start, stop, step)), np.arange(start, stop, step, dtype=np.int64))


@pytest.mark.parametrize("shape,dtype", [((7,), "float32"), ((9, 10), "uint8"), ((4, 3, 2), "int64")])
def test_concatenate_equals_numpys(rng, shape, dtype):
    """Pieces of any length (empty ones too), views among them, joined by device copies."""
    from dsort.engine import cupy_engine

    pieces = [rng.integers(0, 100, (n,) + shape[1:]).astype(dtype) for n in (shape[0], 0, 1, 2 * shape[0])]
    device = [cupy.asarray(p) for p in pieces]
    device[-1], pieces[-1] = device[-1][::2], pieces[-1][::2]
    assert same(cupy.asnumpy(cupy_engine.concatenate(device)), np.concatenate(pieces))
    mixed = [device[0], device[0].astype("float64")]  # promoted as NumPy's
    assert same(cupy.asnumpy(cupy_engine.concatenate(mixed)), np.concatenate([pieces[0], pieces[0].astype("float64")]))
    with pytest.raises(ValueError, match="trailing shape"):
        cupy_engine.concatenate([device[0], device[0][:1].reshape((1,) + shape[1:] + (1,))])
