"""valsort's output checks on the GPU (``kernels/kernel_check.cu``): the records' checksum and the
order and duplicates of consecutive keys, one pass each over the data, the results read back in
one copy. :mod:`dsort.core.valsort` calls :func:`summary` for device arrays and keeps its
element-wise path for what this does not take (other dtypes, non-native byte order, odd strides)."""

from __future__ import annotations

import cupy
import numpy as np

from . import _codes
from . import _cuda as C
from . import _kernels as P
from . import keys as K


def _row_stride(a) -> int | None:
    """Bytes between rows of 2-D uint8 ``a`` whose bytes within a row are adjacent, else None."""
    return _codes.rows_pitch(a) if a.ndim == 2 and a.dtype == np.uint8 else None


def _out(n: int):
    """The kernels' four counters (checksum, out of order, equal, first out of order = n: none),
    copied to the device: no kernel to build."""
    return cupy.asarray(np.array([0, 0, 0, n], np.uint64))


def _crc32_sum(rows, stride: int, out) -> None:
    n = len(rows)
    if n and rows.shape[1]:  # the CRC-32 of no bytes is 0
        kern = P.check_plan().crc32_sum
        C.launch(
            kern,
            kern.grid(n, C.sm_count()),
            (rows, np.int64(n), np.int32(rows.shape[1]), np.int64(stride), out),
        )


def crc32_sum(rows) -> int | None:
    """valsort's checksum of 2-D uint8 ``rows`` (the exact sum of their CRC-32s), or None where the
    kernel does not take them."""
    stride = _row_stride(rows)
    if stride is None:
        return None
    out = _out(len(rows))
    _crc32_sum(rows, stride, out)
    return int(out[:1].get()[0])


def summary(keys, rows, descending: bool):
    """``(checksum, out of order, equal pairs, first out of order or None)`` of ``keys`` (1-D
    numbers or 2-D byte rows) and their records ``rows`` (2-D uint8), or None where the kernels do
    not take them."""
    n = len(keys)
    row_stride = _row_stride(rows)
    if row_stride is None or len(rows) != n:
        return None
    plan = P.check_plan()
    if K.is_byte_rows(keys):
        key_stride = _row_stride(keys)
        if key_stride is None:
            return None
        order = plan.pair_order_rows[bool(descending)]
        order_args = (keys, np.int64(n), np.int32(keys.shape[1]), np.int64(key_stride))
    else:
        if keys.ndim != 1 or not keys.dtype.isnative or keys.strides[0] % keys.dtype.itemsize:
            return None
        try:
            order = plan.pair_order[P.ctype_of(keys.dtype), bool(descending)]
        except KeyError:  # a dtype the kernels do not compare
            return None
        order_args = (keys, np.int64(n), np.int64(keys.strides[0] // keys.dtype.itemsize))
    out = _out(n)
    _crc32_sum(rows, row_stride, out)
    if n >= 2:
        C.launch(order, order.grid(n - 1, C.sm_count()), (*order_args, out))
    total, wrong, equal, first = (int(v) for v in out.get())
    return total, wrong, equal, (first if wrong else None)
