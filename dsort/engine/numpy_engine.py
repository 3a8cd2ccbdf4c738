"""The NumPy engine: one array on the CPU, no Python loop over elements.

Every function follows the order documented in :mod:`dsort.engine.keys` (stable; NaN last by
default, first with ``na_position="first"``; ``-0.0 == 0.0``; byte keys as unsigned bytes).

The trick used throughout is an *order key*: an array that NumPy's own stable ascending sort puts
in the wanted order. For the common cases it is the keys themselves (ascending) or a cheap
involution of them (``~x`` for integers, ``-x`` for floats, inverted bytes), so a keys-only sort
sorts the order key and applies the involution again; only floats with NaN first need an argsort.
"""

from __future__ import annotations

import numpy as np

from . import host
from . import keys as K

name = "numpy"
xp = np


def _as_bytes(x: np.ndarray) -> np.ndarray:
    """Byte keys (``S``/``V`` or byte rows) as a 1-D ``S<n>`` array: NumPy compares those as
    unsigned bytes (trailing NULs are padding of a fixed width, so the order equals ``memcmp``)."""
    width = x.shape[1] if x.ndim == 2 else x.dtype.itemsize
    return np.ascontiguousarray(x).view(f"S{width}").reshape(-1)


def _invert_bytes(s: np.ndarray) -> np.ndarray:
    return np.invert(s.view(np.uint8)).view(s.dtype)


def _float_bits_key(x: np.ndarray, descending: bool) -> np.ndarray:
    """Floats as unsigned integers in the wanted order, NaN first (0)."""
    width = x.dtype.itemsize * 8
    u = np.dtype(f"u{x.dtype.itemsize}").type
    bits = (x + x.dtype.type(0.0)).view(u)  # -0.0 + 0.0 == +0.0: one encoding for zero
    negative = (bits >> u(width - 1)).astype(bool)
    key = np.where(negative, ~bits, bits | u(1 << (width - 1)))
    if descending:
        key = ~key
    key[np.isnan(x)] = 0
    return key


def _order_key(x: np.ndarray, descending: bool, na_first: bool) -> tuple[np.ndarray, bool]:
    """Return ``(k, involution)``: ``k`` sorts stably ascending into the wanted order.

    ``involution`` is True when applying this same function to ``k`` gives ``x`` back, so a
    keys-only sort needs no argsort. ``k`` may be ``x`` itself (ascending): never sort it in place.
    """
    kind = x.dtype.kind
    if K.is_byte_rows(x):
        kind = "S"
    if kind in "biu":
        return (~x if descending else x), True
    if kind == "f":
        if na_first:
            return _float_bits_key(x, descending), False
        # NumPy sorts NaN last, and -NaN is NaN: negation keeps NaN last when descending.
        return (-x if descending else x), True
    s = _as_bytes(x)
    return (_invert_bytes(s) if descending else s), True


def _undo(k: np.ndarray, descending: bool, like: np.ndarray) -> np.ndarray:
    """Inverse of an involutive order key (sorted in place beforehand), spelled like ``like``."""
    kind = k.dtype.kind
    if descending:
        if kind in "biu":
            np.invert(k, out=k)
        elif kind == "f":
            np.negative(k, out=k)
        else:
            k = _invert_bytes(k)
    if K.is_byte_rows(like):
        return k.view(np.uint8).reshape(len(k), like.shape[1])
    return k.view(like.dtype) if kind == "S" else k


def _packed(s: np.ndarray) -> np.ndarray | None:
    """Byte keys (``S<n>``) as uint64 of the same order when at most 8 of their byte columns
    vary: a column equal in every key decides no comparison, and NumPy sorts integers faster than
    byte strings (a 9-byte key of a number and its missing-value flag, say). Else None."""
    rows = s.view(np.uint8).reshape(len(s), s.dtype.itemsize)
    width = rows.shape[1]
    # Column by column (no n x width temporaries): a column that varies in a sparse sample of the
    # rows varies; only the others need every row read (a key's flag byte, say).
    sample = rows[:: max(1, len(rows) // 4096)]
    varying = [j for j in range(width) if (sample[:, j] != rows[0, j]).any()]
    if len(varying) > 8 or not np.little_endian:
        return None
    varying = sorted(
        varying + [j for j in range(width) if j not in varying and (rows[:, j] != rows[0, j]).any()]
    )
    if len(varying) > 8:
        return None
    if width >= 8 and varying and varying[-1] - varying[0] < 8:
        # 8 bytes of each key that hold every varying one (the others are equal in every key): one
        # big-endian word per key, read in place and byte-swapped in one pass
        buf = np.ascontiguousarray(rows)
        words = np.ndarray(
            (len(s),), ">u8", buffer=buf, offset=min(varying[0], width - 8), strides=(width,)
        )
        return words.astype(np.uint64)
    word = np.zeros((len(s), 8), np.uint8)
    for i, j in enumerate(reversed(varying)):  # the first varying byte the most significant
        word[:, i] = rows[:, j]
    return word.view(np.uint64).reshape(-1)


def _argsort(k: np.ndarray, runs=None) -> np.ndarray:
    """A stable argsort of an order key, byte keys packed into integers where they fit, else
    sorted by their first eight bytes (:func:`_argsort_wide`). ``runs``: :func:`argsort`'s."""
    if k.dtype.kind == "S" and len(k) > 1:
        packed = _packed(k)
        if packed is None:
            return _argsort_wide(k, runs)
        k = packed
    if k.dtype.kind in "iu" and k.dtype.itemsize >= 4 and len(k) > 1:
        return _argsort_integers(k, runs)
    return np.argsort(k, kind="stable")


def _first_word(s: np.ndarray) -> np.ndarray:
    """The first eight bytes of byte keys ``s`` (``S<n>``, n >= 8) as big-endian integers (uint64):
    their order never contradicts the keys' (equal words: the rest decides)."""
    return np.ndarray(
        (len(s),), ">u8", buffer=np.ascontiguousarray(s), strides=(s.dtype.itemsize,)
    ).astype(np.uint64)


def _varying_word(s: np.ndarray) -> np.ndarray:
    """The first eight byte columns of byte keys ``s`` that vary (a column equal in every key
    skipped: it decides no comparison) as big-endian integers (uint64): their order never
    contradicts the keys' (equal words: the rest decides). Made for these keys alone: another
    array's keys may vary in other columns, so words of two arrays do not compare."""
    n, width = len(s), s.dtype.itemsize
    rows = s.view(np.uint8).reshape(n, width)
    sample = rows[:: max(1, n // 4096)]
    cols = []
    for j in range(width):
        if (sample[:, j] != rows[0, j]).any() or (rows[:, j] != rows[0, j]).any():
            cols.append(j)
            if len(cols) == 8:
                break
    if len(cols) == 8 and cols[-1] - cols[0] == 7:  # eight columns side by side: read in place
        return np.ndarray(
            (n,), ">u8", buffer=np.ascontiguousarray(s), offset=cols[0], strides=(width,)
        ).astype(np.uint64)
    word = np.zeros((n, 8), np.uint8)
    # the first varying byte the most significant: big-endian words, on any host
    for i, j in enumerate(cols):
        word[:, i] = rows[:, j]
    return word.view(">u8").reshape(-1).astype(np.uint64)


def _argsort_wide(s: np.ndarray, runs=None) -> np.ndarray:
    """The stable argsort of byte keys with more than eight varying byte columns: by the first
    eight of those as big-endian integers (:func:`_varying_word`; NumPy sorts and merges those
    faster than byte strings: BENCHMARKS.md section 2), then each run of keys equal in those bytes
    sorted again by the whole key (stable: its positions are in order). Sort Benchmark keys (10
    random bytes) almost never tie in eight, nor do keys of several columns whose first ones hold
    few values (a frame's flag bytes, an int's high bytes, skipped); where many do (a common
    prefix, many equal keys), NumPy's stable sort of the strings."""
    n, width = len(s), s.dtype.itemsize
    if width <= 8:
        return np.argsort(s, kind="stable")
    prefix = _varying_word(s)
    order = _argsort_integers(prefix, runs)
    tied = np.flatnonzero(prefix[order[1:]] == prefix[order[:-1]])
    if not len(tied):
        return order
    starts = tied[np.r_[True, tied[1:] != tied[:-1] + 1]]
    ends = tied[np.r_[tied[1:] != tied[:-1] + 1, True]] + 2
    if len(starts) > MAX_MENDED_RUNS or len(tied) > n * MENDED_PER_ELEMENT:
        return np.argsort(s, kind="stable")
    for a, b in zip(starts.tolist(), ends.tolist()):
        rows = order[a:b]
        order[a:b] = rows[np.argsort(s[rows], kind="stable")]
    return order


RUNS_PER_ELEMENT = 1 / 64  # fewer descents than this: sorted runs, which NumPy's timsort merges
# a merge of sorted runs whose lengths hold less entropy than this (bits: log2 of the count of
# equal runs) goes to NumPy's timsort, more to the SIMD sort (BENCHMARKS.md section 10)
MERGE_BITS = 3.5
MAX_MENDED_RUNS = 256  # more runs of keys cut short to mend than this: NumPy's stable sort instead
MENDED_PER_ELEMENT = 1 / 16  # more rows in them than this: NumPy's stable sort instead
# keys cut short that collide in a probe of about this many: NumPy's stable sort at once
PROBE = 8192
TIED_PER_ELEMENT = 1 / 4  # more equal keys in the probe than this (and keys cut short): the same


def _argsort_integers(k: np.ndarray, runs=None) -> np.ndarray:
    """The stable argsort of integers of 4 or 8 bytes. Keys already in a few sorted runs (a merge's
    input) take NumPy's timsort, which merges them. Others are sorted as one word per key by
    NumPy's SIMD sort of numbers (several times faster than any argsort): the key's distance
    from the smallest key, shifted right by the bits a position needs beyond the 64 (none where
    the keys' span leaves room), then left to make room for its position, which fills the low
    bits. Without a shift, those words sort by (key, position): the stable order, ties in input
    order. Where the shift dropped low bits of the keys, keys that differ only in them fell
    into one run of equal words in position order; each such run is sorted again by (key,
    position). Where many would be (a regular probe of the keys shows two cut short alike, or
    many equal keys, whose ties cost a look each and which NumPy's timsort sorts fast, or the
    runs hold more than a sixteenth of the keys, or number more than :data:`MAX_MENDED_RUNS`: a
    few outliers far from keys close together, say), NumPy's stable sort. Few temporaries, in
    :mod:`host` memory: a dask worker hands NumPy's freed memory back, and each new array costs its
    pages again."""
    n = len(k)
    if runs is not None:
        presorted = merge_bits(runs) < MERGE_BITS
    else:
        descents = np.count_nonzero(np.less(k[1:], k[:-1], out=host.empty(n - 1, bool)))
        presorted = descents < n * RUNS_PER_ELEMENT
    if presorted:
        return np.argsort(k, kind="stable")
    if k.dtype.kind == "i":  # signed: sign bit flipped, the same order as unsigned words
        words = host.copy(k, np.int64).view(np.uint64)
        words ^= np.uint64(1 << 63)
    else:
        words = host.copy(k, np.uint64)
    low = words.min()
    position_bits = max((n - 1).bit_length(), 1)
    shift = max(int(words.max() - low).bit_length() + position_bits - 64, 0)
    if shift:
        probe = np.sort(words[:: max(1, n // PROBE)])
        short = (probe - low) >> np.uint64(shift)  # sorted too: cutting short keeps the order
        same = probe[1:] == probe[:-1]
        if (
            np.any((short[1:] == short[:-1]) & ~same)
            or np.count_nonzero(same) > len(same) * TIED_PER_ELEMENT
        ):
            return np.argsort(k, kind="stable")
    words -= low
    if shift:
        words >>= np.uint64(shift)
    words <<= np.uint64(position_bits)
    words |= host.arange(n, np.uint64)
    words.sort()
    mask = np.uint64((1 << position_bits) - 1)
    runs = []
    if shift:  # neighbours equal but for their positions, whose keys differ: keys cut short
        apart = np.bitwise_xor(words[1:], words[:-1], out=host.empty(n - 1, np.uint64))
        apart >>= np.uint64(position_bits)
        tied = np.flatnonzero(apart == 0)
        tied = tied[
            k[(words[tied] & mask).astype(np.intp)] != k[(words[tied + 1] & mask).astype(np.intp)]
        ]
        runs = _cut_short_runs(words, position_bits, tied) if len(tied) else []
        if len(runs) > MAX_MENDED_RUNS or sum(b - a for a, b in runs) > n * MENDED_PER_ELEMENT:
            return np.argsort(k, kind="stable")
    words &= mask
    order = words.view(np.int64)
    for a, b in runs:  # each sorted again by (key, position)
        rows = order[a:b]
        order[a:b] = rows[np.lexsort((rows, k[rows]))]
    return order


def _cut_short_runs(words, position_bits: int, tied) -> list:
    """The runs ``(start, end)`` of sorted ``words`` equal above their position bits, around the
    neighbours ``tied`` (each equal to the next there)."""
    tops = np.unique(words[tied] >> np.uint64(position_bits))
    starts = np.searchsorted(words, tops << np.uint64(position_bits), side="left")
    ends = np.searchsorted(
        words,
        (tops << np.uint64(position_bits)) | np.uint64((1 << position_bits) - 1),
        side="right",
    )
    return list(zip(starts.tolist(), ends.tolist()))


def _less(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Elementwise ``x < y`` over order keys, NaN after every number (as NumPy sorts)."""
    if x.dtype.kind == "f":
        return (x < y) | (np.isnan(y) & ~np.isnan(x))
    return x < y


def sort(keys, values=None, descending=False, na_position="last"):
    """Stable sort of ``keys`` (and of ``values`` alongside, returned as ``(keys, values)``)."""
    na_first = K.check_sort(keys, values, na_position)
    k, involution = _order_key(keys, descending, na_first)
    if values is None and involution:
        if np.may_share_memory(k, keys):  # never sort the caller's array in place
            k = k.copy()
        k.sort(kind="stable")
        return _undo(k, descending, keys)
    order = _argsort(k)
    return keys[order] if values is None else (keys[order], values[order])


def argsort(keys, descending=False, na_position="last", runs=None):
    """Positions (int64) that sort ``keys`` stably. ``runs``: the lengths of the sorted runs that
    ``keys`` is made of, end to end (a merge of them), which tell how NumPy sorts them fastest:
    few runs (:func:`merge_bits` below :data:`MERGE_BITS`) by its timsort, which merges them,
    many by its SIMD sort; without them, a count of the keys' descents tells."""
    na_first = K.check_one(keys, na_position)
    k = _order_key(keys, descending, na_first)[0]
    return _argsort(k, runs).astype(np.int64, copy=False)


def merge_bits(runs) -> float:
    """The entropy, in bits, of runs of the lengths ``runs``: log2 of their count where they are
    equal, less where some are longer (a merge of them costs about this many steps a key)."""
    lengths = np.asarray(runs, np.float64)
    lengths = lengths[lengths > 0]
    if len(lengths) < 2:
        return 0.0
    p = lengths / lengths.sum()
    return float(-(p * np.log2(p)).sum())


def order_prefix(keys, descending=False, na_position="last"):
    """``(words, whole)``: one number per key whose ascending order (NumPy's: NaN last) is the
    wanted order, equal keys equal numbers, and ``whole`` None, where such a number fits in 64
    bits; else (byte keys of more than 8 varying columns) the order key's first eight bytes as
    big-endian words (their order never contradicts the wanted order; equal words need the whole
    key) and ``whole``, the order keys themselves (``S<n>``, compared as bytes). ``(None, None)``
    for no keys. What a selection (``np.partition``) or a count of the keys below some key needs,
    where a stable sort would be more than that."""
    if keys is None or not len(keys):
        return None, None
    na_first = K.check_one(keys, na_position)
    k, _ = _order_key(keys, descending, na_first)
    if k.dtype.kind != "S":
        return k, None
    packed = _packed(k)
    if packed is not None:
        return packed, None
    return _first_word(k), k


def merge(a, b, a_values=None, b_values=None, descending=False, na_position="last"):
    """Stable merge of two sorted arrays: on equal keys every element of ``a`` comes first.

    With values, returns ``(keys, values)``. NumPy's stable sort (timsort) finds the two runs of the
    concatenation and merges them in one galloping pass, so this is a merge, not a sort.
    """
    na_first = K.check_merge(a, b, a_values, b_values, na_position)
    ka, involution = _order_key(a, descending, na_first)
    kb, _ = _order_key(b, descending, na_first)
    c = np.concatenate([ka, kb])
    if a_values is None and involution:
        c.sort(kind="stable")
        return _undo(c, descending, a)
    order = _argsort(c)
    merged = (c if ka is a and kb is b else np.concatenate([a, b]))[order]
    if a_values is None:
        return merged
    return merged, np.concatenate([a_values, b_values])[order]


def _lower_bound(lo, hi, go_right):
    """Vectorized binary search: the first ``i`` in ``[lo, hi)`` with ``go_right(i)`` False.

    ``go_right`` is evaluated on the still-active searches only (one array op per step), so the
    cost is O(len(lo) * log(hi - lo)) and no whole input is ever transformed.
    """
    lo = np.array(lo, dtype=np.int64)
    hi = np.array(hi, dtype=np.int64)
    active = np.flatnonzero(lo < hi)
    while active.size:
        mid = (lo[active] + hi[active]) >> 1
        right = go_right(active, mid)
        lo[active[right]] = mid[right] + 1
        hi[active[~right]] = mid[~right]
        active = active[lo[active] < hi[active]]
    return lo


def merge_path(a, b, diagonals, descending=False, na_position="last"):
    """Co-ranks: for each output position ``k`` of the stable merge of sorted ``a`` and ``b``, the
    number of elements taken from ``a`` among the first ``k`` outputs (int64, one per diagonal).

    The co-rank ``i`` (``j = k - i``) is the one with ``a[i-1] <= b[j]`` and ``b[j-1] < a[i]``:
    ties go to ``a``. Each diagonal is a binary search along its cross-diagonal.
    """
    d = np.asarray(diagonals, dtype=np.int64).reshape(-1)
    na_first = K.check_path(a, b, d, na_position)
    m, n = len(a), len(b)

    def a_goes_first(active, mid):
        ka = _order_key(a[mid], descending, na_first)[0]
        kb = _order_key(b[d[active] - 1 - mid], descending, na_first)[0]
        return ~_less(kb, ka)  # a[mid] <= b[k-1-mid]: a[mid] is among the first k outputs

    return _lower_bound(np.maximum(0, d - n), np.minimum(d, m), a_goes_first)


def searchsorted(sorted_keys, probes, side="left", descending=False, na_position="last"):
    """Rank probes over a sorted run: for each probe ``v``, how many elements come before ``v`` in
    the order (``side="left"``: strictly before, i.e. "< v") or before or equal to it
    (``side="right"``: "<= v"). int64, one per probe.
    """
    na_first = K.check_search(sorted_keys, side, na_position)
    probes = np.asarray(probes, dtype=sorted_keys.dtype)
    probes = probes.reshape(-1, *sorted_keys.shape[1:])
    kp = _order_key(probes, descending, na_first)[0]

    def before_probe(active, mid):
        km = _order_key(sorted_keys[mid], descending, na_first)[0]
        if side == "left":
            return _less(km, kp[active])
        return ~_less(kp[active], km)

    n = len(sorted_keys)
    return _lower_bound(
        np.zeros(len(probes), np.int64), np.full(len(probes), n, np.int64), before_probe
    )


def is_sorted(keys, descending=False, na_position="last") -> bool:
    """True when ``keys`` is already in the wanted order (ties in any order)."""
    na_first = K.check_one(keys, na_position)
    if len(keys) < 2:
        return True
    k = _order_key(keys, descending, na_first)[0]
    return not bool(_less(k[1:], k[:-1]).any())


def contiguous(x):
    """``x`` C-contiguous (itself where it is)."""
    return np.ascontiguousarray(x)


def concatenate(arrays):
    """Arrays joined along axis 0."""
    return np.concatenate(arrays)


def arange(start: int, stop: int, step: int = 1):
    """int64 positions as ``numpy.arange``."""
    return np.arange(start, stop, step, dtype=np.int64)


def to_numpy(x) -> np.ndarray:
    return np.asarray(x)
