"""Every engine function against the independent reference in ``reference.py``."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsort import engine
from dsort.engine import numpy_engine

from .conftest import get, put
from .reference import CASES, DTYPES, argsort as ref_argsort, compare, make_keys

# Around the tile sizes of the GPU kernels (and harmless for NumPy).
SIZES = [0, 1, 2, 3, 31, 127, 128, 129, 1023, 1024, 1025, 2815, 2816, 2817, 5000]
ORDERS = [(False, "last"), (True, "last"), (False, "first"), (True, "first")]


def same(x, y):
    """Bitwise equality (NaN payloads, -0.0 versus 0.0 and byte padding all count)."""
    x, y = np.ascontiguousarray(x), np.ascontiguousarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and x.view(np.uint8).tobytes() == y.view(np.uint8).tobytes()


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc", "asc-nafirst", "desc-nafirst"])
def test_sort_argsort(eng, rng, dtype, case, order):
    descending, na = order
    for n in (0, 1, 2, int(rng.integers(3, 3000))):
        x = make_keys(dtype, case, n, rng)
        x0 = x.copy()
        want = ref_argsort(x, descending, na)
        dx = put(eng, x)
        assert same(get(eng, eng.argsort(dx, descending=descending, na_position=na)), want)
        assert same(get(eng, eng.sort(dx, descending=descending, na_position=na)), x[want])
        v = rng.integers(0, 2**62, n)
        k2, v2 = eng.sort(dx, put(eng, v), descending=descending, na_position=na)
        assert same(get(eng, k2), x[want]) and same(get(eng, v2), v[want])
        assert same(get(eng, dx), x0), "input modified"


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["uint32", "int64", "float64", "rows10"])
def test_sort_sizes(eng, rng, n, dtype):
    x = make_keys(dtype, "random", n, rng)
    want = ref_argsort(x)
    assert same(get(eng, eng.argsort(put(eng, x))), want)
    v = np.arange(n, dtype=np.uint32)
    k, vv = eng.sort(put(eng, x), put(eng, v), descending=True)
    want = ref_argsort(x, descending=True)
    assert same(get(eng, k), x[want]) and same(get(eng, vv), v[want])


def _sorted_pair(dtype, case, rng, descending, na):
    m, n = (int(s) for s in rng.integers(0, 1500, 2))
    a, b = make_keys(dtype, case, m, rng), make_keys(dtype, case, n, rng)
    return a[ref_argsort(a, descending, na)], b[ref_argsort(b, descending, na)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", ["random", "dups", "special", "equal"])
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc", "asc-nafirst", "desc-nafirst"])
def test_merge_and_merge_path(eng, rng, dtype, case, order):
    descending, na = order
    a, b = _sorted_pair(dtype, case, rng, descending, na)
    c = np.concatenate([a, b])
    perm = ref_argsort(c, descending, na)  # stable: ties from a come first
    da, db = put(eng, a), put(eng, b)
    assert same(get(eng, eng.merge(da, db, descending=descending, na_position=na)), c[perm])
    va, vb = np.arange(len(a)), np.arange(len(a), len(c))
    k, v = eng.merge(da, db, put(eng, va), put(eng, vb), descending=descending, na_position=na)
    assert same(get(eng, k), c[perm]) and same(get(eng, v), perm)
    diagonals = np.arange(len(c) + 1)
    corank = np.concatenate([[0], np.cumsum(perm < len(a))])
    got = get(eng, eng.merge_path(da, db, put(eng, diagonals), descending=descending, na_position=na))
    assert same(got, corank.astype(np.int64))


@pytest.mark.parametrize("dtype", ["int8", "uint64", "float32", "float64", "V10", "rows10", "bool"])
@pytest.mark.parametrize("order", ORDERS, ids=["asc", "desc", "asc-nafirst", "desc-nafirst"])
def test_searchsorted(eng, rng, dtype, order):
    descending, na = order
    x = make_keys(dtype, "dups" if dtype != "float32" else "special", 700, rng)
    s = x[ref_argsort(x, descending, na)]
    probes = np.concatenate([make_keys(dtype, "random", 50, rng), x[:50]])
    py = [s[i : i + 1] for i in range(len(s))]
    from .reference import _py

    for side in ("left", "right"):
        got = get(eng, eng.searchsorted(put(eng, s), put(eng, probes), side=side, descending=descending, na_position=na))
        want = []
        for j in range(len(probes)):
            p = _py(probes, j)
            cmp = [compare(_py(s, i), p, descending, na) for i in range(len(s))]
            want.append(sum(c < 0 for c in cmp) if side == "left" else sum(c <= 0 for c in cmp))
        assert same(got, np.array(want, dtype=np.int64)), side
    del py


@pytest.mark.parametrize("dtype", ["int32", "float64", "S10", "rows10"])
def test_is_sorted(eng, rng, dtype):
    for descending, na in ORDERS:
        x = make_keys(dtype, "dups", 500, rng)
        s = x[ref_argsort(x, descending, na)]
        assert eng.is_sorted(put(eng, s), descending=descending, na_position=na)
        if len(np.unique(s)) > 1:
            assert not eng.is_sorted(put(eng, s[::-1].copy()), descending=descending, na_position=na)


def test_get_engine_by_array_type():
    assert engine.get(np.zeros(3)) is numpy_engine
    with pytest.raises(TypeError, match="NumPy or CuPy"):
        engine.get([3, 1, 2])


def test_kernel_sources_found():
    assert (engine.kernel_dir() / "README.md").is_file()


@pytest.mark.parametrize(
    "bad, err, msg",
    [
        (np.zeros((2, 2)), ValueError, "1-D"),
        (np.zeros((2, 2, 2), np.uint8), ValueError, "1-D"),
        (np.zeros(3, np.float16), TypeError, "float16"),
        (np.array(["a"], dtype=object), TypeError, "object"),
        (np.zeros(3, np.complex128), TypeError, "complex128"),
    ],
)
def test_bad_keys(eng, bad, err, msg):
    with pytest.raises(err, match=msg):
        eng.sort(put(eng, bad) if bad.dtype != object else bad)


def test_bad_arguments(eng):
    x = put(eng, np.arange(4))
    with pytest.raises(ValueError, match="one row per key"):
        eng.sort(x, put(eng, np.arange(3)))
    with pytest.raises(ValueError, match="na_position"):
        eng.sort(x, na_position="middle")
    with pytest.raises(TypeError, match="different dtypes"):
        eng.merge(x, put(eng, np.arange(4.0)))
    with pytest.raises(ValueError, match="diagonals"):
        eng.merge_path(x, x, put(eng, np.array([9])))
    with pytest.raises(ValueError, match="both inputs"):
        eng.merge(x, x, a_values=x)


int_lists = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=200)
float_lists = st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from([0.0, -0.0, np.nan]), max_size=200)


@settings(max_examples=60, deadline=None)
@given(xs=int_lists | float_lists, ys=int_lists | float_lists, descending=st.booleans(), na=st.sampled_from(["last", "first"]))
def test_property_merge(xs, ys, descending, na):
    e = numpy_engine
    dtype = np.float64 if any(isinstance(v, float) for v in xs + ys) else np.int64
    a, b = np.array(xs, dtype=dtype), np.array(ys, dtype=dtype)
    a, b = a[ref_argsort(a, descending, na)], b[ref_argsort(b, descending, na)]
    c = np.concatenate([a, b])
    perm = ref_argsort(c, descending, na)
    assert same(e.merge(a, b, descending=descending, na_position=na), c[perm])
    corank = np.concatenate([[0], np.cumsum(perm < len(a))])
    assert same(e.merge_path(a, b, np.arange(len(c) + 1), descending=descending, na_position=na), corank.astype(np.int64))
    assert same(e.argsort(c, descending=descending, na_position=na), perm)


@settings(max_examples=60, deadline=None)
@given(raw=st.lists(st.binary(min_size=4, max_size=4), max_size=150), descending=st.booleans())
def test_property_bytes(raw, descending):
    x = np.array(raw, dtype="V4") if raw else np.zeros(0, "V4")
    want = sorted(range(len(raw)), key=lambda i: raw[i], reverse=descending)
    assert same(numpy_engine.argsort(x, descending=descending), np.array(want, dtype=np.int64))
