"""An independent reference for dsort's order: Python's own stable ``sorted`` over Python objects.

Nothing here uses dsort or NumPy's sort; Python's ``sorted`` is stable for ``reverse=True`` too,
which is exactly dsort's descending order (ties keep input order).
"""

import math

import numpy as np

INT_DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]
FLOAT_DTYPES = ["float32", "float64"]
BYTE_DTYPES = ["S10", "V10", "S3", "rows10"]  # rows10: byte keys as (n, 10) uint8 rows
DTYPES = ["bool"] + INT_DTYPES + FLOAT_DTYPES + BYTE_DTYPES
CASES = ["random", "equal", "sorted", "reverse", "dups", "special"]


def _py(x, i):
    v = x[i]
    if x.ndim == 2:
        return bytes(x[i])
    if x.dtype.kind in "SV":
        return bytes(np.ascontiguousarray(x[i : i + 1]).view(np.uint8))
    if x.dtype.kind == "f":
        return float(v)
    return int(v)


def sort_key(descending=False, na_position="last"):
    """A Python key function giving dsort's order under ``sorted(..., reverse=descending)``."""
    nan_high = (na_position == "last") != descending  # reverse=True flips the NaN group too

    def key(v):
        if isinstance(v, float) and math.isnan(v):
            return (1 if nan_high else -1, 0.0)
        return (0, v + 0.0 if isinstance(v, float) else v)

    return key


def argsort(x, descending=False, na_position="last"):
    key = sort_key(descending, na_position)
    vals = [_py(x, i) for i in range(len(x))]
    return np.array(sorted(range(len(x)), key=lambda i: key(vals[i]), reverse=descending), dtype=np.int64)


def compare(x, y, descending=False, na_position="last"):
    """-1, 0, 1: does ``x`` come before, tie with, or come after ``y``."""
    key = sort_key(descending, na_position)
    kx, ky = key(x), key(y)
    if kx == ky:
        return 0
    before = kx < ky
    return (-1 if before else 1) if not descending else (1 if before else -1)


def make_keys(dtype, case, n, rng):
    """Keys of ``dtype`` for a test ``case``; all cases are random draws, never fixed answers."""
    if isinstance(dtype, str) and dtype.startswith("rows"):
        x = make_keys(f"V{dtype[4:]}", case, n, rng)
        return np.ascontiguousarray(x).view(np.uint8).reshape(n, int(dtype[4:]))
    dtype = np.dtype(dtype)
    if dtype.kind in "SV":
        w = dtype.itemsize
        if case == "dups":
            pool = rng.integers(0, 256, (5, w), dtype=np.uint8)
            raw = pool[rng.integers(0, 5, n)]
        elif case == "special":  # NULs, 0xFF and shared prefixes: memcmp's corner cases
            raw = rng.choice(np.array([0, 1, 0x7F, 0x80, 0xFF], np.uint8), (n, w))
        else:
            raw = rng.integers(0, 256, (n, w), dtype=np.uint8)
        x = np.ascontiguousarray(raw).view(dtype).reshape(n)
    elif dtype.kind == "b":
        x = rng.integers(0, 2, n).astype(bool)
    elif dtype.kind == "f":
        if case == "special":
            x = rng.choice(np.array([np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-310], dtype), n)
        elif case == "dups":
            x = rng.integers(-3, 3, n).astype(dtype)
        else:
            x = (rng.standard_normal(n) * 1e3).astype(dtype)
            x[rng.random(n) < 0.05] = np.nan
    else:
        info = np.iinfo(dtype)
        if case == "special":
            x = rng.choice(np.array([info.min, info.max, 0, 1, info.max - 1], dtype), n)
        elif case == "dups":
            x = rng.integers(info.min, info.min + 4, n, endpoint=True).astype(dtype)
        else:
            x = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
    if case == "equal" and n:
        x = np.repeat(x[:1], n)
    elif case in ("sorted", "reverse"):
        x = x[argsort(x, descending=case == "reverse")]
    return x
