"""dsort.engine._mergesort on a CUDA device: the blocksort and merge passes at sizes around the
tiles (one pass, several, an odd number), carrying values or generating positions; the reference
is the NumPy engine's stable sort (itself checked against Python's ``sorted``)."""

import numpy as np
import pytest

from dsort.engine import numpy_engine as ne

from .conftest import HAS_GPU
from .gpu_cases import GPU, ORDER_IDS, ORDERS, na, same, tile_sizes
from .reference import make_keys

pytestmark = GPU

if HAS_GPU:
    import cupy

    from dsort.engine import _codes
    from dsort.engine._mergesort import index_dtype, mergesort, sorting_permutation

SIZES = tile_sizes("tile_sort")
WAYS = [2, 4]  # runs merged by a global pass (kernels/kernel_mergesort.cu, kernel_merge4.cu)


def test_index_dtype():
    for n in (0, 1, 2**32 - 1):
        assert index_dtype(n) == cupy.uint32
    for n in (2**32, 2**40):
        assert index_dtype(n) == cupy.uint64


@pytest.mark.parametrize("ways", WAYS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", ["int64", "float32", "int16", "rows10", "rows4"])
def test_keys_only_at_tile_sizes(rng, n, dtype, ways):
    x = make_keys(dtype, "random", n, rng)
    coded = _codes.encode(cupy.asarray(x))
    for descending, na_first in ORDERS:
        keys, values = mergesort(coded, coded.order(descending, na_first), ways=ways)
        assert values is None
        assert same(cupy.asnumpy(coded.decode(keys)), x[ne.argsort(x, descending=descending, na_position=na(na_first))])


@pytest.mark.parametrize("ways", WAYS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("values", ["uint32", "uint64"])
@pytest.mark.parametrize("case", ["random", "dups", "special"])
def test_values_are_carried_stably(rng, n, values, case, ways):
    x = make_keys("float64", case, n, rng)
    v = rng.integers(0, np.iinfo(values).max, n, dtype=values, endpoint=True)
    coded = _codes.encode(cupy.asarray(x))
    for descending, na_first in ORDERS:
        perm = ne.argsort(x, descending=descending, na_position=na(na_first))
        keys, sv = mergesort(coded, coded.order(descending, na_first), values=cupy.asarray(v), ways=ways)
        assert same(cupy.asnumpy(coded.decode(keys)), x[perm]) and same(cupy.asnumpy(sv), v[perm])


@pytest.mark.parametrize("ways", WAYS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("int64_out", [False, True])
@pytest.mark.parametrize("dtype", ["uint32", "int8", "rows16", "bool"])
def test_positions_are_generated(rng, n, int64_out, dtype, ways):
    x = make_keys(dtype, "dups", n, rng)
    coded = _codes.encode(cupy.asarray(x))
    for descending, na_first in ORDERS:
        perm = ne.argsort(x, descending=descending, na_position=na(na_first))
        keys, pos = mergesort(coded, coded.order(descending, na_first), iota=True, int64_out=int64_out, ways=ways)
        assert pos.dtype == (cupy.int64 if int64_out else cupy.uint32)
        assert same(cupy.asnumpy(pos).astype(np.int64), perm) and same(cupy.asnumpy(coded.decode(keys)), x[perm])


@pytest.mark.parametrize("dtype", ["uint32", "int64", "float64", "rows16"])
@pytest.mark.parametrize("case", ["random", "dups", "special"])
def test_four_way_passes_at_group_sizes(rng, dtype, case):
    """4-way passes where groups of four runs end short: sizes around 4 and 16 blocksort tiles
    (one pass, two, a last group of one, two or three runs), every order, positions generated and
    values carried; the same result as the 2-way passes and NumPy's stable sort."""
    from dsort.engine import _cuda, _kernels

    tile = {t.tile_sort for t in _kernels.tunings(_cuda.target()).values()}
    for t in sorted(tile):
        for n in (4 * t - 1, 4 * t + 1, 5 * t + 3, 6 * t, 7 * t + 1, 16 * t + 1, 17 * t + int(rng.integers(1, t))):
            x = make_keys(dtype, case, n, rng)
            coded = _codes.encode(cupy.asarray(x))
            for descending, na_first in ORDERS:
                perm = ne.argsort(x, descending=descending, na_position=na(na_first))
                keys, pos = mergesort(coded, coded.order(descending, na_first), iota=True, ways=4)
                assert same(cupy.asnumpy(pos).astype(np.int64), perm) and same(cupy.asnumpy(coded.decode(keys)), x[perm])
                v = cupy.arange(n, dtype=cupy.uint64)[::-1].copy()
                _, sv = mergesort(coded, coded.order(descending, na_first), values=v, ways=4)
                assert same(cupy.asnumpy(sv), (n - 1 - perm).astype(np.uint64))


@pytest.mark.parametrize("order", ORDERS, ids=ORDER_IDS)
@pytest.mark.parametrize("dtype", ["int64", "float64", "uint16", "rows8", "rows16", "rows17", "rows40"])
@pytest.mark.parametrize("case", ["random", "dups", "equal", "sorted", "reverse", "special"])
def test_sorting_permutation(rng, order, dtype, case):
    """Wide byte rows go slice by slice (no sorted keys back); the others give their sorted keys."""
    descending, na_first = order
    for n in (0, 1, int(rng.integers(2, 40_000))):
        if dtype.startswith("rows") and int(dtype[4:]) > 16:
            width = int(dtype[4:])
            x = rng.choice(np.array([0, 0xFF], np.uint8), (n, width))
            if case == "equal" and n:
                x[:] = x[0]
        else:
            x = make_keys(dtype, case, n, rng)
        want = ne.argsort(x, descending=descending, na_position=na(na_first))
        for int64_out in (False, True):
            perm, keys = sorting_permutation(cupy.asarray(x), descending, na_first, int64_out=int64_out)
            assert same(cupy.asnumpy(perm).astype(np.int64), want)
            if x.ndim == 2 and x.shape[1] > 16:
                assert keys is None
            else:
                assert same(cupy.asnumpy(keys), x[want])
                assert perm.dtype == (cupy.int64 if int64_out else cupy.uint32)
