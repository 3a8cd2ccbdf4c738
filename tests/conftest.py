import os
import zlib

import numpy as np
import pytest

from dsort.engine import numpy_engine


def _cupy_device():
    try:
        import cupy

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


HAS_GPU = _cupy_device()


def _engines():
    yield pytest.param("numpy", id="numpy")
    yield pytest.param("cupy", id="cupy", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")])


@pytest.fixture(params=list(_engines()))
def eng(request):
    """The engine under test, with ``put`` (NumPy → engine arrays) and ``get`` (back to NumPy)."""
    if request.param == "numpy":
        e = numpy_engine
    else:
        from dsort.engine import cupy_engine as e
    return e


def put(e, x):
    if x is not None and e.name == "cupy" and x.dtype.kind in "SV":
        pytest.skip("CuPy has no S/V dtypes: byte keys reach the CuPy engine as 2-D uint8 rows (rows10)")
    return None if x is None else e.xp.asarray(x)


def get(e, x):
    return None if x is None else e.to_numpy(x)


SEED = int(os.environ.get("DSORT_TEST_SEED", np.random.SeedSequence().entropy % 2**32))


def pytest_report_header(config):
    return f"dsort test seed: DSORT_TEST_SEED={SEED} (set it to replay a run)"


@pytest.fixture
def rng(request):
    """Fresh random data each run; the header prints the seed that replays it."""
    return np.random.default_rng([SEED, zlib.crc32(request.node.nodeid.encode())])


@pytest.fixture(autouse=True)
def arrow_pool_kept():
    """Arrow's default memory pool as it was before each test: a `dsort sort` run in this process
    (the command's ``main``) makes it the system pool for the rest of the process, as it does for a
    command of its own (:func:`dsort.engine.host.keep_freed_memory`), and a later test of the
    mimalloc pool's pages would measure the other pool's."""
    import os
    import sys

    pa = sys.modules.get("pyarrow")
    before = pa.default_memory_pool() if pa is not None else None
    env = os.environ.get("ARROW_DEFAULT_MEMORY_POOL")
    yield
    if before is not None:
        pa.set_memory_pool(before)
    if env is None:
        os.environ.pop("ARROW_DEFAULT_MEMORY_POOL", None)


@pytest.fixture(autouse=True)
def small_runs(request):
    """Tests sort small arrays: runs of any size (not dsort.scale.min-run's megabytes), so their
    chunks still make several runs and the merges run. Tests marked ``default_scale`` keep the
    defaults."""
    import dask

    import dsort.collections.config  # noqa: F401 (the defaults registered first: a set before them would drop them after)

    if request.node.get_closest_marker("default_scale"):
        yield
        return
    with dask.config.set({"dsort.scale.min-run": 1, "dsort.scale.gpu-min-run": 1}):
        yield
