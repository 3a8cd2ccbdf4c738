"""Single-device sorting engines: one for NumPy arrays (CPU), one for CuPy arrays (GPU).

Both expose the same functions with the same semantics (see :mod:`dsort.engine.keys`):

``sort(keys, values=None, descending=False, na_position="last")``
    stable sort; with values returns ``(keys, values)``.
``argsort(keys, descending=False, na_position="last", runs=None)``
    int64 positions of a stable sort (``runs``: the lengths of sorted runs the keys are made of,
    a merge of them: how the NumPy engine sorts them fastest).
``merge(a, b, a_values=None, b_values=None, descending=False, na_position="last")``
    stable merge of two sorted arrays, ties from ``a`` first.
``merge_path(a, b, diagonals, descending=False, na_position="last")``
    co-ranks of the stable merge at many output positions.
``searchsorted(sorted_keys, probes, side="left", ...)``
    rank probes: how many elements come before (``"left"``) or not after (``"right"``) each probe.
``is_sorted(keys, descending=False, na_position="last")``
``contiguous(x)``, ``concatenate(arrays)``, ``arange(start, stop, step=1)``, ``take_rows``
    (CuPy's: dsort's kernels and copies, so a sort builds no CuPy kernel).

The engine is chosen from the array's type, never from a global flag: :func:`get`.
"""

from __future__ import annotations

import numpy as np

from . import host, numpy_engine
from ._kernels import kernel_dir  # noqa: F401  (public: where the CUDA sources are)
from .device import is_device_array


def get(array):
    """The engine for ``array``'s type: NumPy arrays → NumPy engine, CuPy arrays → CuPy engine."""
    if isinstance(array, np.ndarray):
        return numpy_engine
    if is_device_array(array):
        from . import cupy_engine

        return cupy_engine
    raise TypeError(
        f"dsort sorts NumPy or CuPy arrays, got {type(array).__module__}.{type(array).__name__}"
    )


def take_rows(values, positions):
    """``values[positions]`` along axis 0, each row moved as one piece: rows of NumPy arrays as
    single ``V`` items (NumPy's fancy indexing of a 2-D array copies byte by byte, several times
    slower), rows of CuPy arrays by dsort's gather kernel, as the widest words that divide them.
    ``positions``: non-negative."""
    if isinstance(values, np.ndarray):
        if values.ndim == 1:
            return host.take(values, positions)
        if not len(values):
            return values[positions]
        width = values.dtype.itemsize * int(np.prod(values.shape[1:]))
        one = np.ascontiguousarray(values.reshape(len(values), -1)).view(f"V{width}").reshape(-1)
        return (
            host.take(one, positions)
            .view(values.dtype)
            .reshape((len(positions),) + values.shape[1:])
        )
    return get(values).take_rows(values, positions)


def contiguous(x):
    """``x`` C-contiguous (itself where it is): NumPy's copy, or dsort's gather kernel on a GPU
    (no CuPy kernel built)."""
    return get(x).contiguous(x)
