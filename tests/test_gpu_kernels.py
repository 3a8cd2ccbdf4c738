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
