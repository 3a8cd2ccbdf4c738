"""Splitters: exact, stable cut points of many sorted runs, from small data only.

A *run* is a sorted sequence (one sorted chunk, or several chunks that together are sorted). The
global order of all elements is the order of their keys, ties broken by ``(run index, position in
the run)``: with runs numbered in input order this is exactly a stable sort of the concatenated
input. For a target rank ``k`` the *cut* is the vector ``c`` (one entry per run) such that the
first ``c[q]`` elements of every run ``q`` are exactly the ``k`` first elements of that order:
``sum(c) == k`` and everything left of the cut comes before everything right of it.

Two levels, so no run ever travels whole:

1. :func:`sample_spacing` picks a spacing ``s``; every run sends the keys at its positions
   ``0, s, 2s, ...`` (:func:`sample_positions`). :func:`windows` ranks those samples against each
   other, which bounds the global rank of every sample to within ``(P - 1) * s``, and from that
   bounds each cut of each run to a window ``[lo, hi)`` of about ``2 * P * s`` elements in all.
2. Every run sends the keys inside its windows; :func:`exact_cuts` finds the exact cuts by a
   selection in each (small) union of windows (a stable sort of it where keys do not fit a word).

Bytes sent to the coordinator: ``n / s`` sample keys plus about ``2 * P * s`` window keys per cut;
:func:`sample_spacing` balances the two. Everything here works on small NumPy arrays (samples and
windows arrive as NumPy) through :mod:`dsort.engine.numpy_engine`, so the order (NaN position,
descending, byte keys) is the engine's; :func:`windows` also ranks samples a caller has put on a
GPU there, through the CuPy engine (the same order), and hands back NumPy.
"""

from __future__ import annotations

import math

import numpy as np

from .. import engine as engines
from ..engine import device as dev
from ..engine import numpy_engine as E


def offsets(sizes) -> np.ndarray:
    """Where each of consecutive pieces of ``sizes`` starts: the exclusive prefix sum
    ``[0, s0, s0 + s1, ...]``, one entry per piece (int64; empty for no pieces)."""
    s = np.asarray(sizes, dtype=np.int64).reshape(-1)
    return np.cumsum(s) - s


def sample_spacing(run_sizes, n_targets: int) -> int:
    """The sample spacing ``s`` for runs of ``run_sizes`` and ``n_targets`` cuts.

    Samples cost ``n / s`` keys, windows about ``2 * P * s`` keys per cut; the sum is least at
    ``s = sqrt(n / (2 * P * n_targets))``.
    """
    n = int(sum(run_sizes))
    p = max(1, len(run_sizes))
    return max(1, math.isqrt(n // max(1, 2 * p * max(1, n_targets))))


def part_spacing(rows: int, n_targets: int) -> int:
    """A run's own sample spacing, chosen before the other runs' sizes are known: the power of
    two at most :func:`sample_spacing` of runs all of its size. The common spacing of runs that
    each took theirs is the largest of them, a multiple of every one, so each run's own sample
    holds its sample at the common spacing (every ``common // own``-th key)."""
    s = sample_spacing([rows], n_targets)
    return 1 << (s.bit_length() - 1)


def sample_positions(offset: int, spacing: int) -> tuple[int, int]:
    """``(start, step)``: a chunk at ``offset`` of its run holds the run's sample positions
    ``offset + start``, ``offset + start + step``, ... (up to its end)."""
    return (-offset) % spacing, spacing


def _bounds_at(idx, m, own_run, own_pos, counts, sizes, spacing, lower):
    """Per-run rank bounds ``(len(idx), P)`` of the sorted samples at ``idx`` (-1: before all,
    len: after all), where ``m[i, q]`` samples of run ``q`` come before sample ``idx[i]``, which
    is sample ``own_pos[i]`` (a row) of run ``own_run[i]`` where it is one.

    Its rank in another run ``q`` lies in ``[(m - 1) * s + 1, min(m * s, n_q)]`` (0 when
    ``m == 0``); in its own run it is exact.
    """
    if lower:
        b = np.where(m > 0, (m - 1) * spacing + 1, 0)
    else:
        b = np.where(m == counts, sizes, m * spacing)
    b = b.astype(np.int64)
    total = counts.sum()
    inside = np.nonzero((idx >= 0) & (idx < total))[0]
    b[inside, own_run[inside]] = own_pos[inside]
    b[idx < 0] = 0
    b[idx >= total] = sizes
    return b


def windows(samples, run_sizes, spacing, targets, descending=False, na_position="last"):
    """Windows around the cuts, from the regular samples of every run.

    ``samples[q]`` holds the keys at positions ``0, s, 2s, ...`` of run ``q`` (in run order; so
    ``ceil(n_q / s)`` of them), NumPy or CuPy: CuPy samples are ranked on their GPU, only the
    windows come back. Returns ``(lo, hi)``, int64 NumPy arrays of shape ``(len(targets), P)``:
    the cut of target ``k`` in run ``q`` lies in ``[lo[t, q], hi[t, q]]``.

    A sample's rank among all samples, split by run, bounds its global rank ``R`` to
    ``[r_lo, r_hi]``; the last sample with ``r_hi <= k`` (``R <= k``) and the first with
    ``r_lo >= k`` (``R >= k``) enclose the cut in every run.
    """
    sizes = np.asarray(run_sizes, dtype=np.int64).reshape(-1)
    targets = np.asarray(targets, dtype=np.int64).reshape(-1)
    p, s = len(sizes), int(spacing)
    counts = -(-sizes // s)
    got = np.array([len(x) for x in samples], dtype=np.int64)
    if len(samples) != p or not np.array_equal(got, counts):
        raise ValueError(
            f"expected {counts.tolist()} samples per run at spacing {s}, got {got.tolist()}"
        )
    if targets.size and (targets.min() < 0 or targets.max() > sizes.sum()):
        raise ValueError(f"targets must lie in [0, {int(sizes.sum())}]")
    nonempty = [x for x in samples if len(x)]
    if not nonempty:
        z = np.zeros((len(targets), p), np.int64)
        return z, z.copy()
    e = engines.get(nonempty[0])
    xp = e.xp
    order = e.argsort(
        xp.concatenate(nonempty),
        descending=descending,
        na_position=na_position,
        runs=[len(x) for x in nonempty],
    )
    n = len(order)
    starts = offsets(counts)
    full = counts > 0
    # Sorted sample t, sample j of run q: before it, t - j samples of other runs, whose ranks total
    # at most s * (t - j) and at least that less s - 1 for each first sample of a run among them;
    # the exhausted runs' last samples stand for fewer than s rows (``short``). Counting q's own
    # j samples exactly, its global rank lies in [s * t - (s - 1) * (F - 1), s * t - G]: F the
    # first samples up to and including t, G the shortfalls before t. Both rise by at least 1 from
    # one sample to the next, so they are sorted. The flags are set where the samples were given,
    # then read in sorted order.
    is_first = xp.zeros(n, bool)
    is_first[xp.asarray(starts[full])] = True
    short = xp.zeros(n, np.int64)
    short[xp.asarray((starts + counts - 1)[full])] = xp.asarray((counts * s - sizes)[full])
    is_first, short = is_first[order], short[order]
    st = xp.arange(0, s * n, s, dtype=np.int64)
    r_lo = st - (s - 1) * (xp.cumsum(is_first, dtype=np.int64) - 1)
    r_hi = st - (xp.cumsum(short) - short)
    t = xp.asarray(targets)
    idx = xp.concatenate(
        [xp.searchsorted(r_hi, t, side="right") - 1, xp.searchsorted(r_lo, t, side="left")]
    )
    # how many of each run's samples come before each of those: each sample's place in the sorted
    # order, offset by n times its run, rises run by run (a run's samples are in order and the sort
    # stable), so one search per (sample, run) counts them
    place = xp.empty_like(order)
    place[order] = xp.arange(n, dtype=np.int64)
    run_of = xp.searchsorted(
        xp.asarray(starts + counts), xp.arange(n, dtype=np.int64), side="right"
    )
    runs = xp.arange(p, dtype=np.int64)
    m = xp.searchsorted(
        place + n * run_of, (xp.clip(idx, 0, n)[:, None] + n * runs[None, :]).reshape(-1)
    ).reshape(-1, p)
    m = m - xp.asarray(starts)[None, :]
    given = order[xp.clip(idx, 0, n - 1)]
    own_run = run_of[given]
    own_pos = (given - xp.asarray(starts)[own_run]) * s
    idx, m, own_run, own_pos = (dev.to_host(x) for x in (idx, m, own_run, own_pos))
    k = len(targets)
    lo = _bounds_at(idx[:k], m[:k], own_run[:k], own_pos[:k], counts, sizes, s, lower=True)
    hi = _bounds_at(idx[k:], m[k:], own_run[k:], own_pos[k:], counts, sizes, s, lower=False)
    return lo, hi


class Windows:
    """Every run's keys inside its window around every cut, joined cut by cut (run order within a
    cut): ``keys`` and ``lengths[t, q]`` (run ``q``'s keys around cut ``t``). What
    :func:`exact_cuts` reads, without one array per window (there are runs x cuts of them)."""

    def __init__(self, keys, lengths):
        self.keys, self.lengths = keys, np.asarray(lengths, np.int64)
        self._starts = offsets(self.lengths.sum(axis=1))

    @classmethod
    def from_runs(cls, per_run: list, lengths) -> Windows:
        """From each run's windows joined cut by cut (``per_run[q]``: its windows around cut 0,
        then 1, ...): the same keys reordered cut by cut."""
        lengths = np.asarray(lengths, np.int64)
        flat = np.concatenate(per_run) if per_run else np.empty((0,), np.uint8)
        # window (t, q)'s start in flat
        by_run = offsets(lengths.T.reshape(-1)).reshape(lengths.shape[1], lengths.shape[0]).T
        by_cut = offsets(lengths.reshape(-1)).reshape(lengths.shape)  # and where it goes
        at = np.repeat((by_run - by_cut).reshape(-1), lengths.reshape(-1)) + np.arange(
            int(lengths.sum()), dtype=np.int64
        )
        return cls(flat[at], lengths)

    def __len__(self) -> int:
        return self.lengths.shape[0]

    def of(self, t: int):
        """``(keys, lengths)`` of cut ``t``'s windows."""
        a = int(self._starts[t])
        return self.keys[a : a + int(self.lengths[t].sum())], self.lengths[t]


def exact_cuts(window_keys, lo, targets, descending=False, na_position="last"):
    """Exact cuts from the windows: ``window_keys`` (a :class:`Windows`, or lists ``[t][q]``) holds
    run ``q``'s keys at positions ``lo[t, q]`` up to ``hi[t, q]`` (NumPy). Returns the cuts, int64
    of shape ``(len(targets), P)``.

    Everything before ``lo`` comes before the cut; of the window elements, the first
    ``k - sum(lo)`` in (key, run, position) order complete it: found by a selection on one word per
    key (:func:`_first_by_selection`; keys wider than a word by their first eight bytes, ties in
    those sorted whole), else by a stable sort of the windows concatenated in run order.
    """
    lo = np.asarray(lo, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64).reshape(-1)
    cuts = lo.copy()
    for i, k in enumerate(targets):
        if isinstance(window_keys, Windows):
            keys, lengths = window_keys.of(i)
        else:
            parts = window_keys[i]
            lengths = np.array([len(x) for x in parts], dtype=np.int64)
            keys = np.concatenate(parts) if int(lengths.sum()) else None
        need = int(k - lo[i].sum())
        if need < 0 or need > lengths.sum():
            raise ValueError(
                f"target {int(k)} lies outside its windows: sampling bounds were wrong"
            )
        if need == 0:
            continue
        words, whole = E.order_prefix(keys, descending, na_position)
        if words is not None:
            cuts[i] += _first_by_selection(words, lengths, need, whole)
            continue
        run = np.repeat(np.arange(len(lengths)), lengths)
        order = E.argsort(keys, descending=descending, na_position=na_position)
        cuts[i] += np.bincount(run[order[:need]], minlength=len(lengths))
    return cuts


def _first_by_selection(words, lengths, need: int, whole=None):
    """How many of each window's keys are among the first ``need`` of them all in (key, run)
    order, the windows' order words (:func:`~dsort.engine.numpy_engine.order_prefix`) concatenated,
    each window sorted: the ``need``-th smallest word found by a selection, then every key below
    it, and of those equal to it the first in run order; where the words are the keys' first eight
    bytes only (``whole``: the keys' order strings), those equal to it sorted by the whole key
    first. Linear, where a sort of the windows is not."""
    v = np.partition(words, need - 1)[need - 1]
    if words.dtype.kind == "f" and np.isnan(v):  # NaN: after every number, equal to every NaN
        equal = np.isnan(words)
        below = ~equal
    else:
        below, equal = words < v, words == v
    ends = np.cumsum(lengths)

    def per_window(mask):
        c = np.concatenate([[0], np.cumsum(mask, dtype=np.int64)])
        return c[ends] - c[ends - lengths]

    less = per_window(below)
    left = need - int(less.sum())
    if whole is not None:  # the ties in the first eight bytes, in (whole key, run, position) order
        tied = np.flatnonzero(equal)
        first = tied[np.argsort(whole[tied], kind="stable")[:left]]
        return less + np.bincount(
            np.searchsorted(ends, first, side="right"), minlength=len(lengths)
        )
    ties = per_window(equal)
    return less + np.clip(left - (np.cumsum(ties) - ties), 0, ties)


def boundaries(run_sizes, cuts):
    """All cut rows of a merge: a row of zeros, the interior ``cuts``, then the run sizes; output
    chunk ``t`` takes positions ``[b[t, q], b[t + 1, q])`` of every run ``q``."""
    sizes = np.asarray(run_sizes, dtype=np.int64).reshape(1, -1)
    cuts = np.asarray(cuts, dtype=np.int64).reshape(-1, sizes.shape[1])
    return np.concatenate([np.zeros_like(sizes), cuts, sizes])


def interior_targets(chunk_sizes):
    """Target ranks of the boundaries between output chunks of the given sizes."""
    return offsets(chunk_sizes)[1:]


def run_count(
    pieces: int,
    threads: int,
    per_thread: int,
    nbytes=None,
    min_bytes: int = 1,
    max_bytes=None,
    whole_bytes=None,
    most_per_thread: int = 4,
) -> int:
    """How many runs ``pieces`` consecutive input pieces (chunks, partitions) are sorted into:
    ``per_thread`` for each of ``threads`` worker threads (all of them busy), more where a run
    would hold more than ``max_bytes`` of the ``nbytes`` in all, fewer where one would hold less
    than ``min_bytes``; at least one, and never more than the pieces (a piece is not split).
    Pieces of ``whole_bytes`` or more (on average) are runs of their own, up to
    ``most_per_thread`` runs a thread: each is sorted where it lies, as grouping them would move
    all but one of a group's pieces to another worker (grouped, large chunks of host data made two
    GPU workers slower than one: BENCHMARKS.md section 7).
    Where ``nbytes`` is None (a frame's partitions have no known size) only the threads count.
    The count follows the data and the workers, not the partitioning: a sort's tasks are then
    O(pieces + outputs), and its slices (runs x merge groups) as few as the workers need."""
    want = max(1, int(per_thread) * int(threads))
    if nbytes is not None:
        if max_bytes:
            want = max(want, -(-int(nbytes) // int(max_bytes)))
        if whole_bytes and int(nbytes) >= int(pieces) * int(whole_bytes):
            want = max(want, int(most_per_thread) * int(threads))
        want = min(want, max(1, int(nbytes) // max(int(min_bytes), 1)))
    return int(max(1, min(want, pieces)))


def groups(sizes, count: int) -> list:
    """``[(a, b), ...]``: the pieces of ``sizes`` in at most ``count`` consecutive groups of about
    equal total size (pieces ``a`` to ``b - 1``; each group one piece at least; each cut between
    groups on the nearer side of the piece that reaches its share, so a piece bigger than a
    share makes a group of its own). Pieces of no size at all are grouped by count."""
    n = len(sizes)
    if not n:
        return []
    count = max(1, min(int(count), n))
    ends = np.cumsum(np.asarray(sizes, dtype=np.float64))
    total = float(ends[-1])
    if total <= 0:
        ends, total = np.arange(1, n + 1, dtype=np.float64), float(n)
    bounds = [0]
    for k in range(1, count):
        target = k * total / count
        j = int(np.searchsorted(ends, target, side="left"))  # the piece that reaches the target
        before = float(ends[j - 1]) if j else 0.0
        # cut on its nearer side
        at = j if target - before < float(ends[min(j, n - 1)]) - target else j + 1
        at = min(max(at, bounds[-1] + 1), n - (count - k))
        bounds.append(at)
    bounds.append(n)
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]


def pieces(sizes, groups):
    """``(piece, group, lo, hi)`` for every piece of ``sizes`` in consecutive ``groups``
    (:func:`groups`): its rows ``[lo, hi)`` of its group's."""
    out = []
    for g, (a, b) in enumerate(groups):
        lo = 0
        for i in range(a, b):
            out.append((i, g, lo, lo + int(sizes[i])))
            lo += int(sizes[i])
    return out


def group_sums(sizes, starts) -> tuple:
    """Total size of every group of consecutive ``sizes``, the groups beginning at ``starts``."""
    ends = list(starts[1:]) + [len(sizes)]
    return tuple(int(sum(sizes[a:b])) for a, b in zip(starts, ends))


def blocks(lengths, rows_per_block: int):
    """``[(file index, first row, rows)]`` covering files of ``lengths`` rows in blocks of at most
    ``rows_per_block`` rows, no block across two files."""
    rows_per_block = max(int(rows_per_block), 1)
    return [
        (f, s, min(rows_per_block, n - s))
        for f, n in enumerate(lengths)
        for s in range(0, n, rows_per_block)
    ]


def balanced(total: int, parts: int) -> tuple:
    """Sizes of ``parts`` pieces of ``total`` rows, equal to within one row (the first ones
    larger)."""
    parts = max(int(parts), 1)
    base, extra = divmod(int(total), parts)
    return tuple(base + (1 if t < extra else 0) for t in range(parts))


def pass_groups(runs: int, max_runs: int) -> tuple:
    """``((first run, end run), ...)``: ``runs`` runs in consecutive groups, equal to within one
    run, each merged by a first pass into one chained run that the final pass merges with the
    others; ``()`` where one pass (at most ``max_runs``) merges them all. About sqrt(runs) groups of
    sqrt(runs) runs: with ranges of about a run's rows (the memory bounds both), a group of F runs
    is cut into F slices a run and the final pass into runs / F slices a chain, R x F + R x R / F
    slices in all, least at F = sqrt(R) (each slice costs a read and its bookkeeping: too few groups
    made the reads of millions of slices most of a sort's time, BENCHMARKS.md section 2)."""
    if runs <= max_runs:
        return ()
    count = max(-(-runs // max(1, max_runs)), math.isqrt(runs - 1) + 1)
    sizes = balanced(runs, count)
    return tuple((int(a), int(a + b)) for a, b in zip(offsets(sizes), sizes))


def pass_spacings(run_sizes, ranges: int, groups=(), group_ranges=()) -> tuple[int, int]:
    """``(the runs' sample spacing, the chains')`` for runs of ``run_sizes`` cut into ``ranges``
    output ranges: one pass, :func:`sample_spacing` of them all (the chains' 0: none); with a
    first pass over ``groups`` (each cut into its ``group_ranges``), the runs' spacing for the
    largest group's own cuts and the chains' for the final cuts over as many chains as groups.
    The cuts hold every sample of their runs: spacing for the few runs and ranges of each cut, not
    for all of them, keeps that memory down (``sqrt(2 x runs x ranges x rows)`` samples)."""
    if not groups:
        return sample_spacing(run_sizes, max(ranges - 1, 1)), 0
    biggest = max(range(len(groups)), key=lambda g: groups[g][1] - groups[g][0])
    a, b = groups[biggest]
    runs = sample_spacing(run_sizes[a:b], max(len(group_ranges[biggest]) - 1, 1))
    chains = [sum(run_sizes[a:b]) for a, b in groups]
    return runs, sample_spacing(chains, max(ranges - 1, 1))


def ranges(n: int, rows_per_range: int) -> tuple:
    """Output range sizes: ``n`` rows in equal ranges (to within one row) of at most
    ``rows_per_range``."""
    return balanced(n, -(-n // max(int(rows_per_range), 1))) if n else ()
