"""dsort.engine._search on a CUDA device: the sortedness check (and its copy), co-ranks of the
stable merge, and rank probes, for numbers and byte rows of any width; the references are the
NumPy engine and plain NumPy comparisons of neighbours."""

import numpy as np
import pytest

from dsort.engine import numpy_engine as ne

from .conftest import HAS_GPU
from .gpu_cases import GPU, ORDER_IDS, ORDERS, na, same, ties
from .reference import make_keys

pytestmark = GPU

if HAS_GPU:
    import cupy

    from dsort.engine import _search


@pytest.mark.parametrize("order", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "int64", "uint64", "float32", "float64", "rows3", "rows10", "rows40"])
@pytest.mark.parametrize("case", ["random", "dups", "equal", "sorted", "reverse", "special", "late"])
def test_check_flags(rng, order, dtype, case):
    """(sorted, strictly reverse-sorted, copy when sorted) from one read, at sizes up to many
    CTAs of the persistent check; 'late': sorted but for its last key."""
    descending, na_first = order
    how = {"descending": descending, "na_position": na(na_first)}
    for n in (0, 1, 2, int(rng.integers(3, 5000)), int(rng.integers(300_000, 700_000))):
        x = make_keys(dtype, "random" if case == "late" else case, n, rng)
        if case == "late" and n > 1:
            x = x[ne.argsort(x, **how)]
            x[-1] = x[0]
            x[0] = x[n // 2]
        dx = cupy.asarray(x)
        want_sorted = ne.is_sorted(x, **how)
        want_reversed = ne.is_sorted(x[::-1].copy(), **how) and not ties(x).any()
        for copy in (False, True):
            got_sorted, got_reversed, dup = _search.check_flags(dx, descending, na_first, copy=copy and x.ndim == 1)
            assert (got_sorted, got_reversed) == (want_sorted, want_reversed)
            if copy and x.ndim == 1 and want_sorted:
                assert same(cupy.asnumpy(dup), x)
            else:
                assert dup is None


@pytest.mark.parametrize("order", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", ["bool", "int16", "int32", "uint64", "float32", "float64", "rows1", "rows9", "rows24"])
@pytest.mark.parametrize("case", ["random", "dups", "special", "equal"])
def test_merge_path_and_searchsorted(rng, order, dtype, case):
    descending, na_first = order
    how = {"descending": descending, "na_position": na(na_first)}
    for m, n in [(0, 0), (0, 5), (5, 0), (1, 1), tuple(int(v) for v in rng.integers(2, 20_000, 2))]:
        a, b = make_keys(dtype, case, m, rng), make_keys(dtype, case, n, rng)
        a, b = a[ne.argsort(a, **how)], b[ne.argsort(b, **how)]
        da, db = cupy.asarray(a), cupy.asarray(b)
        d = np.unique(np.concatenate([[0, m + n], rng.integers(0, m + n + 1, 500)]))
        got = _search.merge_path(da, db, cupy.asarray(d), descending, na_first)
        assert same(cupy.asnumpy(got), ne.merge_path(a, b, d, **how))
        probes = np.concatenate([b, make_keys(dtype, "special" if case != "equal" else "random", 50, rng)])
        for right in (False, True):
            got = _search.searchsorted(da, cupy.ascontiguousarray(cupy.asarray(probes)), right, descending, na_first)
            want = ne.searchsorted(a, probes, side="right" if right else "left", **how)
            assert same(cupy.asnumpy(got), want)
