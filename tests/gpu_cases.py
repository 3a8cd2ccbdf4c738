"""Shared by the CUDA-only tests of the engine's private modules: the skip marks, bitwise
equality, and sizes around the kernels' tiles on this device."""

import numpy as np
import pytest

from dsort.engine._kernels import Target, tunings

from .conftest import HAS_GPU

GPU = [pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")]
ORDERS = [(False, False), (True, False), (False, True), (True, True)]  # (descending, na_first)
ORDER_IDS = ["asc", "desc", "asc-nafirst", "desc-nafirst"]


def same(x, y):
    """Bitwise equality (NaN payloads, -0.0 versus 0.0 and byte padding all count)."""
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.view(np.uint8).tobytes() == y.view(np.uint8).tobytes()


def ties(x):
    """Consecutive keys that are equal in dsort's order (NaN equals NaN, -0.0 equals 0.0)."""
    if x.ndim == 2:
        return (x[1:] == x[:-1]).all(axis=1)
    if x.dtype.kind == "f":
        return (x[1:] == x[:-1]) | (np.isnan(x[1:]) & np.isnan(x[:-1]))
    return x[1:] == x[:-1]


def na(na_first: bool) -> str:
    return "first" if na_first else "last"


def tile_sizes(kind: str) -> list:
    """Sizes around the ``kind`` tiles (``tile_sort`` or ``tile_merge``) of every plan on this
    device (on an H100's figures where there is none: the tests then skip)."""
    if HAS_GPU:
        from dsort.engine import _cuda

        target = _cuda.target()
    else:
        target = Target(90, 227 * 1024)
    sizes = {1, 2, 3}
    for t in {getattr(t, kind) for t in tunings(target).values()}:
        sizes |= {t - 1, t, t + 1, 2 * t + 1, 3 * t + 5}
    return sorted(sizes)
