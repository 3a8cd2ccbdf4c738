"""Property tests of the splitter functions alone (dsort.core.plan), on NumPy runs.

The cuts are checked against their definition with the independent reference order
(tests/reference.py): cut sums equal the target ranks, and every element left of a cut comes
before every element right of it, ties by run order.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsort.core import plan
from dsort.engine import numpy_engine as E

from .reference import compare

ORDERS = [(d, na) for d in (False, True) for na in ("last", "first")]


def _value(run, i):
    v = run[i]
    if run.ndim == 2:
        return bytes(v)
    return float(v) if run.dtype.kind == "f" else int(v)


@st.composite
def runs_and_targets(draw):
    """P sorted runs: random sizes (empty runs, one run, skew: each run draws from its own range),
    heavy duplicates, all-equal, NaN, byte rows; the order (descending, NaN position); targets."""
    kind = draw(st.sampled_from(["int", "float", "rows", "wide rows", "wide rows tied in a word"]))
    descending, na_position = draw(st.sampled_from(ORDERS))
    p = draw(st.integers(1, 8))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    runs = []
    for _ in range(p):
        n = draw(st.sampled_from([0, 1, 2, 5, 17, 40, 100]))
        base = draw(st.integers(-50, 50))
        width = draw(st.sampled_from([1, 2, 3, 10, 1000]))
        raw = rng.integers(base, base + width, n)
        if kind == "int":
            x = raw.astype(np.int64)
        elif kind == "float":
            x = raw.astype(np.float64)
            x[rng.random(n) < draw(st.sampled_from([0.0, 0.2, 1.0]))] = np.nan
        elif kind == "rows":
            x = (raw % 3).astype(np.uint8)[:, None] * np.ones((1, 3), np.uint8)
            x[:, 2] = rng.integers(0, 2, n)
        elif kind == "wide rows":  # 10 varying byte columns: no 64-bit word holds the key (the cuts sort the windows)
            x = ((raw[:, None] + np.arange(10)) % 7).astype(np.uint8)
        else:  # the same, many keys equal in their first eight bytes and not after them
            x = np.concatenate([((raw[:, None] % 2 + np.arange(8)) % 7), rng.integers(0, 3, (n, 2))], axis=1).astype(np.uint8)
        runs.append(E.sort(x, descending=descending, na_position=na_position))
    total = sum(len(r) for r in runs)
    targets = np.array(sorted(draw(st.lists(st.integers(0, total), min_size=1, max_size=6))), np.int64)
    spacing = draw(st.one_of(st.integers(1, 12), st.just(plan.sample_spacing([len(r) for r in runs], len(targets)))))
    return runs, targets, spacing, descending, na_position


def _cuts(runs, targets, spacing, descending, na_position):
    sizes = [len(r) for r in runs]
    samples = [r[0::spacing] for r in runs]
    lo, hi = plan.windows(samples, sizes, spacing, targets, descending, na_position)
    windows = [[r[lo[t, q] : hi[t, q]] for q, r in enumerate(runs)] for t in range(len(targets))]
    return plan.exact_cuts(windows, lo, targets, descending, na_position), lo, hi


@settings(max_examples=300, deadline=None)
@given(runs_and_targets())
def test_cuts_are_exact_and_stable(case):
    runs, targets, spacing, descending, na_position = case
    cuts, lo, hi = _cuts(runs, targets, spacing, descending, na_position)
    assert cuts.shape == (len(targets), len(runs))
    assert np.array_equal(cuts.sum(axis=1), targets)
    assert (lo <= cuts).all() and (cuts <= hi).all()
    for row in cuts:
        for q, (rq, cq) in enumerate(zip(runs, row)):
            if cq == 0:
                continue
            left = _value(rq, cq - 1)  # the last element left of the cut in run q
            for r, (rr, cr) in enumerate(zip(runs, row)):
                if cr == len(rr):
                    continue
                right = _value(rr, cr)  # the first element right of the cut in run r
                c = compare(left, right, descending, na_position)
                assert c < 0 or (c == 0 and q <= r), (q, r, left, right)


@settings(max_examples=200, deadline=None)
@given(runs_and_targets())
def test_selection_and_sort_of_the_windows_agree(case):
    """The cuts by selection (one word per key, or the first eight bytes of wider keys) equal the
    cuts by a stable sort of the windows, and so do those from the windows joined (plan.Windows)."""
    runs, targets, spacing, descending, na_position = case
    fast, lo, hi = _cuts(runs, targets, spacing, descending, na_position)
    prefix = E.order_prefix
    try:
        E.order_prefix = lambda *a, **k: (None, None)
        sorted_, _, _ = _cuts(runs, targets, spacing, descending, na_position)
    finally:
        E.order_prefix = prefix
    assert np.array_equal(fast, sorted_)
    per_run = [np.concatenate([r[lo[t, q] : hi[t, q]] for t in range(len(targets))]) for q, r in enumerate(runs)]
    joined = plan.Windows.from_runs(per_run, hi - lo)
    assert np.array_equal(plan.exact_cuts(joined, lo, targets, descending, na_position), fast)


def test_order_prefix_is_the_whole_order_where_keys_fit_a_word(rng):
    x = rng.integers(0, 9, (50, 12)).astype(np.uint8)
    x[:, 4:] = 0  # 4 varying byte columns: one word
    words, whole = E.order_prefix(x)
    assert words.dtype == np.uint64 and whole is None and E.order_prefix(np.zeros((0, 12), np.uint8)) == (None, None)
    f = np.array([np.nan, -0.0, 1.5, 0.0])
    w, whole = E.order_prefix(f, na_position="first")
    assert whole is None and w[0] < w[1] == w[3] < w[2]


@pytest.mark.parametrize("descending", [False, True])
def test_order_prefix_of_wide_keys_orders_them_by_their_first_eight_bytes(rng, descending):
    """Keys of 12 varying bytes: words never contradict the order (as Python compares the bytes),
    and equal words leave the order to the whole keys given beside them."""
    x = rng.integers(0, 3, (300, 12)).astype(np.uint8)
    words, whole = E.order_prefix(x, descending)
    assert whole is not None
    want = sorted(range(len(x)), key=lambda i: bytes(x[i]), reverse=descending)
    got = sorted(range(len(x)), key=lambda i: (int(words[i]), bytes(whole[i])))
    assert [bytes(x[i]) for i in got] == [bytes(x[i]) for i in want]


@settings(max_examples=200, deadline=None)
@given(runs_and_targets())
def test_windows_stay_small(case):
    """Windows hold about 2 * P * s keys per cut in all, never a whole run."""
    runs, targets, spacing, descending, na_position = case
    _, lo, hi = _cuts(runs, targets, spacing, descending, na_position)
    p = len(runs)
    assert ((hi - lo).sum(axis=1) <= 2 * (p + 1) * spacing).all()


@pytest.mark.gpu
@settings(max_examples=100, deadline=None)
@given(runs_and_targets())
def test_windows_of_samples_on_a_gpu_are_the_hosts(case):
    """Samples on a GPU are ranked there (dsort.core.filesort.cut_runs puts them there for GPU sorts):
    the same windows as the NumPy engine's."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import cupy

    runs, targets, spacing, descending, na_position = case
    sizes = [len(r) for r in runs]
    samples = [r[0::spacing] for r in runs]
    want = plan.windows(samples, sizes, spacing, targets, descending, na_position)
    got = plan.windows([cupy.asarray(x) for x in samples], sizes, spacing, targets, descending, na_position)
    assert all(isinstance(x, np.ndarray) for x in got)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@pytest.mark.parametrize("descending, na_position", ORDERS)
def test_skewed_runs(descending, na_position):
    """One run holds every small key: all early cuts fall in that run alone."""
    small = E.sort(np.arange(1000.0), descending=descending, na_position=na_position)
    runs = [np.full(500, 5000.0), small, np.full(300, np.nan), np.array([])]
    if descending:
        runs[0], runs[1] = runs[1], runs[0]
    targets = np.array([0, 1, 250, 999, 1000, 1001, 1500, 1800])
    cuts, _, _ = _cuts(runs, targets, 7, descending, na_position)
    run = np.repeat(np.arange(4), [len(r) for r in runs])
    owner = run[E.argsort(np.concatenate(runs), descending=descending, na_position=na_position)]
    expected = np.array([np.bincount(owner[:k], minlength=4) for k in targets])
    assert np.array_equal(cuts, expected)


def test_all_equal_cuts_follow_run_order():
    runs = [np.zeros(10, np.int32), np.zeros(0, np.int32), np.zeros(7, np.int32), np.zeros(5, np.int32)]
    cuts, _, _ = _cuts(runs, np.array([3, 10, 12, 20]), 2, False, "last")
    assert cuts.tolist() == [[3, 0, 0, 0], [10, 0, 0, 0], [10, 0, 2, 0], [10, 0, 7, 3]]


def test_no_samples():
    lo, hi = plan.windows([np.array([]), np.array([])], [0, 0], 3, [0])
    assert lo.tolist() == hi.tolist() == [[0, 0]]


def test_wrong_sample_count_is_an_error():
    with pytest.raises(ValueError, match="samples per run"):
        plan.windows([np.arange(3)], [10], 3, [5])


def test_sample_positions_cover_the_run():
    spacing, sizes = 4, [3, 0, 5, 1, 9]
    got = []
    for off, n in zip(np.cumsum([0] + sizes[:-1]), sizes):
        start, step = plan.sample_positions(int(off), spacing)
        got += [int(off) + i for i in range(start, n, step)]
    assert got == list(range(0, sum(sizes), spacing))


def test_sample_spacing_balances_samples_and_windows():
    assert plan.sample_spacing([0], 1) == 1
    s = plan.sample_spacing([2**26] * 16, 15)
    assert 1000 < s < 2000  # sqrt(2^30 / (2 * 16 * 15))


def test_offsets_are_the_exclusive_prefix_sum(rng):
    for sizes in ([], [0], [5], [3, 0, 4, 0], list(rng.integers(0, 10**12, 50))):
        expected, total = [], 0
        for s in sizes:
            expected.append(total)
            total += int(s)
        got = plan.offsets(sizes)
        assert got.dtype == np.int64 and got.tolist() == expected
    assert plan.offsets(np.array([True, False, True])).tolist() == [0, 1, 1]
    assert plan.interior_targets([2, 3, 0, 4]).tolist() == [2, 5, 5] and plan.interior_targets([7]).tolist() == []


@pytest.mark.parametrize("total,outputs", [(0, 3), (1, 4), (10, 3), (9, 3), (5, 1)])
def test_balanced(total, outputs):
    sizes = plan.balanced(total, outputs)
    assert len(sizes) == outputs and sum(sizes) == total and max(sizes) - min(sizes) <= 1


def test_pass_spacings_are_each_cuts_own():
    """One pass: the sample spacing of all runs and ranges. Two passes: the runs' spacing is for
    a group's own cuts, the chains' for the final ones; both coarser than one spacing for all,
    so the cuts hold several times fewer samples."""
    from dsort.core import plan

    sizes = [16_000] * 1756
    assert plan.pass_spacings(sizes, 1756) == (plan.sample_spacing(sizes, 1755), 0)
    groups = plan.pass_groups(len(sizes), 1024)
    group_ranges = tuple(plan.ranges(sum(sizes[a:b]), 16_000) for a, b in groups)
    runs, chains = plan.pass_spacings(sizes, 1756, groups, group_ranges)
    a, b = groups[0]
    assert runs == plan.sample_spacing(sizes[a:b], len(group_ranges[0]) - 1)
    assert chains == plan.sample_spacing([sum(sizes[a:b]) for a, b in groups], 1755)
    assert min(runs, chains) >= 4 * plan.sample_spacing(sizes, 1755)
