"""dsort.engine.cupy_engine, the engine's API on a CUDA device, at the sizes and inputs that stress
its kernels. The oracle is the NumPy engine (itself checked against Python's ``sorted`` in
test_engine.py); at 2^28 and beyond, checks run on the device: CuPy's sort for keys, and for
permutations the stability property (keys[perm] in order, equal keys with increasing positions).
"""

import numpy as np
import pytest

from dsort.engine import numpy_engine as ne
from dsort.engine._kernels import Target, tunings

from .conftest import HAS_GPU
from .gpu_cases import same, ties
from .reference import make_keys

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")]

if HAS_GPU:
    import cupy

    from dsort.engine import _cuda
    from dsort.engine import cupy_engine as ce


def _tiles():
    """Blocksort and merge tiles of every key and value size, as the kernel plans have them on this
    device (on the H100 where there is none: the tests then skip)."""
    target = _cuda.target() if HAS_GPU else Target(90, 227 * 1024)
    return sorted({x for t in tunings(target).values() for x in (t.tile_sort, t.tile_merge)})


def _sizes():
    sizes = {0, 1, 2, 100_003}
    for t in _tiles():
        sizes |= {t - 1, t, t + 1, 3 * t + 5}
    for k in (13, 16, 18, 20):
        sizes |= {2**k - 1, 2**k + 1}
    return sorted(sizes)


@pytest.mark.parametrize("n", _sizes())
@pytest.mark.parametrize("dtype", ["uint32", "int64", "float64", "float32", "rows10", "int16"])
def test_sizes_against_numpy_engine(rng, n, dtype):
    x = make_keys(dtype, "random", n, rng)
    dx = cupy.asarray(x)
    for descending in (False, True):
        want = ne.argsort(x, descending=descending)
        assert same(cupy.asnumpy(ce.argsort(dx, descending=descending)), want)
        assert same(cupy.asnumpy(ce.sort(dx, descending=descending)), x[want])
    v = rng.integers(0, 2**62, n)
    k, vv = ce.sort(dx, cupy.asarray(v), na_position="first")
    want = ne.argsort(x, na_position="first")
    assert same(cupy.asnumpy(k), x[want]) and same(cupy.asnumpy(vv), v[want])


@pytest.mark.parametrize("dtype", ["uint32", "int64", "float64", "rows10", "bool", "int8"])
@pytest.mark.parametrize("case", ["dups", "equal", "special"])
def test_heavy_ties_are_stable(rng, dtype, case):
    n = 300_001
    x = make_keys(dtype, case, n, rng)
    dx = cupy.asarray(x)
    for descending in (False, True):
        for na in ("last", "first"):
            want = ne.argsort(x, descending=descending, na_position=na)
            assert same(cupy.asnumpy(ce.argsort(dx, descending=descending, na_position=na)), want)


@pytest.mark.parametrize("dtype", ["uint32", "float64", "rows10", "rows3", "rows20", "uint8"])
@pytest.mark.parametrize("case", ["sorted", "reverse", "equal", "dups"])
def test_presorted_inputs(rng, dtype, case):
    """Sorted and reverse-sorted inputs take the one-pass path; reversed runs with ties must not."""
    n = 50_000
    x = make_keys(dtype, case if case != "dups" else "dups", n, rng)
    if case == "dups":
        x = x[ne.argsort(x, descending=True)]  # reverse-sorted with ties: reversal is not stable
    dx = cupy.asarray(x)
    v = np.arange(n, dtype=np.float32)
    for descending in (False, True):
        want = ne.argsort(x, descending=descending)
        assert same(cupy.asnumpy(ce.argsort(dx, descending=descending)), want)
        k, vv = ce.sort(dx, cupy.asarray(v), descending=descending)
        assert same(cupy.asnumpy(k), x[want]) and same(cupy.asnumpy(vv), v[want])
        assert ce.is_sorted(ce.sort(dx, descending=descending), descending=descending)


@pytest.mark.parametrize("dtype", ["uint32", "int64", "float32", "float64", "rows10", "rows8", "rows20", "int16"])
@pytest.mark.parametrize("shape", ["random", "disjoint", "interleaved-ties"])
def test_merge_large(rng, dtype, shape):
    m, n = 123_457, 200_003
    c = make_keys(dtype, "dups" if shape == "interleaved-ties" else "random", m + n, rng)
    for descending in (False, True):
        if shape == "disjoint":  # every key of a before every key of b: the one-sided copy path
            c = c[ne.argsort(c, descending=descending)]
            a, b = c[:m], c[m:]
        else:
            a, b = c[:m], c[m:]
            a, b = a[ne.argsort(a, descending=descending)], b[ne.argsort(b, descending=descending)]
        want = ne.merge(a, b, np.arange(m), np.arange(m, m + n), descending=descending)
        da, db = cupy.asarray(a), cupy.asarray(b)
        assert same(cupy.asnumpy(ce.merge(da, db, descending=descending)), want[0])
        k, v = ce.merge(da, db, cupy.arange(m), cupy.arange(m, m + n), descending=descending)
        assert same(cupy.asnumpy(k), want[0]) and same(cupy.asnumpy(v), want[1])
        # values of other shapes and sizes: moved by the merge permutation
        ra, rb = rng.integers(0, 256, (m, 3), dtype=np.uint8), rng.integers(0, 256, (n, 3), dtype=np.uint8)
        _, rv = ce.merge(da, db, cupy.asarray(ra), cupy.asarray(rb), descending=descending)
        assert same(cupy.asnumpy(rv), np.concatenate([ra, rb])[want[1]])
        d = np.unique(np.concatenate([[0, m + n], rng.integers(0, m + n + 1, 1000)]))
        assert same(
            cupy.asnumpy(ce.merge_path(da, db, cupy.asarray(d), descending=descending)), ne.merge_path(a, b, d, descending=descending)
        )


@pytest.mark.parametrize("values", ["int16", "rows90", "float32", "uint64", "int64-strided"])
def test_values_of_every_shape(rng, values):
    n = 40_001
    x = make_keys("int64", "dups", n, rng)
    if values == "rows90":
        v = rng.integers(0, 256, (n, 90), dtype=np.uint8)
    elif values == "int64-strided":
        v = rng.integers(-(2**62), 2**62, 2 * n)[::2]
    else:
        v = rng.integers(0, 1000, n).astype(values)
    want = ne.argsort(x, descending=True)
    k, vv = ce.sort(cupy.asarray(x), cupy.asarray(v), descending=True)
    assert same(cupy.asnumpy(k), x[want]) and same(cupy.asnumpy(vv), v[want])


@pytest.mark.parametrize("width", [1, 7, 8, 9, 16, 17, 33])
def test_byte_keys_of_every_width(rng, width):
    n = 20_000
    x = rng.choice(np.array([0, 1, 0x7F, 0x80, 0xFF], np.uint8), (n, width))
    dx = cupy.asarray(x)
    for descending in (False, True):
        want = ne.argsort(x, descending=descending)
        assert same(cupy.asnumpy(ce.argsort(dx, descending=descending)), want)
        assert same(cupy.asnumpy(ce.sort(dx, descending=descending)), x[want])
        s = x[want]
        probes = np.concatenate([x[:100], rng.integers(0, 256, (100, width), dtype=np.uint8)])
        for side in ("left", "right"):
            got = ce.searchsorted(cupy.asarray(s), cupy.asarray(probes), side=side, descending=descending)
            assert same(cupy.asnumpy(got), ne.searchsorted(s, probes, side=side, descending=descending))


def _check_stable_permutation(x, perm):
    """On the device: perm is a permutation and x[perm] is ascending with ties in input order."""
    n = len(x)
    assert perm.dtype == cupy.int64 and len(perm) == n
    seen = cupy.zeros(n, dtype=cupy.int8)
    seen[perm] = 1
    assert int(seen.sum()) == n
    k = x[perm]
    ok = (k[1:] > k[:-1]) | ((k[1:] == k[:-1]) & (perm[1:] > perm[:-1]))
    assert bool(ok.all())


def test_2_28_uint32():
    n = 2**28
    x = (cupy.random.random(n) * 2**32).astype(cupy.uint32)
    assert bool((ce.sort(x) == cupy.sort(x)).all())
    _check_stable_permutation(x, ce.argsort(x))
    lo = x % 1000  # heavy ties at full size
    _check_stable_permutation(lo, ce.argsort(lo))


def test_2_28_float64_merge():
    n = 2**27
    a = cupy.sort(cupy.random.standard_normal(n))
    b = cupy.sort(cupy.random.standard_normal(n))
    got = ce.merge(a, b)
    assert bool((got == cupy.sort(cupy.concatenate([a, b]))).all())


def test_beyond_2_31_elements():
    """No 32-bit index overflow: 2^31 + 5 one-byte keys (widened to int32 inside)."""
    free, _ = cupy.cuda.Device().mem_info
    if free < 40 * 2**30:
        pytest.skip("needs about 40 GiB of free device memory")
    n = 2**31 + 5
    x = (cupy.arange(n, dtype=cupy.uint32) % 251).astype(cupy.uint8)
    s = ce.sort(x)
    counts = cupy.bincount(x, minlength=256)
    assert bool((s[1:] >= s[:-1]).all()) and bool((cupy.bincount(s, minlength=256) == counts).all())
    del s
    m = 2**30 + 3  # a merge whose output passes 2^31
    a = cupy.zeros(m, dtype=cupy.int8)
    b = cupy.ones(n - m, dtype=cupy.int8)
    out = ce.merge(b, a, descending=True)
    assert int(out[: n - m].sum()) == n - m and int(out[n - m :].sum()) == 0


def test_presorted_large():
    """The persistent check walks many tiles per CTA; one late disorder must still be found."""
    n = 2**24 + 3
    x = cupy.sort((cupy.random.random(n) * 2**32).astype(cupy.uint32))
    assert bool((ce.sort(x) == x).all())
    assert bool((ce.argsort(x) == cupy.arange(n)).all())
    r = cupy.ascontiguousarray(x[::-1])  # reversed, with ties: needs the full sort
    assert bool((ce.sort(r) == x).all())
    u = cupy.arange(n, dtype=cupy.int64)[::-1].copy()  # strictly reversed: reversal is the sort
    assert bool((ce.argsort(u) == cupy.arange(n - 1, -1, -1)).all())
    assert bool((ce.sort(u) == cupy.arange(n)).all())
    late = x.copy()
    late[-1] = 0
    assert bool((ce.sort(late) == cupy.sort(late)).all())
    assert not ce.is_sorted(late) and ce.is_sorted(x)


def _order_flags(x, descending, na_first):
    """(sorted, strictly reverse-sorted) of NumPy keys in the wanted order, by the NumPy engine."""
    na = "first" if na_first else "last"
    is_sorted = ne.is_sorted(x, descending=descending, na_position=na)
    reversed_ = ne.is_sorted(x[::-1].copy(), descending=descending, na_position=na) and not ties(x).any()
    return is_sorted, reversed_


@pytest.mark.parametrize("dtype", ["int32", "float64", "rows10", "uint8"])
@pytest.mark.parametrize("case", ["sorted", "reverse", "equal", "random", "distinct-reverse"])
def test_presorted_detection_and_take(rng, dtype, case):
    """_presorted: small inputs are never checked; larger ones are 'sorted', 'reversed' (strictly,
    so that reversing is the stable sort) or None, as the NumPy engine's order says; _take copies."""
    for n in (ce._CHECK_FROM - 1, ce._CHECK_FROM, ce._CHECK_FROM + int(rng.integers(1, 5000))):
        x = make_keys(dtype, "random" if case == "distinct-reverse" else case, n, rng)
        if case == "distinct-reverse":  # random keys in reverse: distinct but for chance ties
            x = x[ne.argsort(x, descending=True)]
        dx = cupy.asarray(x)
        for descending in (False, True):
            for na_first in (False, True):
                how, dup = ce._presorted(dx, descending, na_first, copy=True)
                if n < ce._CHECK_FROM:
                    assert (how, dup) == (None, None)
                    continue
                is_sorted, strictly = _order_flags(x, descending, na_first)
                assert how == ("sorted" if is_sorted else "reversed" if strictly else None)
                if how == "sorted" and x.ndim == 1:
                    assert same(cupy.asnumpy(dup), x)
                if how:
                    taken = ce._take(dx, how)
                    assert same(cupy.asnumpy(taken), x if how == "sorted" else x[::-1])
                    assert taken.data.ptr != dx.data.ptr


@pytest.mark.parametrize("width", [17, 24, 40])
def test_merge_of_wide_rows_and_of_empty_sides(rng, width):
    """Wide byte keys merge through a stable sort of both; an empty side gives the other back."""
    m, n = (int(v) for v in rng.integers(1, 3000, 2))
    x = rng.choice(np.array([0, 1, 0xFF], np.uint8), (m + n, width))
    for descending in (False, True):
        a, b = x[:m], x[m:]
        a, b = a[ne.argsort(a, descending=descending)], b[ne.argsort(b, descending=descending)]
        va, vb = np.arange(m), np.arange(m, m + n)
        want = ne.merge(a, b, va, vb, descending=descending)
        k, v = ce.merge(cupy.asarray(a), cupy.asarray(b), cupy.asarray(va), cupy.asarray(vb), descending=descending)
        assert same(cupy.asnumpy(k), want[0]) and same(cupy.asnumpy(v), want[1])
        for da, db in ((a[:0], b), (a, b[:0])):
            got = ce.merge(cupy.asarray(da), cupy.asarray(db), descending=descending)
            assert same(cupy.asnumpy(got), np.concatenate([da, db]))


def test_searchsorted_probes_are_cast_and_flattened(rng):
    s = np.sort(rng.integers(-50, 50, 1000))
    probes = rng.integers(-60, 60, (4, 5)).astype(np.float64)  # another dtype, another shape
    for side in ("left", "right"):
        got = ce.searchsorted(cupy.asarray(s), cupy.asarray(probes), side=side)
        assert same(cupy.asnumpy(got), np.searchsorted(s, probes.astype(s.dtype).reshape(-1), side=side).astype(np.int64))


def test_short_inputs_are_sorted_and_to_numpy_copies(rng):
    for n in (0, 1):
        x = cupy.asarray(rng.standard_normal(n))
        assert ce.is_sorted(x) and ce.is_sorted(x, descending=True)
    x = cupy.asarray(rng.integers(0, 9, 100))
    h = ce.to_numpy(x)
    assert type(h) is np.ndarray and same(h, cupy.asnumpy(x))


def test_compile_all_builds_the_modules_of_this_device(monkeypatch):
    from dsort.engine import _kernels as P

    seen = []
    monkeypatch.setattr(_cuda, "compile_all", lambda modules, jobs: seen.append((list(modules), jobs)) or 7)
    assert ce.compile_all(3) == 7
    assert seen == [(list(P.modules(_cuda.target())), 3)]
