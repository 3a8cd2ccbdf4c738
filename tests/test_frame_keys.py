"""dsort.core.frame_keys: a frame's sort columns as byte keys in pandas' order, at any string width."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings

from .frame_cases import frame, frames, reference
from dsort.core.frame_keys import KeySpec, column, common_widths, encode_keys, widen


@pytest.mark.parametrize(
    "by,ascending",
    [
        (["i"], True),
        (["f"], False),
        (["s"], True),
        (["t", "i"], [False, True]),
        (["n", "s", "f"], [True, False, False]),
        (["b", "u"], False),
    ],
)
@pytest.mark.parametrize("na_position", ["last", "first"])
@pytest.mark.parametrize("backend", ["numpy", "pyarrow"])
def test_encoded_keys_order_like_pandas(rng, by, ascending, na_position, backend):
    """Also Arrow-backed columns (``pd.ArrowDtype``, as dsort reads Parquet), against pandas'
    order of the NumPy-backed frame."""
    df = frame(rng, 3000)
    # of a copy: pandas 3.0.6's convert_dtypes wrote over its input's NaT (as 1970-01-01), and the
    # reference below would have sorted those as dates
    arrow = df.copy().convert_dtypes(dtype_backend="pyarrow")
    seen = pd.DataFrame({"numpy": df.isna().sum(), "arrow": arrow.isna().sum()})
    assert (seen.numpy == seen.arrow).all(), seen  # the reference sees the missing values the keys see
    keys = encode_keys(df if backend == "numpy" else arrow, by, ascending, na_position)
    order = np.argsort(keys.view(f"S{keys.shape[1]}").ravel(), kind="stable")
    np.testing.assert_array_equal(df["row"].to_numpy()[order], reference(df, by, ascending, na_position)["row"].to_numpy())


WORD_DTYPES = ["int8", "int16", "int64", "uint8", "uint64", "float16", "float32", "float64", "bool"]


def _edge_values(rng, dtype, n):
    """Random values of ``dtype`` with its extremes, ties, and for floats NaN, -0.0 and infinities."""
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind == "f":
        edge = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, np.finfo(dt).max, np.finfo(dt).min, np.finfo(dt).tiny, -np.nan], dt)
        x = rng.normal(0, 3, n).round(1).astype(dt)
    else:
        info = np.iinfo(dt)
        edge = np.array([info.min, info.max, info.min + 1, info.max - 1, 0], dt)
        divisor = np.array(1 + rng.integers(0, 2) * 10**6, np.uint64 if dt.kind == "u" else np.int64)  # not a float64 division
        x = (rng.integers(info.min, info.max, n, dtype=dt, endpoint=True) // divisor).astype(dt)
    pick = rng.random(n) < 0.2
    x[pick] = rng.choice(edge, int(pick.sum()))
    return x


@pytest.mark.parametrize("dtype", WORD_DTYPES)
@pytest.mark.parametrize("ascending", [True, False])
@pytest.mark.parametrize("na_position", ["last", "first"])
def test_words_of_one_number_column_order_like_pandas_and_like_the_byte_keys(rng, dtype, ascending, na_position):
    """One column of NumPy numbers keys by words (the host's in-memory sort does): their stable
    order is pandas' and that of the same column's byte keys, edge values included."""
    n = int(rng.integers(1, 3000))
    df = pd.DataFrame({"x": _edge_values(rng, dtype, n)})
    assert df["x"].dtype == dtype
    before = df.copy()
    spec = KeySpec.of(df.iloc[:0], ["x"], ascending, na_position)
    assert spec.word
    words = spec.words(df)
    pd.testing.assert_frame_equal(df, before)  # the words are their own array: the data is never written
    assert not np.may_share_memory(words, df["x"].to_numpy())
    assert words.dtype == np.uint64 and words.shape == (n,)
    order = np.argsort(words, kind="stable")
    expected = df.sort_values("x", ascending=ascending, na_position=na_position, kind="stable").index.to_numpy()
    np.testing.assert_array_equal(order, expected)
    keys = spec.encode(df)[0]
    np.testing.assert_array_equal(np.argsort(keys.view(f"S{keys.shape[1]}").ravel(), kind="stable"), order)


@pytest.mark.parametrize(
    "meta,by",
    [
        (pd.DataFrame({"x": pd.array([1], "Int64")}), ["x"]),  # missing values need the flag byte
        (pd.DataFrame({"x": pd.to_datetime(["2020-01-01"])}), ["x"]),
        (pd.DataFrame({"x": ["a"]}), ["x"]),
        (pd.DataFrame({"x": pd.Categorical([1])}), ["x"]),
        (pd.DataFrame({"x": [1], "y": [2]}), ["x", "y"]),
    ],
)
def test_words_only_for_one_column_of_numpy_numbers(meta, by):
    spec = KeySpec.of(meta.iloc[:0], by)
    assert not spec.word
    with pytest.raises(ValueError, match="do not fit one word"):
        spec.words(meta)


@pytest.mark.parametrize("ascending", [True, False])
def test_strings_with_trailing_nuls_sort_after_their_prefix(ascending):
    df = pd.DataFrame({"s": ["a\x00", "a", "a\x00b", "a", "", "\x00"]})
    keys = encode_keys(df, ["s"], ascending)
    order = np.argsort(keys.view(f"S{keys.shape[1]}").ravel(), kind="stable")
    np.testing.assert_array_equal(order, df.sort_values("s", ascending=ascending, kind="stable").index.to_numpy())


@settings(max_examples=40, deadline=None)
@given(case=frames())
def test_keys_widened_equal_keys_encoded_wide(case):
    """Each partition encodes its string keys at its own widths; brought to the common widths,
    they equal the keys encoded at those widths (so partitions compare without a widths pass)."""
    df, lengths, by, ascending, na_position = case
    spec = KeySpec.of(df, by, ascending, na_position)
    bounds = np.cumsum([0] + lengths)
    parts = [df.iloc[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    encoded = [spec.encode(p) for p in parts]
    want = common_widths([w for _, w in encoded])
    for p, (keys, have) in zip(parts, encoded):
        np.testing.assert_array_equal(widen(spec, keys, have, want), spec.encode(p, want)[0])


def test_key_spec_checks_the_columns_from_the_meta():
    import pyarrow as pa

    meta = pd.DataFrame({"k": pd.Series([], dtype="int64"), "d": pd.Series([], dtype=pd.ArrowDtype(pa.list_(pa.int64())))})
    with pytest.raises(TypeError, match="cannot sort by column 'd'"):
        KeySpec.of(meta, ["k", "d"])
    with pytest.raises(ValueError, match="na_position"):
        KeySpec.of(meta, "k", na_position="middle")
    with pytest.raises(KeyError, match="no column or index level 'x'"):
        KeySpec.of(meta, "x")
    both = pd.DataFrame({"k": [1]}, index=pd.Index([2], name="k"))
    with pytest.raises(ValueError, match="ambiguous"):
        column(both, "k")


def test_widen_refuses_to_narrow():
    spec = KeySpec.of(pd.DataFrame({"s": ["abc"]}), "s")
    keys, have = spec.encode(pd.DataFrame({"s": ["abc"]}))
    with pytest.raises(ValueError, match="narrow"):
        widen(spec, keys, have, (1,))


def test_fixed_width_rows_round_trip(rng):
    from dsort.core.frame_rows import RowCodec

    n = 300
    df = pd.DataFrame(
        {
            "k": rng.integers(-5, 5, n),
            "f": rng.choice([np.nan, -0.0, 1.5, np.inf], n),
            "b": rng.random(n) < 0.5,
            "t": pd.to_datetime(rng.integers(0, 9, n), unit="D"),
            "d": pd.to_timedelta(rng.integers(0, 9, n), unit="s"),
            7: rng.integers(0, 9, n).astype(np.uint16),
        },
        index=pd.Index(rng.permutation(n).astype(np.int32), name="ix"),
    )
    df.loc[df.index[:5], "t"] = pd.NaT
    codec = RowCodec.of(df)
    rows = codec.encode(df)
    assert rows.shape == (n, codec.row_bytes) and codec.row_bytes == 8 + 8 + 1 + 8 + 8 + 2 + 4
    pd.testing.assert_frame_equal(codec.decode(rows), df)
    pd.testing.assert_frame_equal(codec.decode(rows[:0]), df.iloc[:0])
    # inside wider rows, at any byte (unaligned too), the bytes around left as they were
    at = int(rng.integers(1, 12))
    wide = rng.integers(0, 256, (n, at + codec.row_bytes + 3), dtype=np.uint8)
    before = wide.copy()
    assert codec.encode(df, wide, at) is wide
    np.testing.assert_array_equal(wide[:, at : at + codec.row_bytes], rows)
    inside = np.s_[at : at + codec.row_bytes]
    np.testing.assert_array_equal(np.delete(wide, inside, axis=1), np.delete(before, inside, axis=1))
    pd.testing.assert_frame_equal(codec.decode(wide, at), df)
    with pytest.raises(ValueError, match="C-contiguous"):
        codec.encode(df, np.zeros((n, 2 * (at + codec.row_bytes)), np.uint8)[:, ::2], at)
    for other in (
        df.assign(s="x"),
        df.assign(n=pd.array([1] * n, dtype="Int64")),
        df.assign(c=pd.Categorical(["a"] * n)),
        df.set_index("k", append=True),
        df.assign(tz=df.t.dt.tz_localize("UTC")),
    ):
        assert RowCodec.of(other) is None


@pytest.mark.parametrize("na_position", ["last", "first"])
def test_number_keys_written_by_slices_equal_the_encoded_keys(rng, na_position):
    """write_number_keys (the GPU's way: byte slices of the words) gives the bytes of KeySpec.encode
    (the host's), for every number-like NumPy dtype, missing values, -0.0 and infinities, both
    directions; and RowCodec.place/pick (the GPU's way) agree with encode/decode."""
    from dsort.core.frame_keys import write_number_keys
    from dsort.core.frame_rows import RowCodec

    n = int(rng.integers(0, 200))
    df = pd.DataFrame(
        {
            "i8": rng.integers(-128, 128, n).astype(np.int8),
            "u64": rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2),
            "i64": rng.integers(-(2**62), 2**62, n),
            "f32": rng.choice([np.nan, -0.0, 0.0, 1.5, -np.inf, np.inf, -3.25], n).astype(np.float32),
            "f16": rng.choice([np.nan, -1.0, 2.0], n).astype(np.float16),
            "f64": rng.choice([np.nan, -0.0, 0.0, 1e300, -1e-300, np.inf], n),
            "b": rng.random(n) < 0.5,
            "t": pd.to_datetime(rng.integers(-5, 5, n), unit="D"),
            "d": pd.to_timedelta(rng.integers(-5, 5, n), unit="s"),
        },
        index=pd.Index(rng.permutation(n), name="ix"),
    )
    df.loc[df.index[: n // 7], "t"] = pd.NaT
    df.loc[df.index[n // 7 : n // 5], "d"] = pd.NaT
    for _ in range(4):
        by = [str(c) for c in rng.choice(df.columns, int(rng.integers(1, 4)), replace=False)]
        ascending = [bool(a) for a in rng.random(len(by)) < 0.5]
        spec = KeySpec.of(df, by, ascending, na_position)
        keys, _ = spec.encode(df)
        out = rng.integers(0, 256, (n, keys.shape[1] + 3), dtype=np.uint8)
        write_number_keys(spec, [df[c].to_numpy() for c in by], out, np)
        np.testing.assert_array_equal(out[:, : keys.shape[1]], keys)
        # datetimes and durations as int64 words (as a GPU holds them), their kinds given
        words = [df[c].to_numpy().view(np.int64) if df[c].dtype.kind in "mM" else df[c].to_numpy() for c in by]
        again = np.zeros_like(out)
        write_number_keys(spec, words, again, np, [df[c].dtype.kind for c in by])
        np.testing.assert_array_equal(again[:, : keys.shape[1]], keys)
    # nulls (pandas' nullable columns: a cudf frame's nulls, given as values and masks)
    nullable = pd.DataFrame(
        {
            "I": pd.array(rng.integers(-3, 3, n), dtype="Int64"),
            "F": pd.array(rng.choice([-0.0, 1.5, -np.inf, 2.0], n), dtype="Float64"),
            "B": pd.array(rng.random(n) < 0.5, dtype="boolean"),
        }
    )
    for c in nullable.columns:
        nullable.loc[rng.random(n) < 0.3, c] = pd.NA
    for ascending in (True, False):
        spec = KeySpec.of(nullable, list(nullable.columns), ascending, na_position)
        keys, _ = spec.encode(nullable)
        fills = {"I": 99, "F": 7.0, "B": True}  # any value: a missing row's is ignored
        values = [nullable[c].to_numpy(dtype=nullable[c].dtype.numpy_dtype, na_value=fills[c]) for c in nullable.columns]
        out = np.zeros((n, keys.shape[1]), np.uint8)
        write_number_keys(spec, values, out, np, missing=[nullable[c].isna().to_numpy() for c in nullable.columns])
        np.testing.assert_array_equal(out, keys)
    codec = RowCodec.of(df)
    rows = codec.encode(df, np.zeros((n, codec.row_bytes + 5), np.uint8), 5)
    placed = np.zeros_like(rows)
    codec.place(codec.columns(df), placed, 5)
    np.testing.assert_array_equal(placed, rows)
    pd.testing.assert_frame_equal(codec.frame(codec.pick(rows, 5)), df)


def test_row_codec_with_nulls_carries_a_validity_byte_per_column(rng):
    """RowCodec.of(meta, nulls=True) (cudf frames): each column's validity byte follows the
    columns, before the index; place and pick carry them like any column (on NumPy here, as on
    CuPy); missing() reads a column's nulls back."""
    from dsort.core.frame_rows import RowCodec

    n = 50
    df = pd.DataFrame({"a": rng.integers(0, 9, n), "f": rng.normal(size=n), "b": rng.random(n) < 0.5}, index=pd.Index(np.arange(n) * 3))
    plain, codec = RowCodec.of(df), RowCodec.of(df, nulls=True)
    assert codec.width == plain.width == 3
    assert codec.dtypes == plain.dtypes[:3] + ("|u1",) * 3 + plain.dtypes[3:]
    assert codec.row_bytes == plain.row_bytes + 3
    valid = [(rng.random(n) < 0.7).astype(np.uint8) for _ in range(3)]
    columns = plain.columns(df)[:3] + valid + plain.columns(df)[3:]
    rows = np.zeros((n, codec.row_bytes + 2), np.uint8)
    codec.place(columns, rows, 2)
    back = codec.pick(rows, 2)
    for got, want, d in zip(back, columns, codec.dtypes):
        np.testing.assert_array_equal(got.view(d), want)
    for i in range(3):
        np.testing.assert_array_equal(codec.missing(back, i), valid[i] == 0)
    assert plain.missing(back, 0) is None
    # null_columns: which columns hold a null among some rows, from their validity bytes at once
    valid[1][:] = 1
    codec.place(plain.columns(df)[:3] + valid + plain.columns(df)[3:], rows, 2)
    for lo, hi in ((0, n), (5, 9), (0, 0)):
        want = [bool((v[lo:hi] == 0).any()) for v in valid]
        assert codec.null_columns(rows[lo:hi], 2) == want
    assert want == [False] * 3 and codec.null_columns(rows, 2)[1] is False and plain.null_columns(rows, 2) == [False] * 3


@pytest.mark.parametrize("width", [32, 64])
@pytest.mark.parametrize("ascending,na_position", [(True, "last"), (False, "first")])
def test_narrow_arrow_decimals_order_as_decimal128(rng, width, ascending, na_position):
    """Arrow's 32- and 64-bit decimals (cudf's): keys in the order of the same values as 128-bit
    decimals, which pandas sorts (it cannot sort the narrow ones), stable, nulls where asked."""
    import decimal

    import pyarrow as pa

    if not hasattr(pa, "decimal32"):
        pytest.skip(f"pyarrow {pa.__version__} has no 32- and 64-bit decimals")
    n = 2_000
    values = [None if r < 0.1 else decimal.Decimal(int(v)).scaleb(-2) for r, v in zip(rng.random(n), rng.integers(-99_999, 99_999, n))]
    narrow = pa.decimal32(7, 2) if width == 32 else pa.decimal64(12, 2)
    df = pd.DataFrame({"d": pd.array(pa.array(values, narrow), dtype=pd.ArrowDtype(narrow))})
    keys, _ = KeySpec.of(df.iloc[:0], ["d"], ascending, na_position).encode(df)
    got = np.lexsort(keys.T[::-1])  # stable: ties by position
    wide = pd.Series(pd.array(pa.array(values, pa.decimal128(12, 2)), dtype=pd.ArrowDtype(pa.decimal128(12, 2))))
    want = wide.sort_values(ascending=ascending, na_position=na_position, kind="stable").index.to_numpy()
    np.testing.assert_array_equal(got, want)
