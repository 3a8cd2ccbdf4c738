"""Key semantics shared by every engine: which dtypes sort, and in what order.

The order, the same in every engine:

* Integers (8 to 64 bit, signed and unsigned) and ``bool`` (False < True) by value.
* ``float32`` and ``float64`` by value; ``-0.0 == 0.0`` (they are equal keys, so a stable sort keeps
  their input order); infinities at the ends of the numbers; NaN after every number in both
  directions (pandas' ``na_position="last"``), or before every number with ``na_position="first"``.
  All NaNs are equal keys.
* Fixed-width byte keys as unsigned bytes, like ``memcmp``: the Sort Benchmark's 10-byte keys.
  Two spellings: a 1-D ``S<n>`` or ``V<n>`` array (NumPy only), or a C-contiguous 2-D ``uint8``
  array of shape ``(n, width)``, one key per row ("byte rows"; CuPy has no ``S``/``V`` dtypes, so
  this is the spelling every engine takes). Results come back in the spelling given.
* Every sort and merge is stable: equal keys keep their input order, in descending order too
  (descending is not the reverse of ascending: ties are not reversed). A merge puts every element
  of its first input before equal elements of its second.

This module looks only at dtypes and shapes, so it serves the NumPy and the CuPy engine alike.
"""

from __future__ import annotations

import numpy as np

NA_POSITIONS = ("last", "first")

SUPPORTED = (
    "bool, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64 and "
    "fixed-width bytes (S<n>, V<n>)"
)


def is_bytes(dtype) -> bool:
    """True for fixed-width byte keys (``S<n>``, ``V<n>`` without fields)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "SV" and dtype.fields is None and dtype.itemsize > 0


def check_dtype(dtype, what: str = "keys") -> np.dtype:
    """Return ``dtype`` as a ``numpy.dtype`` if dsort can sort it, else raise ``TypeError``."""
    dtype = np.dtype(dtype)
    if dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize in (4, 8)) or is_bytes(dtype):
        return dtype
    raise TypeError(f"unsupported {what} dtype {dtype}; dsort sorts {SUPPORTED}")


def is_byte_rows(keys) -> bool:
    """True for byte keys spelled as a 2-D ``uint8`` array, one key per row."""
    return getattr(keys, "ndim", None) == 2 and keys.dtype == np.uint8 and keys.shape[1] > 0


def check_keys(keys, what: str = "keys") -> None:
    """Raise a clear error unless ``keys`` is a 1-D array of a supported dtype or byte rows."""
    if is_byte_rows(keys):
        return
    if getattr(keys, "ndim", None) != 1:
        shape = getattr(keys, "shape", None)
        raise ValueError(f"{what} must be a 1-D array (or 2-D uint8 byte rows), got shape {shape}")
    check_dtype(keys.dtype, what)


def check_values(keys, values, what: str = "values") -> None:
    if values is None:
        return
    if getattr(values, "ndim", 0) < 1 or len(values) != len(keys):
        raise ValueError(
            f"{what} must have one row per key: {len(keys)} keys, {what} of shape "
            f"{getattr(values, 'shape', None)}"
        )


def check_na_position(na_position: str) -> bool:
    """Validate ``na_position``; return True when NaN goes first."""
    if na_position not in NA_POSITIONS:
        raise ValueError(f"na_position must be 'last' or 'first', got {na_position!r}")
    return na_position == "first"


def check_pair(a, b) -> None:
    """Both inputs of a merge must be 1-D keys of one dtype."""
    check_keys(a, "a")
    check_keys(b, "b")
    if a.dtype != b.dtype or a.shape[1:] != b.shape[1:]:
        raise TypeError(
            f"cannot merge keys of different dtypes: a is {a.dtype}{list(a.shape[1:]) or ''}, b is "
            f"{b.dtype}{list(b.shape[1:]) or ''}"
        )


def check_merge(a, b, a_values, b_values, na_position) -> bool:
    """Validate a merge's arguments (both inputs alike, values for both or neither); return True
    when NaN goes first."""
    check_pair(a, b)
    check_values(a, a_values, "a_values")
    check_values(b, b_values, "b_values")
    if (a_values is None) != (b_values is None):
        raise ValueError("give values for both inputs of a merge or for neither")
    return check_na_position(na_position)


# -- the engines' argument checks: each public function of an engine starts with one of these
# ---------


def check_sort(keys, values, na_position) -> bool:
    """``sort``'s arguments (keys, values for every key or None); True when NaN goes first."""
    check_keys(keys)
    check_values(keys, values)
    return check_na_position(na_position)


def check_one(keys, na_position) -> bool:
    """The arguments of ``argsort`` and ``is_sorted``; True when NaN goes first."""
    check_keys(keys)
    return check_na_position(na_position)


def check_path(a, b, diagonals, na_position) -> bool:
    """``merge_path``'s arguments (``diagonals``: 1-D int64, NumPy or CuPy); True when NaN goes
    first."""
    check_pair(a, b)
    if diagonals.size and (int(diagonals.min()) < 0 or int(diagonals.max()) > len(a) + len(b)):
        raise ValueError(f"diagonals must lie in [0, {len(a) + len(b)}]")
    return check_na_position(na_position)


def check_search(sorted_keys, side, na_position) -> bool:
    """``searchsorted``'s arguments; True when NaN goes first."""
    check_keys(sorted_keys, "sorted_keys")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right', got {side!r}")
    return check_na_position(na_position)
