"""dsort.core.arrow_hash: a row's hash depends on its value alone (not its place, the slicing or
chunking, the offsets' width, a dictionary), equal values hash equal and distinct ones apart,
checked against the values' Python ``repr`` on random arrays of every type the Parquet sort
passes through, nulls and nested nulls among them."""

from __future__ import annotations

import decimal
import datetime

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")

from dsort.core import arrow_hash as H  # noqa: E402


def _pick(rng, values, n, nulls=0.1):
    return [None if rng.random() < nulls else values[int(rng.integers(len(values)))] for _ in range(n)]


def _columns(rng, n):
    """``{name: pyarrow array}`` of ``n`` rows drawn from few distinct values (so equal values
    stand in several places), every type with nulls."""
    ints = [0, 1, -1, 2**62, -(2**63)]
    floats = [0.0, -0.0, 1.5, float("inf"), float("-inf"), float("nan")]
    strings = ["", "a", "ab", "ba", "é", "a" * 40, "x\x00y", "0123456789abcdef", "0123456789abcdefg", "0123456789abcdef\x00"]
    lists = [[], [1], [1, None], [None, 1], [2, 1], [1, 2, 3]]
    structs = [{"a": 1, "b": "x"}, {"a": None, "b": "x"}, {"a": 1, "b": None}, {"a": 2, "b": ""}]
    return {
        "int64": pa.array(_pick(rng, ints, n), pa.int64()),
        "int8": pa.array(_pick(rng, [0, 1, -1, 127], n), pa.int8()),
        "uint32": pa.array(_pick(rng, [0, 1, 2**32 - 1], n), pa.uint32()),
        "float64": pa.array(_pick(rng, floats, n), pa.float64()),
        "float32": pa.array(_pick(rng, floats, n), pa.float32()),
        "bool": pa.array(_pick(rng, [True, False], n), pa.bool_()),
        "string": pa.array(_pick(rng, strings, n), pa.string()),
        "large_string": pa.array(_pick(rng, strings, n), pa.large_string()),
        "string_view": pa.array(_pick(rng, strings, n), pa.string_view()),
        "binary": pa.array(_pick(rng, [s.encode() for s in strings], n), pa.binary()),
        "fixed_binary": pa.array(_pick(rng, [b"abc", b"abd", b"\x00\x00\x00"], n), pa.binary(3)),
        "decimal128": pa.array(_pick(rng, [decimal.Decimal(v) for v in ("0", "1.25", "-1.25", "99999999.99")], n), pa.decimal128(10, 2)),
        "decimal256": pa.array(_pick(rng, [decimal.Decimal(v) for v in ("0", "1.5", "-7.5")], n), pa.decimal256(40, 1)),
        "timestamp": pa.array(_pick(rng, [datetime.datetime(2020, 1, 1), datetime.datetime(1969, 12, 31)], n), pa.timestamp("us", "UTC")),
        "date32": pa.array(_pick(rng, [datetime.date(2020, 1, 1), datetime.date(1900, 5, 5)], n), pa.date32()),
        "time64": pa.array(_pick(rng, [datetime.time(1, 2, 3), datetime.time(0)], n), pa.time64("us")),
        "duration": pa.array(_pick(rng, [datetime.timedelta(0), datetime.timedelta(days=-1)], n), pa.duration("ns")),
        "list": pa.array(_pick(rng, lists, n), pa.list_(pa.int64())),
        "large_list": pa.array(_pick(rng, lists, n), pa.large_list(pa.int64())),
        "fixed_list": pa.array(_pick(rng, [[1, 2], [2, 1], [None, 1]], n), pa.list_(pa.int64(), 2)),
        "list_of_strings": pa.array(_pick(rng, [[], [""], ["a", ""], ["", "a"], None], n), pa.list_(pa.string())),
        "map": pa.array(_pick(rng, [[], [("a", 1)], [("a", 2)], [("a", 1), ("b", None)]], n), pa.map_(pa.string(), pa.int64())),
        "struct": pa.array(_pick(rng, structs, n), pa.struct([("a", pa.int64()), ("b", pa.string())])),
        "list_of_structs": pa.array(_pick(rng, [[], [structs[0]], [structs[1], structs[0]], [None]], n), pa.list_(structs_type())),
        "dictionary": pa.array(_pick(rng, strings, n), pa.string()).dictionary_encode(),
        "null": pa.nulls(n),
    }


def structs_type():
    return pa.struct([("a", pa.int64()), ("b", pa.string())])


def _reference(a) -> list:
    """Each value's identity in Python: its repr (floats by their bits, so -0.0 and the NaNs are
    told apart as their bits are)."""
    return [repr(v) for v in a.to_pylist()]


@pytest.mark.parametrize("n", [0, 1, 2, 7, 257])
def test_equal_values_hash_equal_and_distinct_ones_apart(rng, n):
    for name, a in _columns(rng, n).items():
        h = H.hashes(a)
        assert h.dtype == np.uint64 and h.shape == (n,), name
        ref = _reference(a)
        by_value: dict = {}
        for v, x in zip(ref, h.tolist()):
            by_value.setdefault(v, set()).add(x)
        assert all(len(s) == 1 for s in by_value.values()), f"{name}: one value, several hashes"
        assert len({next(iter(s)) for s in by_value.values()}) == len(by_value), f"{name}: two values, one hash"


def test_a_rows_hash_is_the_same_wherever_it_stands(rng):
    n = 300
    for name, a in _columns(rng, n).items():
        h = H.hashes(a)
        p = rng.permutation(n)
        if name != "string_view":  # Arrow takes no rows of views
            np.testing.assert_array_equal(H.hashes(a.take(pa.array(p))), h[p], err_msg=name)
        lo, hi = sorted(int(x) for x in rng.integers(0, n, 2))
        np.testing.assert_array_equal(H.hashes(a.slice(lo, hi - lo)), h[lo:hi], err_msg=f"{name} sliced")
        cuts = sorted(int(x) for x in rng.integers(0, n, 3))
        chunked = pa.chunked_array([a.slice(x, y - x) for x, y in zip([0, *cuts], [*cuts, n])], a.type)
        np.testing.assert_array_equal(H.hashes(chunked), h, err_msg=f"{name} chunked")


def test_the_hash_is_the_values_not_their_layout(rng):
    """Offsets of 32 or 64 bits, string views and dictionaries hash as the plain values do."""
    cols = _columns(rng, 200)
    plain = H.hashes(cols["string"])
    np.testing.assert_array_equal(H.hashes(cols["string"].cast(pa.large_string())), plain)
    np.testing.assert_array_equal(H.hashes(cols["string"].cast(pa.string_view())), plain)
    np.testing.assert_array_equal(H.hashes(cols["dictionary"]), H.hashes(cols["dictionary"].dictionary_decode()))
    np.testing.assert_array_equal(H.hashes(cols["list"].cast(pa.large_list(pa.int64()))), H.hashes(cols["list"]))


def test_rows_hash_by_every_column_in_order(rng):
    n = 500
    cols = _columns(rng, n)
    names = list(cols)
    h = H.row_hashes([cols[c] for c in names], n)
    rows = list(zip(*[_reference(cols[c]) for c in names]))
    same: dict = {}
    for r, x in zip(rows, h.tolist()):
        same.setdefault(r, set()).add(x)
    assert all(len(s) == 1 for s in same.values()) and len({next(iter(s)) for s in same.values()}) == len(same)
    a, b = pa.array(np.arange(n)), pa.array(np.arange(n)[::-1].copy())
    assert (H.row_hashes([a, b], n) != H.row_hashes([b, a], n)).all()  # the columns' order counts
    assert len(H.row_hashes([], 0)) == 0


@pytest.mark.parametrize("threads", [None, 1, 2, 4, 8, 16, 64])
def test_row_hashes_are_the_same_in_blocks_of_any_rows(rng, threads):
    """Rows are hashed a block at a time (more rows a block for more threads): the block changes
    no hash, whether it cuts the rows evenly, unevenly, or holds them all."""
    n = int(rng.integers(1, 700))
    cols = _columns(rng, n)
    names = sorted(cols)
    whole = H.row_hashes([cols[c] for c in names], n, block=n)
    block = H.block_rows(threads)
    assert H.BLOCK_ROWS <= block <= 4 * H.BLOCK_ROWS and block % H.BLOCK_ROWS == 0
    assert block == H.BLOCK_ROWS if (threads or 1) < 8 else block > H.BLOCK_ROWS
    for b in (1, 7, max(1, n // 3), n + 5, block):
        np.testing.assert_array_equal(H.row_hashes([cols[c] for c in names], n, block=b), whole)


def test_long_values_hash_the_same_in_blocks_of_any_size(rng, monkeypatch):
    """Values longer than two words are hashed in blocks of bytes: the blocks' size changes nothing."""
    values = ["".join(rng.choice(list("abc"), int(rng.integers(0, 60)))) for _ in range(300)]
    a = pa.array(values, pa.large_string())
    whole = H.hashes(a)
    monkeypatch.setattr(H, "_CHUNK_BYTES", 50)
    np.testing.assert_array_equal(H.hashes(a), whole)
    assert len(set(whole.tolist())) == len(set(values))


def test_long_values_differing_in_one_byte_hash_apart(rng):
    """Values over two words, hashed by their 8-byte words: any one bit flipped (in a whole word
    or the zero-padded last), a byte more or less, or a zero byte added, gives another hash."""
    base = bytes(rng.integers(0, 256, 70, dtype=np.uint8).tolist())
    variants = [base[:k] for k in range(17, 71)]
    variants += [base[:i] + bytes([base[i] ^ (1 << b)]) + base[i + 1 :] for i in range(70) for b in range(8)]
    variants += [base + b"\x00", base[:40] + b"\x00", base[:41]]
    for typ in (pa.binary(), pa.large_binary()):
        h = H.hashes(pa.array(variants, typ))
        assert len(set(h.tolist())) == len(set(variants))


def test_places_are_each_elements_place_in_its_list(rng):
    """Each element's place in its list, empty lists anywhere (first, between, last, all)."""
    for lens in ([], [0], [0, 0], [3], [0, 2, 0, 0, 1, 0], *(rng.integers(0, 4, int(rng.integers(1, 40))) for _ in range(200))):
        offsets = np.concatenate([[0], np.cumsum(np.asarray(lens, np.int64))]).astype(np.int64)
        want = [p for n in lens for p in range(int(n))]
        assert H._places(offsets).tolist() == want, lens
