"""Host copies from many threads at once, as a file sort's first run tasks make them (``dsort
build-kernels``' warm-up once died of it with ``CUDA_ERROR_LAUNCH_FAILED``): every thread uploads
the same cached CRC table, and one thread's page-locking of it must not be undone under another
thread's copy from it. Needs a CUDA device.

A DMA fault ends every later CUDA call of its process, so the threads run in a child process
(``python -m tests.test_warm_up_gpu THREADS ROUNDS``), whose exit status and report the test reads.
"""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import HAS_GPU

ROOT = Path(__file__).resolve().parent.parent


def stress(threads: int, rounds: int) -> str:
    """``rounds`` times: ``threads`` threads, each on its own non-blocking stream (as the file
    sort's tasks), start together and upload one shared array, download it again, and take the
    CRC-32 of rows on the device with the device tables dropped first (so all of them upload the
    same table at once). Raises on the first wrong byte; CUDA errors raise by themselves."""
    import threading
    from concurrent.futures import ThreadPoolExecutor

    import cupy

    from dsort.core import valsort
    from dsort.engine import device as dv

    rng = np.random.default_rng(7)
    shared = rng.integers(-(2**62), 2**62, 3 * dv.PINNED_MIN_BYTES // 8 + 5, dtype=np.int64)
    rows = rng.integers(0, 256, (20_000, 100), dtype=np.uint8)
    want = valsort.crc32_rows(rows)
    barrier = threading.Barrier(threads)
    local = threading.local()

    def task(i):
        if not hasattr(local, "stream"):
            local.stream = cupy.cuda.Stream(non_blocking=True)
        with local.stream:
            barrier.wait()
            part = shared if i % 2 else shared[: len(shared) // 2 + i]  # the same pages, whole or in part
            d = dv.from_host(part)
            assert np.array_equal(dv.to_host(d), part)
            got = valsort.crc32_rows(dv.from_host(rows))
            assert np.array_equal(cupy.asnumpy(got), want)
            local.stream.synchronize()

    with ThreadPoolExecutor(threads) as pool:
        for _ in range(rounds):
            valsort._device_tables.cache_clear()
            list(pool.map(task, range(threads)))
    cupy.cuda.Device().synchronize()
    return f"{threads} threads x {rounds} rounds ok"


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
def test_threads_copying_one_array_at_once_all_get_it():
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    done = subprocess.run(
        [sys.executable, "-m", "tests.test_warm_up_gpu", "8", "30"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr[-3000:]


if __name__ == "__main__":
    print(stress(int(sys.argv[1]), int(sys.argv[2])), flush=True)
