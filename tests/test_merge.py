"""dsort.engine._merge on a CUDA device: the standalone merge (one Merge Path partition per output
tile, one CTA per tile) at sizes around the merge tiles, keys alone, values carried (4 and 8
bytes) or gathered (any other); the reference is the NumPy engine's stable merge."""

import numpy as np
import pytest

from dsort.engine import numpy_engine as ne

from .conftest import HAS_GPU
from .gpu_cases import GPU, ORDER_IDS, ORDERS, na, same, tile_sizes
from .reference import make_keys

pytestmark = GPU

if HAS_GPU:
    import cupy

    from dsort.engine._merge import merge

SIZES = tile_sizes("tile_merge")


def _sorted_pair(rng, dtype, case, m, n, descending, na_first):
    a, b = make_keys(dtype, case, m, rng), make_keys(dtype, case, n, rng)
    how = {"descending": descending, "na_position": na(na_first)}
    return a[ne.argsort(a, **how)], b[ne.argsort(b, **how)]


@pytest.mark.parametrize("order", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", ["int32", "int64", "float32", "float64", "int8", "bool", "rows5", "rows16"])
@pytest.mark.parametrize("case", ["random", "dups", "special", "equal"])
def test_keys_and_carried_values(rng, order, dtype, case):
    descending, na_first = order
    for m, n in [(1, 1), (1, int(rng.choice(SIZES))), (int(rng.choice(SIZES)), 1), tuple(int(v) for v in rng.choice(SIZES, 2))]:
        a, b = _sorted_pair(rng, dtype, case, m, n, descending, na_first)
        how = {"descending": descending, "na_position": na(na_first)}
        want = ne.merge(a, b, np.arange(m), np.arange(m, m + n), **how)
        da, db = cupy.asarray(a), cupy.asarray(b)
        assert same(cupy.asnumpy(merge(da, db, None, None, descending, na_first)), want[0])
        for vdtype in ("uint32", "int64", "float32"):  # carried as words, given back as their dtype
            va, vb = rng.standard_normal(m).astype(vdtype), rng.standard_normal(n).astype(vdtype)
            if vdtype != "float32":
                va, vb = rng.integers(0, 2**31, m).astype(vdtype), rng.integers(0, 2**31, n).astype(vdtype)
            k, v = merge(da, db, cupy.asarray(va), cupy.asarray(vb), descending, na_first)
            assert same(cupy.asnumpy(k), want[0]) and same(cupy.asnumpy(v), np.concatenate([va, vb])[want[1]])


@pytest.mark.parametrize("values", ["int16", "rows3", "mixed"])
def test_gathered_values(rng, values):
    """Values the kernels do not carry (other sizes, rows, two dtypes) follow the merge's positions."""
    m, n = (int(v) for v in rng.choice(SIZES, 2))
    for descending, na_first in ORDERS:
        a, b = _sorted_pair(rng, "float64", "dups", m, n, descending, na_first)
        if values == "int16":
            va, vb = rng.integers(-(2**15), 2**15, m).astype(np.int16), rng.integers(-(2**15), 2**15, n).astype(np.int16)
        elif values == "rows3":
            va, vb = rng.integers(0, 256, (m, 3), dtype=np.uint8), rng.integers(0, 256, (n, 3), dtype=np.uint8)
        else:
            va, vb = rng.integers(0, 2**31, m).astype(np.int64), rng.integers(0, 2**31, n).astype(np.int32)
        want = ne.merge(a, b, np.arange(m), np.arange(m, m + n), descending=descending, na_position=na(na_first))
        k, v = merge(cupy.asarray(a), cupy.asarray(b), cupy.asarray(va), cupy.asarray(vb), descending, na_first)
        assert same(cupy.asnumpy(k), want[0])
        assert same(cupy.asnumpy(v), np.concatenate([va, vb])[want[1]])


def test_disjoint_and_interleaved_runs(rng):
    """Every key of one side before every key of the other, either way round, and ties across."""
    n = int(rng.choice(SIZES)) * 2
    x = np.sort(rng.integers(0, 10**6, 2 * n))
    for a, b in ((x[:n], x[n:]), (x[n:], x[:n]), (x[::2].copy(), x[1::2].copy()), (x[:n], x[:n].copy())):
        want = ne.merge(a, b, np.arange(len(a)), np.arange(len(a), len(a) + len(b)))
        k, v = merge(cupy.asarray(a), cupy.asarray(b), cupy.arange(len(a)), cupy.arange(len(a), len(a) + len(b)), False, False)
        assert same(cupy.asnumpy(k), want[0]) and same(cupy.asnumpy(v), want[1])
