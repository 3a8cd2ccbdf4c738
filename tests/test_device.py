"""dsort.engine.device on a machine without CuPy's GPU: the array module of NumPy arrays, no GPUs,
host copies that own their memory (the GPU paths run in tests/test_gpu_kernels.py on a device)."""

import numpy as np
import pytest

from dsort.engine import device


def test_numpy_arrays_are_host_arrays():
    x = np.arange(6).reshape(2, 3)
    assert device.xp_of(x) is np and device.xp_of([1, 2]) is np and not device.is_device_array(x)


def test_gpu_count_matches_cupy():
    try:
        import cupy

        expected = cupy.cuda.runtime.getDeviceCount()
    except Exception:
        expected = 0
    assert device.gpu_count() == expected and device.has_gpu() == (expected > 0)


@pytest.mark.parametrize("shape", [(0,), (5,), (3, 4)])
def test_to_host_of_a_host_array_is_a_copy(shape):
    x = np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape)
    y = device.to_host(x)
    np.testing.assert_array_equal(y, x)
    assert not np.shares_memory(x, y)


def test_staging_pools_are_one_per_device():
    assert device.staging(0) is device.staging(0) and device.staging(0) is not device.staging(1)
