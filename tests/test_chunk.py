"""dsort.core.chunk: what one task of the in-memory sort does, called directly (no dask), against NumPy's
stable sort of the whole."""

import numpy as np
import pytest

from .conftest import HAS_GPU
from dsort.core import chunk, plan

NA = ["last", "first"]


def _keys(rng, kind, n):
    if kind == "float":  # duplicates and NaN
        x = rng.integers(-4, 4, n).astype(np.float64)
        x[rng.random(n) < 0.2] = np.nan
        return x
    if kind == "equal":
        return np.full(n, 7, np.int32)
    return rng.integers(-50, 50, n).astype(np.int64)


def _stable_order(keys, descending, na_position):
    """The positions of a stable sort as pandas orders it (NaN apart, ties in input order)."""
    import pandas as pd

    return pd.Series(keys).sort_values(ascending=not descending, kind="stable", na_position=na_position).index.to_numpy()


def _runs(rng, keys, pieces, descending, na_position):
    """``keys`` cut into ``pieces`` consecutive chunks, each sorted by :func:`chunk.local_sort`
    carrying global positions: the parts of one-chunk runs."""
    cuts = np.sort(rng.integers(0, len(keys) + 1, pieces - 1))
    chunks = np.split(keys, cuts)
    offsets = plan.offsets([len(c) for c in chunks]).tolist()
    return [chunk.local_sort([c], None, off, True, descending, na_position) for c, off in zip(chunks, offsets)], offsets


@pytest.mark.parametrize("na_position", NA)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kind", ["int", "float", "equal"])
@pytest.mark.parametrize("n", [0, 1, 2, 777])
@pytest.mark.parametrize("pieces", [1, 3])
def test_local_sort_carries_global_positions(rng, kind, n, descending, na_position, pieces):
    """Consecutive chunks (empty ones too) sorted together equal a stable sort of them joined."""
    keys = _keys(rng, kind, n)
    chunks = np.split(keys, np.sort(rng.integers(0, n + 1, pieces - 1)))
    keys_out, positions = chunk.local_sort(chunks, None, 100, True, descending, na_position)
    order = _stable_order(keys, descending, na_position)
    np.testing.assert_array_equal(positions, order + 100)
    np.testing.assert_array_equal(keys_out, keys[order])
    values = rng.random(n)
    k, v = chunk.local_sort(chunks, np.split(values, np.cumsum([len(c) for c in chunks])[:-1]), 0, False, descending, na_position)
    np.testing.assert_array_equal(v, values[order])
    assert chunk.local_sort(chunks, None, 0, False, descending, na_position)[1] is None


@pytest.mark.parametrize("na_position", NA)
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("kind", ["int", "float", "equal"])
@pytest.mark.parametrize("pieces", [1, 2, 5])
def test_splitters_take_and_merge_equal_a_stable_sort(rng, kind, pieces, descending, na_position):
    """The whole per-chunk pipeline of one merge, by hand: samples, bounds, windows, splitters,
    the slices each output chunk takes, their merge; the output chunks concatenated equal NumPy's
    stable sort, positions (ties in input order) included, and have the asked sizes."""
    n = 600
    keys = _keys(rng, kind, n)
    parts, offsets = _runs(rng, keys, pieces, descending, na_position)
    runs_sizes = [len(p[0]) for p in parts]
    out_sizes = [150, 0, 1, 449]
    targets = plan.interior_targets(out_sizes)
    spacing = plan.sample_spacing(runs_sizes, len(targets))
    # each run is one part at offset 0 of its run
    samples = [[chunk.sample(p, 0, spacing)] for p in parts]
    windows = chunk.bounds(samples, runs_sizes, spacing, targets, descending, na_position)
    wins = [[chunk.window(p, 0, windows, q)] for q, p in enumerate(parts)]
    rows = chunk.splitters(wins, windows, runs_sizes, targets, descending, na_position)
    assert rows.shape == (len(out_sizes) + 1, pieces)
    out = []
    for t, size in enumerate(out_sizes):
        pieces_t = [[chunk.take(p, 0, rows, t, q)] for q, p in enumerate(parts)]
        k, v = chunk.merge_runs(pieces_t, descending, na_position)
        assert len(k) == size
        out.append((k, v))
    order = _stable_order(keys, descending, na_position)
    np.testing.assert_array_equal(np.concatenate([v for _, v in out]), order)
    np.testing.assert_array_equal(np.concatenate([k for k, _ in out]), keys[order])


def test_take_clips_to_its_part():
    """A run held as two parts at offsets 0 and 4: each part gives only its own rows of a range."""
    keys = np.arange(10)
    parts = [(keys[:4], keys[:4] * 10), (keys[4:], keys[4:] * 10)]
    rows = np.array([[0], [3], [7], [10]])  # output chunks [0, 3), [3, 7), [7, 10) of the one run
    got = [[chunk.take(p, off, rows, t, 0) for p, off in zip(parts, (0, 4))] for t in range(3)]
    assert [[list(k) for k, _ in g] for g in got] == [[[0, 1, 2], []], [[3], [4, 5, 6]], [[], [7, 8, 9]]]
    assert list(got[1][1][1]) == [40, 50, 60]
    first = got[0][0][0]
    first[0] = 99  # a copy: no two task results share a buffer
    assert keys[0] == 0


def test_window_is_the_parts_share_of_each_window():
    keys = np.arange(100, 110)
    part = (keys[5:], None)  # positions 5..9 of its run
    lo = np.array([[2, 0], [6, 0]])
    hi = np.array([[7, 0], [12, 0]])
    got = chunk.window(part, 5, (lo, hi), 0)
    assert [list(w) for w in got] == [[105, 106], [106, 107, 108, 109]]


@pytest.mark.parametrize("descending", [False, True])
def test_merge_runs_keeps_run_order_for_ties_and_joins_slices(descending):
    a = [(np.array([1, 1]), np.array([0, 1])), (np.array([2]), np.array([2]))]  # one run in two slices
    b = [(np.array([1, 2]), np.array([10, 11]))]
    c = [(np.array([], np.int64), np.array([], np.int64))]
    if descending:
        a = [(np.array([2, 1]), np.array([0, 1])), (np.array([1]), np.array([2]))]
        b = [(np.array([2, 1]), np.array([10, 11]))]
    k, v = chunk.merge_runs([a, c, b], descending, "last")
    if descending:
        assert list(k) == [2, 2, 1, 1, 1] and list(v) == [0, 10, 1, 2, 11]
    else:
        assert list(k) == [1, 1, 1, 2, 2] and list(v) == [0, 1, 10, 2, 11]


def test_merge_runs_of_wide_values_gathers_them_once(rng):
    """Values wider than 8 bytes a row ride as positions through the merges, then are gathered:
    the same result as narrow values."""
    keys = [np.sort(rng.integers(0, 5, n)) for n in (30, 0, 17, 41)]
    payload = [rng.integers(0, 256, (len(k), 12), dtype=np.uint8) for k in keys]
    k, v = chunk.merge_runs([[(kk, pp)] for kk, pp in zip(keys, payload)], False, "last")
    cat_k, cat_p = np.concatenate(keys), np.concatenate(payload)
    order = np.argsort(cat_k, kind="stable")
    np.testing.assert_array_equal(k, cat_k[order])
    np.testing.assert_array_equal(v, cat_p[order])


def test_merge_runs_of_one_part_does_not_alias_it():
    keys = np.array([1, 2, 3])
    k, v = chunk.merge_runs([[(keys, None)]], False, "last")
    assert v is None and list(k) == [1, 2, 3] and not np.shares_memory(k, keys)


@pytest.mark.parametrize("na_position", NA)
def test_merge_order_positions_index_the_concatenation(rng, na_position):
    keys = [np.sort(_keys(rng, "float", n)) for n in (5, 0, 9, 1)]
    keys = [k[_stable_order(k, False, na_position)] for k in keys]
    merged, positions = chunk.merge_order(keys, False, na_position)
    cat = np.concatenate(keys)
    order = _stable_order(cat, False, na_position)
    np.testing.assert_array_equal(positions, order)
    np.testing.assert_array_equal(merged, cat[order])
    one, pos = chunk.merge_order(keys[:1], False, na_position)
    np.testing.assert_array_equal(pos, np.arange(5))


ON_GPU = pytest.param("gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")])


@pytest.mark.parametrize("where", ["cpu", ON_GPU])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("na_position", NA)
@pytest.mark.parametrize("pairwise", [1, 1 << 30])
def test_merge_keys_is_the_stable_merge_bit_for_bit(rng, monkeypatch, where, descending, na_position, pairwise):
    """Keys alone merged (pairwise on a GPU from ``PAIRWISE_KEYS`` keys a slice, else the stable
    sort of the concatenation): the concatenation in stable order, bit for bit (-0.0 and 0.0 tie
    and keep their slice order), for 1 to 5 slices, empty ones among them."""
    if where == "cpu" and pairwise == 1:
        pytest.skip("the CPU merges by one stable sort whatever PAIRWISE_KEYS says")
    monkeypatch.setattr(chunk, "PAIRWISE_KEYS", pairwise)
    for count in range(1, 6):
        keys = []
        for _ in range(count):
            x = rng.choice([-0.0, 0.0, 1.5, -2.0, np.inf, np.nan], int(rng.integers(0, 40)))
            keys.append(x[_stable_order(x, descending, na_position)])
        cat = np.concatenate(keys)
        want = cat[_stable_order(cat, descending, na_position)]
        given = keys
        if where == "gpu":
            import cupy

            given = [cupy.asarray(k) for k in keys]
        got = chunk.merge_keys(given, descending, na_position)
        got = got.get() if where == "gpu" else got
        np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


def test_sample_takes_the_runs_regular_positions():
    keys = np.arange(20)
    # spacing 3 over a run whose part starts at offset 7: run positions 9, 12, 15, 18, ... in it
    got = chunk.sample((keys[7:17], None), 7, 3)
    assert list(got) == [9, 12, 15]


def test_keys_and_values_of_are_copies():
    part = (np.arange(3), np.arange(3) * 2)
    k, v = chunk.keys_of(part), chunk.values_of(part, host=True)
    assert not np.shares_memory(k, part[0]) and not np.shares_memory(v, part[1])
    assert list(v) == [0, 2, 4]


def test_on_gpu_without_a_gpu_says_so():
    from dsort.engine import device

    if device.has_gpu():
        pytest.skip("a GPU is visible")
    with pytest.raises(RuntimeError, match="device='gpu' needs CuPy"):
        chunk.on_gpu(np.arange(3))
