"""dsort.engine.numpy_engine on its own: what only it does (the engines' shared semantics are
tests/test_engine.py's). Byte keys are argsorted as integers where at most 8 of their byte columns
vary; the order must stay memcmp's, stable, in both directions."""

import numpy as np
import pytest

from dsort.engine import numpy_engine as E


def _reference(rows, descending):
    """Python's stable sort of the rows' bytes (reversed for descending: ties keep input order)."""
    return sorted(range(len(rows)), key=lambda i: bytes(rows[i]), reverse=descending)


@pytest.mark.parametrize("width", [1, 3, 8, 9, 12, 17])
@pytest.mark.parametrize("constant", [0, 1, 4])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 300])
def test_byte_keys_argsort_like_memcmp(rng, width, constant, descending, n):
    rows = rng.integers(0, 3, (n, width), dtype=np.uint8)
    rows[:, : min(constant, width)] = rng.integers(0, 256, dtype=np.uint8)  # columns equal in every key
    got = E.argsort(rows, descending=descending)
    assert got.tolist() == _reference(rows, descending)
    keys, values = E.sort(rows, np.arange(n), descending=descending)
    assert values.tolist() == _reference(rows, descending)
    np.testing.assert_array_equal(keys, rows[_reference(rows, descending)])


@pytest.mark.parametrize("width", [5, 8, 9, 12, 16])
@pytest.mark.parametrize("varying", [0, 1, 7, 8, 9])
@pytest.mark.parametrize("where", ["first", "last", "middle", "scattered"])
def test_packed_only_where_it_keeps_the_order(rng, width, varying, where):
    """Byte keys packed into one uint64 where at most 8 byte columns vary, wherever they lie (a
    run of them read in place as one word, others gathered), keep the keys' order; else None."""
    if varying > width:
        pytest.skip("more varying bytes than the key has")
    n = int(rng.integers(2, 300))
    rows = np.tile(rng.integers(0, 256, width, dtype=np.uint8), (n, 1))  # equal bytes: any value
    cols = {
        "first": np.arange(varying),
        "last": np.arange(width - varying, width),
        "middle": np.arange(varying) + (width - varying) // 2,
        "scattered": np.sort(rng.choice(width, varying, replace=False)),
    }[where]
    rows[:, cols] = rng.integers(0, 4 if n > 100 else 256, (n, varying), dtype=np.uint8)  # ties too
    packed = E._packed(rows.view(f"S{width}").reshape(-1))
    actual = sum(len(set(rows[:, j].tolist())) > 1 for j in range(width))  # random columns may come out equal
    if actual > 8:
        assert packed is None
    else:
        assert packed is not None and packed.dtype == np.uint64 and len(packed) == n
        order = np.argsort(packed, kind="stable")
        assert order.tolist() == _reference(rows, False)


@pytest.mark.parametrize("varying", [1, 8, 9])
def test_packed_sees_a_byte_that_varies_in_one_row_only(rng, varying):
    """A byte column equal in all rows but one, which the sparse first look at the rows may miss,
    still counts: the packed keys keep the order, or there is no packing (more than 8 vary)."""
    n = int(rng.integers(5000, 20000))
    rows = np.zeros((n, 10), np.uint8)
    rows[:, 1:varying] = rng.integers(0, 256, (n, varying - 1), dtype=np.uint8)
    odd = int(rng.integers(1, n))
    rows[odd, 0] = 1  # the only row whose first byte differs: sorted last (or first if descending)
    packed = E._packed(rows.view("S10").reshape(-1))
    if varying > 8:
        assert packed is None
    else:
        assert packed is not None
        assert np.argsort(packed, kind="stable").tolist() == _reference(rows, False)


def _integer_keys(rng, case, n):
    if case == "full int64":
        return rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64, endpoint=True)
    if case == "full uint64":
        return rng.integers(0, 2**64 - 1, n, dtype=np.uint64, endpoint=True)
    if case == "small int32":
        return rng.integers(-3, 4, n).astype(np.int32)
    if case == "outlier":  # small ids and one far key: cut short, nearly all would tie
        return np.r_[rng.integers(0, 2**18, n - 1), 2**62][rng.permutation(n)].astype(np.int64)
    if case == "skewed":
        return np.where(rng.random(n) < 0.9, np.int64(-5), rng.integers(-(2**63), 2**63 - 1, n, dtype=np.int64))
    # "cut short": the span needs all 64 bits, so the sort words drop low bits; keys share a few
    # high parts and differ below them, so many fall into runs that must be sorted again
    high = rng.integers(0, 2**48, 30, dtype=np.uint64) << np.uint64(16)
    keys = rng.choice(high, n) | rng.integers(0, 2**16, n, dtype=np.uint64)
    keys[rng.integers(0, n, n // 10)] = keys[0]  # ties among them too
    keys[:2] = [0, 2**64 - 1]
    return keys


@pytest.mark.parametrize("case", ["full int64", "full uint64", "small int32", "skewed", "cut short", "outlier"])
@pytest.mark.parametrize("mended_runs", [E.MAX_MENDED_RUNS, 0])
@pytest.mark.parametrize("probe", [E.PROBE, 0])
def test_integer_argsort_is_numpys_stable_argsort(rng, monkeypatch, case, mended_runs, probe):
    """The argsort of 4- and 8-byte integers by sorted words of (key, position), keys cut short
    where their span needs the bits, and the runs that cutting merged sorted again (or, beyond
    the runs it mends, or where a probe shows keys cut short alike, NumPy's stable sort), equals
    NumPy's stable argsort. ``probe`` 0: no probe sees a collision (one key), so runs are mended."""
    monkeypatch.setattr(E, "MAX_MENDED_RUNS", mended_runs)
    monkeypatch.setattr(E, "PROBE", max(probe, 1))
    if not probe:
        monkeypatch.setattr(E, "MENDED_PER_ELEMENT", 1.0)
    for n in (2, 3, 257, int(rng.integers(1000, 20000))):
        keys = _integer_keys(rng, case, n)
        np.testing.assert_array_equal(E._argsort(keys), np.argsort(keys, kind="stable"))
        np.testing.assert_array_equal(E.argsort(keys, descending=True), np.argsort(-keys.astype(object), kind="stable").astype(np.int64))


def test_merge_of_byte_keys_is_stable(rng):
    a = np.sort(rng.integers(0, 4, (200, 9), dtype=np.uint8).view("S9").reshape(-1)).view(np.uint8).reshape(200, 9)
    b = np.sort(rng.integers(0, 4, (100, 9), dtype=np.uint8).view("S9").reshape(-1)).view(np.uint8).reshape(100, 9)
    keys, values = E.merge(a, b, np.arange(200), np.arange(200, 300))
    both = np.concatenate([a, b])
    assert values.tolist() == _reference(both, False)


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint32", "uint64"])
@pytest.mark.parametrize("case", ["distinct", "one tie", "ties", "runs", "descending runs"])
def test_integer_argsort_is_stable_whichever_way_it_goes(rng, dtype, case):
    """Distinct integers go through NumPy's unstable argsort (any order is the stable one then);
    equal keys the probe misses are caught after, and sorted runs take timsort: the result is
    always the stable order."""
    n = 20000
    info = np.iinfo(dtype)
    x = rng.choice(np.arange(max(info.min, -(10**9)), min(info.max, 10**9), 997, dtype=np.int64), n, replace=False).astype(dtype)
    if case == "one tie":
        x[7] = x[12345]  # between the probe's samples
    elif case == "ties":
        x = rng.integers(0, 50, n).astype(dtype)
    elif case in ("runs", "descending runs"):
        x = np.sort(x.reshape(4, -1), axis=1).ravel()
    for descending in (False, True):
        expected = sorted(range(n), key=lambda i: int(x[i]), reverse=descending)
        assert E.argsort(x, descending=descending).tolist() == expected


def _merge_input(rng, kind, runs, n):
    """``runs`` sorted runs end to end (lengths equal, or one long and the rest short), of keys
    ``kind``: ``"int64"``, ``"float64"`` (with NaN and -0.0), ``"S12"`` byte rows or 3-byte rows."""
    if runs == 1:
        lengths = [n]
    elif kind != "S3" and runs > 2 and rng.random() < 0.5:
        lengths = [n - 3 * (runs - 1)] + [3] * (runs - 1)
    else:
        lengths = np.diff(np.linspace(0, n, runs + 1).astype(int)).tolist()
    if kind == "int64":
        keys = rng.integers(-50, 50, n)  # many ties across runs
    elif kind == "float64":
        keys = rng.choice([-0.0, 0.0, np.nan, 1.5, -np.inf, np.inf, 2.0], n)
    else:
        keys = rng.integers(0, 3, (n, int(kind[1:])), dtype=np.uint8).view(kind).reshape(-1)
    parts = np.split(keys, np.cumsum(lengths)[:-1])
    return np.concatenate([np.sort(p, kind="stable") for p in parts]), lengths


@pytest.mark.parametrize("kind", ["int64", "float64", "S12", "S3"])
@pytest.mark.parametrize("runs", [1, 2, 5, 16, 120])
@pytest.mark.parametrize("descending", [False, True])
def test_a_merge_told_its_runs_is_the_stable_order(rng, kind, runs, descending):
    """argsort told the lengths of the sorted runs its keys are made of (a k-way merge: timsort
    for few, the SIMD sort for many) gives the stable order, ties in run order, as without the
    hint; descending runs are sorted descending."""
    n = int(rng.integers(runs * 4, runs * 200))
    keys, lengths = _merge_input(rng, kind, runs, n)
    if descending:
        parts = np.split(keys, np.cumsum(lengths)[:-1])
        keys = np.concatenate([p[::-1] for p in parts])
        if kind == "float64":  # NaN stays last within each run descending (na_position last)
            keys = np.concatenate([np.r_[p[~np.isnan(p)], p[np.isnan(p)]] for p in np.split(keys, np.cumsum(lengths)[:-1])])
    got = E.argsort(keys, descending=descending, runs=lengths)
    np.testing.assert_array_equal(got, E.argsort(keys, descending=descending))
    if kind in ("int64", "S12", "S3"):
        ref = sorted(range(n), key=lambda i: keys[i], reverse=descending)
        assert got.tolist() == ref


def test_merge_bits_counts_how_many_runs_a_merge_meets():
    """Equal runs: log2 of their count; one long run and short ones: less; empty runs: none."""
    assert E.merge_bits([]) == 0.0 and E.merge_bits([7]) == 0.0 and E.merge_bits([0, 9, 0]) == 0.0
    assert E.merge_bits([5] * 16) == pytest.approx(4.0)
    assert E.merge_bits([100000] + [1] * 15) < 0.01
    assert E.merge_bits([3, 3, 0]) == pytest.approx(1.0)


@pytest.mark.parametrize("width", [9, 10, 16, 23])
@pytest.mark.parametrize("case", ["random", "prefix ties", "many prefix ties", "equal keys", "sorted runs"])
@pytest.mark.parametrize("descending", [False, True])
def test_wide_byte_keys_by_their_first_word_then_mended(rng, width, case, descending):
    """Keys with more than 8 varying byte columns: sorted by their first 8 bytes, runs tied there
    sorted again (or NumPy's sort where there are many): memcmp's order, stable, both directions."""
    n = 3000
    rows = rng.integers(0, 256, (n, width), dtype=np.uint8)
    if case == "prefix ties":  # a few keys share each of ten first words, differ after them: mended
        rows[: n // 40, :8] = rows[rng.integers(0, 10, n // 40), :8]
    elif case == "many prefix ties":  # too many to mend: NumPy's sort
        rows[:, :8] = rows[rng.integers(0, 5, n), :8]
    elif case == "equal keys":
        rows = rows[rng.integers(0, 50, n)]
    elif case == "sorted runs":  # a merge's input
        rows = np.concatenate([r[_reference(r, descending)] for r in np.array_split(rows, 7)])
    got = E.argsort(rows.view(f"S{width}").reshape(-1), descending=descending)
    assert got.tolist() == _reference(rows, descending)


@pytest.mark.parametrize("odd", [False, True])
@pytest.mark.parametrize("descending", [False, True])
def test_wide_keys_by_the_first_eight_bytes_that_vary(rng, odd, descending):
    """Keys of two columns as a frame writes them (a flag byte, an int of few values, a flag, a
    float): more than eight byte columns vary, but the first eight bytes hold the few ints'
    values alone. The word is of the first eight columns that vary (equal ones skipped, one that
    differs in a single row kept), its order never contradicts the keys', and the argsort is
    memcmp's, stable."""
    n = 20000
    rows = np.zeros((n, 14), np.uint8)
    rows[:, 3:5] = rng.integers(0, 4, (n, 2), dtype=np.uint8)  # the int's low bytes: few values
    rows[:, 6:14] = rng.integers(0, 256, (n, 8), dtype=np.uint8)  # the float's bytes
    rows[rng.integers(0, n, n // 10), 6:14] = rows[0, 6:14]  # and ties
    if odd:
        rows[int(rng.integers(1, n)), 1] = 1  # a byte that varies in one row only: a sparse look misses it
    s = rows.view("S14").reshape(-1)
    word = E._varying_word(s)
    cols = ([1] if odd else []) + [3, 4, 6, 7, 8, 9, 10, 11, 12, 13][: 8 - odd]
    expected = np.zeros(n, np.uint64)
    for j in cols:
        expected = (expected << np.uint64(8)) | rows[:, j].astype(np.uint64)
    np.testing.assert_array_equal(word, expected)
    assert E.argsort(s, descending=descending).tolist() == _reference(rows, descending)
