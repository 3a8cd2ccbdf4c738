"""dsort.engine._cuda on a CUDA device: the device as the kernel plans see it (against CuPy's own
attributes), modules built once for all threads, launches (none for an empty grid), the phase
timer, and the on-disk cache's marker."""

from pathlib import Path

import numpy as np
import pytest

from dsort.engine import _kernels as P

from .conftest import HAS_GPU
from .gpu_cases import GPU, same

pytestmark = GPU

if HAS_GPU:
    import cupy

    from dsort.engine import _cuda as C


def test_the_device_as_cupy_sees_it():
    d = cupy.cuda.Device()
    attrs = d.attributes
    assert C.target() == P.Target(int(d.compute_capability), int(attrs["MaxSharedMemoryPerBlockOptin"]))
    assert C.sm_count() == attrs["MultiProcessorCount"] and C.arch() == f"sm_{d.compute_capability}"


def test_modules_and_functions_are_built_once_for_every_thread():
    kern = P.rows_plan().unpack[8]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(4) as pool:
        built = list(pool.map(lambda _: C.module(kern.module), range(8)))
    assert all(m is built[0] for m in built)
    assert C.function(kern) is C.function(kern)


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 10_000])
def test_launch_runs_a_kernel_on_its_grid(rng, n):
    """The rows plan's unpack kernel, launched directly, writes every row of big-endian words."""
    width = int(rng.integers(1, 9))
    rows = rng.integers(0, 256, (n, width), dtype=np.uint8)
    padded = np.zeros((n, 8), np.uint8)
    padded[:, :width] = rows
    words = cupy.asarray(padded.view(">u8").astype(np.uint64).reshape(-1))
    out = cupy.full((n, width), 7, dtype=cupy.uint8)
    kern = P.rows_plan().unpack[8]
    C.launch(kern, kern.grid(n), (words, np.int64(n), np.int32(width), out))
    assert same(cupy.asnumpy(out), rows)


def test_an_empty_grid_launches_nothing(monkeypatch):
    monkeypatch.setattr(C, "function", lambda kernel: pytest.fail("a kernel was looked up for no work"))
    C.launch(P.rows_plan().unpack[8], 0, None)
    C.launch(P.rows_plan().unpack[8], -1, None)


def test_phases_are_timed_only_inside_traced(rng):
    from dsort.engine import cupy_engine as ce

    x = cupy.asarray(rng.integers(0, 2**31, 300_000))
    with C.phase("outside"):
        ce.sort(x)
    assert C._TRACE is None
    with C.traced() as times:
        ce.sort(x)
        with C.phase("mine"):
            cupy.arange(10).sum()
    assert C._TRACE is None
    labels = [label for label, _ in times]
    assert "blocksort" in labels and labels[-1] == "mine" and "outside" not in labels
    assert all(isinstance(ms, float) and ms >= 0 for _, ms in times)
    tuning = P.sort_plan(P.Order("long long"), 0, P.Mode.KEYS, C.target()).tuning
    blocks, passes, span = -(-len(x) // tuning.tile_sort), 0, 1
    while span < blocks:  # each pass merges tuning.ways runs
        passes, span = passes + 1, span * tuning.ways
    assert sum(label.startswith("pass run=") for label in labels) == passes > 0
    assert sum(label.startswith("cuts run=") for label in labels) == passes


def test_the_built_marker_is_per_digest_and_architecture(tmp_path, monkeypatch):
    from dsort.engine import _aot

    monkeypatch.setenv("CUPY_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(_aot, "shipped_all", lambda target: False)  # nothing shipped: the marker decides
    assert C.cache_dir() == tmp_path and not C.kernels_built()
    marker = tmp_path / f"dsort-{_aot.digest()}-{C.arch()}.built"
    marker.write_text("1 kernels\n")
    assert C.kernels_built()
    monkeypatch.delenv("CUPY_CACHE_DIR")
    assert C.cache_dir() == Path.home() / ".cupy" / "kernel_cache"
