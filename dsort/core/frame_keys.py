"""Sort keys of pandas rows: the ``by`` columns of each row as one fixed-width byte key whose
unsigned (``memcmp``) order is pandas' order for ``sort_values(by, ascending, na_position,
kind="stable")``; no dask here.

One column's bytes: a missing-value byte, then the value's order-preserving bytes (big-endian, sign
bit flipped; all bits flipped for negative floats; inverted when descending, the missing-value byte
never, so missing values stay last/first both ways). A nullable or Arrow float's NaN, which pandas
holds as a value, sorts where pandas puts it (:func:`_nan_high`). A string column's value is its
UTF-8 bytes (lone surrogates kept, in code point order) padded with NUL to a *width*, then its byte
length (4 bytes, big-endian, so "a" sorts before "a\0"); an object column's value is its string's,
its bytes, or its number's (in Python's order: :func:`_number_bytes`), and values that do not
compare are refused. Every column but a string one has a width fixed by its dtype; a string column's
width is the longest value's, so two partitions' keys compare only at one width: :func:`widen` pads
the narrower (a cheap copy) without touching the data again, which is what lets each partition
encode its keys alone, with no pass over the data beforehand. For the same reason a partition's
object values are checked only against each other as its keys are made; its keys carry their
*kinds* (the types of those values, a few words), and where partitions' keys meet (a run, the plan,
the cuts) :func:`join_kinds` refuses kinds that do not compare (one partition of ints, one of strings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from .lazy import pd, pdt

from ..engine import host
from .errors import Incomparable, UnsupportedType, UnsupportedValue

__all__ = [
    "KeySpec",
    "column",
    "common_widths",
    "comparable",
    "encode_keys",
    "join_kinds",
    "normalize",
    "string_columns",
    "string_widths",
    "type_names",
    "unordered",
    "widen",
]

NA_POSITIONS = ("last", "first")


def _column_key(s: pd.Series, width: int | None, descending: bool, na_first: bool, buffers=None) -> np.ndarray:
    """One column as byte rows: a missing-value byte, then the value's order-preserving bytes
    (big-endian, sign bit flipped; all bits flipped for negative floats; inverted when
    descending, the missing-value byte never, so missing values stay last/first both ways).
    ``buffers``: a string column's :func:`_value_buffers` where the caller has read them already."""
    n = len(s)
    if isinstance(s.dtype, pd.ArrowDtype):
        s = _from_arrow(s)
    if isinstance(s.dtype, pd.SparseDtype):
        raise unordered(s)
    na = s.isna().to_numpy(dtype=bool, copy=True)
    dtype = s.dtype
    if isinstance(dtype, pd.CategoricalDtype):  # in category order, as pandas sorts them (ordered or not)
        s = pd.Series(np.where(na, 0, s.cat.codes.to_numpy()).astype(np.int32), index=s.index)
        dtype = s.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        s, dtype = s.dt.tz_convert("UTC").dt.tz_localize(None), np.dtype("datetime64[ns]")
    if _is_decimal(dtype):
        v = _decimal_bytes(s)
    elif pdt.is_bool_dtype(dtype):
        v, _ = number_word(s.to_numpy(dtype=bool, na_value=False))
    elif pdt.is_integer_dtype(dtype) or pdt.is_datetime64_dtype(dtype) or pdt.is_timedelta64_dtype(dtype):
        if pdt.is_integer_dtype(dtype):
            x = s.to_numpy(dtype=np.dtype(getattr(dtype, "numpy_dtype", dtype)), na_value=0)
        else:
            x = s.to_numpy()
        v, missing = number_word(x)  # one unsigned word per row, written big-endian below
        na |= missing
    elif pdt.is_float_dtype(dtype):
        np_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        v, missing = number_word(s.to_numpy(dtype=np_dtype if np_dtype.itemsize in (4, 8) else np.float64, na_value=np.nan))
        nan = missing & ~na  # NaN that is a value, not missing: a nullable or Arrow float's (NumPy's NaN is missing)
        if nan.any():
            v[nan] = np.iinfo(v.dtype).max if _nan_high(dtype, descending, na_first) else 0
    elif _is_string(s):
        data, offsets, _ = buffers or _value_buffers(s)
        width = max(int(width or 0), 1)
        # UTF-8 bytes (an object column's numbers: bytes of their own) compare like the code points
        # that Python and pandas compare; NUL pads. The byte length follows (big-endian), so "a"
        # sorts before "a\0": padding alone would tie them. Built with array operations: each row's
        # bytes gathered from the buffers at once.
        size = np.diff(offsets)
        if len(size) and int(size.max()) > width:
            raise ValueError(f"column {s.name!r} holds a value of {int(size.max())} bytes, wider than the {width} given")
        cols = np.arange(width)
        inside = cols[None, :] < size[:, None]
        at = np.where(inside, offsets[:-1, None] + cols[None, :], 0)
        v = np.where(inside, data[at] if len(data) else 0, 0).astype(np.uint8)
        lengths = size.astype(">u4").view(np.uint8).reshape(n, 4)
        v = np.concatenate([v, lengths], axis=1)
    else:
        raise unordered(s)
    if descending:
        v = ~v
    flag = na if not na_first else ~na
    if v.ndim == 1:  # words: each row's flag and big-endian word written as two elements, not byte by byte
        size = v.dtype.itemsize
        out = np.empty((n, 1 + size), np.uint8)
        words = np.dtype({"names": ["na", "v"], "formats": ["u1", f">u{size}"], "offsets": [0, 1], "itemsize": 1 + size})
        rec = out.reshape(-1).view(words)
        rec["na"] = flag
        rec["v"] = np.where(na, 0, v) if na.any() else v
        return out
    out = np.empty((n, 1 + v.shape[1]), np.uint8)  # one allocation, each byte written once
    out[:, 0] = flag
    out[:, 1:] = v
    if na.any():
        out[na, 1:] = 0
    return out


def _nan_high(dtype, descending: bool, na_first: bool) -> bool:
    """Whether a float column's NaN that is not missing takes the highest word (else the lowest),
    before the words are inverted for a descending column, so that it sorts where pandas puts it: a
    nullable float's (``Float64``) as a value above +inf (last ascending, first descending); an
    Arrow float's as pyarrow orders it (:func:`nan_high`)."""
    return nan_high(descending, na_first) if isinstance(dtype, pd.ArrowDtype) else True


def nan_high(descending: bool, na_first: bool) -> bool:
    """Whether an Arrow float's NaN (a value, not missing) takes the highest word, else the lowest,
    before the words are inverted for a descending column: beside the missing values, between
    them and the other values, as pyarrow orders it."""
    return na_first == descending


def number_word(x, xp=np, kind=None, out=None) -> tuple:
    """``(words, missing)`` of an array (NumPy, or CuPy with ``xp=cupy``) of numbers, booleans,
    datetimes or durations of a NumPy dtype: unsigned words whose order is the values' order
    (sign bit flipped; all bits flipped for negative floats; -0.0 as +0.0; float16 as float64),
    and where the values are missing (NaN, NaT), whose words are 0. The one home of the order of
    numbers: the keys made on the host (:func:`_column_key`) and on a GPU (:func:`write_number_keys`).
    ``kind``: the values' NumPy kind where ``x`` holds them as other words (``"M"``/``"m"`` for
    datetimes or durations given as int64, which CuPy holds). ``out``: where integers' words are
    written (unsigned, at least as wide), so they are made once, in memory the caller chose."""
    kind, size = kind or x.dtype.kind, x.dtype.itemsize
    if kind == "b":
        return x.astype(xp.uint8), xp.zeros(len(x), dtype=bool)
    if kind in "mM":  # NaT is the smallest int64
        i = x.view(xp.int64)
        na = i == np.iinfo(np.int64).min
        return xp.where(na, 0, i ^ np.int64(np.iinfo(np.int64).min)).view(xp.uint64), na
    if kind in "iu":
        u = x.view(f"u{size}")
        if kind == "i":
            u = xp.bitwise_xor(u, xp.array(1 << (8 * size - 1), dtype=u.dtype), out=out)
        elif out is not None:
            out[...] = u
            u = out
        return u, xp.zeros(len(x), dtype=bool)
    if kind != "f":
        raise TypeError(f"not a number: {x.dtype}")
    if size not in (4, 8):
        x, size = x.astype(np.float64), 8
    na = xp.isnan(x)
    bits = xp.where(na, 0, x + x.dtype.type(0.0)).astype(x.dtype).view(f"u{size}")  # -0.0 → +0.0
    top = xp.array(1 << (8 * size - 1), dtype=bits.dtype)
    return xp.where(na, 0, xp.where(bits & top, ~bits, bits | top)), na


def write_number_keys(spec, columns, out, xp, kinds=None, missing=None, nan_high=None) -> None:
    """The keys of ``spec`` (all its columns numbers, booleans, datetimes or durations of NumPy
    dtypes, given as arrays of ``xp``, one per ``spec.by`` column; ``kinds``: their NumPy kinds
    where an array holds other words, see :func:`number_word`) written into the first
    ``spec.width(())`` bytes of every row of ``out`` (``(n, width)`` uint8 of ``xp``), as
    :meth:`KeySpec.encode` writes them on the host: byte slices, for arrays on a GPU.
    ``missing``: per column, None or a boolean array of the rows whose value is missing (a null,
    as pandas' ``NA`` of a nullable column: its value in ``columns`` is ignored). ``nan_high``:
    per column, None where a float's NaN is missing (NumPy's, pandas' own floats), else whether
    NaN, a value there (an Arrow float's), takes the highest word or the lowest
    (:func:`nan_high`)."""
    na_first, at = spec.na_position == "first", 0
    none = [None] * len(columns)
    for x, ascending, kind, gone, high in zip(columns, spec.ascending, kinds or none, missing or none, nan_high or none):
        word, na = number_word(x, xp, kind)
        size = word.dtype.itemsize
        if high is not None and (kind or x.dtype.kind) == "f":  # NaN a value, not missing: its word is 0 (number_word's), else the highest
            nan = na if gone is None else na & ~gone
            word = xp.where(nan, xp.array(np.iinfo(word.dtype).max, dtype=word.dtype), word) if high else word
            na = xp.zeros(len(x), dtype=bool) if gone is None else gone
        elif gone is not None:
            na = na | gone
        if not ascending:
            word = ~word
        if gone is not None or not ascending:  # a missing value's word is 0 (NaN's and NaT's already are, ascending)
            word = xp.where(na, 0, word)
        out[:, at] = ~na if na_first else na
        out[:, at + 1 : at + 1 + size] = word.view(xp.uint8).reshape(len(word), size)[:, ::-1]  # big-endian
        at += 1 + size


def unordered(s: pd.Series) -> TypeError:
    dtype = getattr(s.dtype, "pyarrow_dtype", s.dtype)
    kinds = "numbers, decimals, booleans, strings, bytes, dates and times"
    return UnsupportedType(f"cannot sort by column {s.name!r} of type {dtype}; dsort sorts by {kinds}")


def _from_arrow(s: pd.Series) -> pd.Series:
    """An Arrow-backed column (``pd.ArrowDtype``) in a form :func:`_column_key` orders: numbers,
    booleans and strings as they are; timestamps, dates, times and durations as their integers
    (one unit per column, timestamps in UTC); any other type a :class:`TypeError`."""
    import pyarrow as pa

    t = s.dtype.pyarrow_dtype
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) or _variable_width(t):
        return s
    if pa.types.is_timestamp(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_duration(t):
        return s.astype(pd.ArrowDtype(pa.int32() if t.bit_width == 32 else pa.int64()))
    if pa.types.is_decimal(t):  # 32, 64 (cudf's), 128 or 256 bits
        return s
    raise unordered(s)


def _is_decimal(dtype) -> bool:
    if not isinstance(dtype, pd.ArrowDtype):
        return False
    import pyarrow as pa

    return pa.types.is_decimal(dtype.pyarrow_dtype)


def _decimal_bytes(s: pd.Series) -> np.ndarray:
    """Arrow decimals (one scale per column) as their unscaled integers' order-preserving bytes:
    Arrow holds each as a little-endian two's complement integer of 4, 8, 16 or 32 bytes; big-endian with
    the sign bit flipped, they compare as unsigned bytes in the decimals' order."""
    import pyarrow as pa

    arr = pa.chunked_array(pa.array(s.array)).combine_chunks()
    width = arr.type.byte_width
    data = np.frombuffer(arr.buffers()[1], np.uint8) if len(arr) else np.empty(0, np.uint8)
    rows = data[arr.offset * width : (arr.offset + len(arr)) * width].reshape(len(arr), width)
    out = np.ascontiguousarray(rows[:, ::-1])
    out[:, 0] ^= 0x80
    return out


def _value_buffers(s: pd.Series):
    """A string column's value bytes and kinds: ``(data uint8, offsets int64, kinds)``, row ``i``
    being ``data[offsets[i]:offsets[i + 1]]``, missing values empty; ``kinds`` the types of its
    values, as :func:`join_kinds` compares them across partitions (``("str",)``, ``("bytes",)``,
    an object column's numbers' types; ``()`` where it holds no value). Arrow-backed strings
    (pandas' default string dtype) as Arrow holds them; object columns, and strings stored as
    Python objects, by :func:`_object_buffers`."""
    import pyarrow as pa

    arr = None
    if not pdt.is_object_dtype(s.dtype) and hasattr(s.array, "__arrow_array__"):
        try:
            arr = pa.chunked_array(pa.array(s.array)).combine_chunks()
        except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError, UnicodeEncodeError):  # Python strings: a lone surrogate
            arr = None
    if arr is None:
        return _object_buffers(s)
    binary = pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)
    return (*_arrow_buffers(arr), () if arr.null_count == len(arr) else ("bytes",) if binary else ("str",))


def _arrow_buffers(arr):
    """An Arrow string or binary array's ``(data uint8, offsets int64)``, nulls empty."""
    import pyarrow as pa

    if not _variable_width(arr.type):
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = arr.fill_null(b"" if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type) else "")
    _, offsets, data = arr.buffers()
    kind = np.int64 if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type) else np.int32
    offsets = np.frombuffer(offsets, kind)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    return data, offsets


NUMBERS = (int, float, np.integer, np.floating, np.bool_)  # Python's bool is an int: 0 and 1, as it compares them
# the kinds of an object column of numbers, by what pandas' infer_dtype says of it (else its values' types)
NUMBER_KINDS = {"integer": ("int",), "floating": ("float",), "mixed-integer-float": ("int", "float"), "boolean": ("bool",)}
NUMBER_BYTES = 10  # an object column's number: the nearest float64's word (8), then the int's distance from it (2)


def _object_buffers(s: pd.Series):
    """An object column's values (or Python-stored strings) as bytes that order them as Python
    compares them, ``(data, offsets, kinds)`` as :func:`_value_buffers` gives them, missing values empty:
    strings as UTF-8, lone surrogates kept (``surrogatepass``: their bytes lie between those of
    U+D7FF and U+E000, in code point order); bytes as they are; numbers (ints, floats and bools,
    Python's or NumPy's) as :func:`_number_bytes`. Values of any other type, or of types that do not
    compare with each other (strings and numbers, which pandas' sort refuses too), are refused with
    an :class:`UnsupportedType` that names the column and the types."""
    import pyarrow as pa

    na = s.isna().to_numpy(dtype=bool)
    values = s.to_numpy(dtype=object)
    kind = pdt.infer_dtype(values, skipna=True)
    if kind not in ("string", "bytes"):  # numbers or none; or missing values it does not skip (NaT): looked at without them
        present = values[~na]
        kind = pdt.infer_dtype(present, skipna=False)
    if kind in ("string", "bytes"):
        try:
            arr = pa.array(values, mask=na, type=pa.large_string() if kind == "string" else pa.large_binary())
        except UnicodeEncodeError:  # a lone surrogate, which UTF-8 proper has no bytes for
            arr = pa.array([None if m else v.encode("utf-8", "surrogatepass") for v, m in zip(values, na)], type=pa.large_binary())
        return (*_arrow_buffers(arr), ("str",) if kind == "string" else ("bytes",))
    if kind == "empty":  # no values
        return np.empty(0, np.uint8), np.zeros(len(s) + 1, np.int64), ()
    found = None if kind in NUMBER_KINDS else dict.fromkeys(map(type, present))
    if found is None or all(issubclass(t, NUMBERS) for t in found):
        rows = _number_bytes(present, s.name)
        kinds = NUMBER_KINDS[kind] if found is None else tuple(t.__name__ for t in found)
        return rows.reshape(-1), np.concatenate([[0], np.cumsum(np.where(na, 0, NUMBER_BYTES))]), kinds
    other = [t.__name__ for t in found if not issubclass(t, (str, bytes, *NUMBERS))]
    if other:
        raise UnsupportedType(
            f"cannot sort by column {s.name!r}: it holds {', '.join(other)} values; dsort sorts an object column of strings, "
            "bytes or numbers: give it a dtype (astype) first"
        )
    names = ", ".join(t.__name__ for t in found)
    raise Incomparable(f"cannot sort by column {s.name!r}: it holds values of types {names}, which do not compare with each other")


def _number_bytes(values: np.ndarray, name) -> np.ndarray:
    """``(n, NUMBER_BYTES)`` uint8 of numbers (an object array of ints, floats and bools, none
    missing) whose order is Python's, exactly: each value's nearest float64 (its word,
    :func:`number_word`), then how far an int lies from it (int16, sign flipped, big-endian), which
    orders the ints above 2**53 that one float64 stands for. Ints of 64 bits at most."""
    try:
        f = values.astype(np.float64)
    except OverflowError:  # an int beyond any float64: refused below
        f = None
    big = np.flatnonzero(np.abs(f) >= 2.0**53) if f is not None else range(len(values))
    off = np.zeros(len(values), np.int64)
    for i in big:  # ints that a float64 may not hold exactly
        v = values[i]
        if isinstance(v, (float, np.floating)):
            continue
        if not -(2**64) < int(v) < 2**64:
            raise UnsupportedType(f"cannot sort by column {name!r}: it holds an int of more than 64 bits ({int(v)})")
        off[i] = int(v) - int(f[i]) if f is not None else 0
    word, _ = number_word(f)
    out = np.empty((len(values), NUMBER_BYTES), np.uint8)
    out[:, :8] = word.astype(">u8").view(np.uint8).reshape(-1, 8)
    out[:, 8:] = (off + 2**15).astype(">u2").view(np.uint8).reshape(-1, 2)
    return out


def column(df: pd.DataFrame, label) -> pd.Series:
    """The sort column ``label`` of a frame: a column, else a level of the index of that name (as
    pandas' ``sort_values`` takes them; a label that names both is an error there and here)."""
    names = [n for n in df.index.names if n is not None]
    if label in df.columns:
        if label in names:
            raise ValueError(f"{label!r} is both a column and an index level name: ambiguous")
        s = df[label]
        if isinstance(s, pd.DataFrame):
            raise ValueError(f"the column label {label!r} is not unique")
        return s
    if label in names:
        return pd.Series(df.index.get_level_values(label), index=df.index, name=label)
    raise KeyError(f"no column or index level {label!r}; the columns are {', '.join(map(str, df.columns))}")


def _is_string(s: pd.Series) -> bool:
    """Strings, or Arrow binary: values of varying byte width, ordered by their bytes."""
    if isinstance(s.dtype, pd.ArrowDtype):
        return _variable_width(s.dtype.pyarrow_dtype)
    return pdt.is_string_dtype(s.dtype) or pdt.is_object_dtype(s.dtype)


def _variable_width(t) -> bool:
    """An Arrow string or binary type: its values' bytes (UTF-8 or raw) compare as the values do."""
    import pyarrow as pa

    return pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)


def string_widths(df, by) -> dict:
    """The widest value (UTF-8 bytes; at least 1) of each string ``by`` column of a pandas partition."""
    out = {}
    for c in by:
        s = column(df, c)
        if _is_string(s):
            out[c] = _widest(_value_buffers(s)[1])
    return out


def _widest(offsets) -> int:
    """The widest value (bytes; at least 1) of a string column's :func:`_value_buffers` offsets."""
    return max(int(np.diff(offsets).max()) if len(offsets) > 1 else 0, 1)


def string_columns(meta: pd.DataFrame, by) -> list:
    """The ``by`` columns that hold strings (their byte width depends on the data)."""
    return [c for c in by if _is_string(column(meta, c))]


@dataclass(frozen=True)
class KeySpec:
    """The key of one sort: its columns, their directions, where missing values go, and the byte
    sizes of the columns apart from string values (from the frame's meta), so that keys encoded at
    different string widths can be brought to one (:func:`widen`)."""

    by: tuple
    ascending: tuple
    na_position: str
    strings: tuple  # per column: True for a string column
    fixed: tuple  # per column: its bytes, a string's value bytes not counted
    word: str | None = None  # the dtype (from the meta) of one column of NumPy numbers or booleans: keys may be words (:meth:`words`)

    @classmethod
    def of(cls, meta: pd.DataFrame, by, ascending=True, na_position="last") -> KeySpec:
        """The spec of sorting frames like ``meta`` (an empty frame of their dtypes) by ``by``;
        raises on columns it cannot order, before any data is read."""
        by, ascending = normalize(by, ascending)
        if na_position not in NA_POSITIONS:
            raise ValueError(f"na_position must be 'last' or 'first', got {na_position!r}")
        strings = tuple(_is_string(column(meta, c)) for c in by)
        empty = meta.iloc[:0]
        fixed = tuple(
            _column_key(column(empty, c), 1, not a, na_position == "first").shape[1] - int(st) for c, a, st in zip(by, ascending, strings)
        )
        dtype = column(meta, by[0]).dtype if len(by) == 1 else None
        word = str(dtype) if dtype is not None and _word_dtype(dtype) else None
        return cls(tuple(by), tuple(ascending), na_position, strings, fixed, word)

    @classmethod
    def of_word(cls, by, dtype, ascending=True, na_position="last") -> KeySpec:
        """The spec of sorting by one column ``by`` of NumPy ``dtype`` (numbers or booleans) that
        holds no missing value, keyed by words (:attr:`word`): what :meth:`of` gives such a column,
        made from the dtype alone (no meta frame, so no pandas: a Parquet sort by one such column
        runs on Arrow and NumPy)."""
        return cls.of_numbers([by], [dtype], [ascending], na_position, word=True)

    @classmethod
    def of_numbers(cls, by, dtypes, ascending=True, na_position="last", word: bool = False) -> KeySpec:
        """The spec of sorting by columns ``by`` of NumPy ``dtypes`` (numbers or booleans: of an
        Arrow table, say, whose keys :func:`write_number_keys` writes), what :meth:`of` gives
        such columns, made from the dtypes alone (no meta frame, so no pandas); ``word``: one
        column that holds no missing value, keyed by words (:attr:`word`)."""
        by, ascending = normalize(list(by), ascending)
        if na_position not in NA_POSITIONS:
            raise ValueError(f"na_position must be 'last' or 'first', got {na_position!r}")
        dtypes = [np.dtype(d) for d in dtypes]
        bad = [str(d) for d in dtypes if not _word_dtype(d)]
        if bad or len(dtypes) != len(by) or (word and len(by) != 1):
            raise TypeError(f"not one dtype of one word per column: {', '.join(map(str, dtypes))}")
        fixed = tuple(1 + number_word(np.empty(0, d))[0].dtype.itemsize for d in dtypes)  # a flag byte, then the word (_column_key)
        return cls(tuple(by), tuple(ascending), na_position, (False,) * len(by), fixed, dtypes[0].name if word else None)

    def widths(self, df) -> tuple:
        """The string widths of a partition, one per column (0 for other columns)."""
        w = string_widths(df, [c for c, st in zip(self.by, self.strings) if st])
        return tuple(w.get(c, 0) if st else 0 for c, st in zip(self.by, self.strings))

    def width(self, widths) -> int:
        """Bytes of a key at string widths ``widths``."""
        return int(sum(self.fixed) + sum(widths))

    def encode(self, df, widths=None) -> tuple[np.ndarray, tuple]:
        """``(keys, widths)``: the partition's keys as byte rows, at ``widths`` (default its own)."""
        keys, widths, _ = self.encode_part(df, widths)
        return keys, widths

    def encode_part(self, df, widths=None) -> tuple[np.ndarray, tuple, tuple]:
        """``(keys, widths, kinds)``: :meth:`encode`'s, and per column the types of its values (a
        string or object column's, :func:`_value_buffers`; ``()`` for the others), which
        :func:`join_kinds` checks where partitions meet. Found as the keys are made: each string
        column's values are read once, for its width, its kinds and its keys."""
        na_first = self.na_position == "first"
        given = None if widths is None else tuple(widths)
        cols, own, kinds = [], [], []
        for i, (c, a, st) in enumerate(zip(self.by, self.ascending, self.strings)):
            s = column(df, c)
            buffers = _value_buffers(s) if st and _is_string(s) else None
            own.append(_widest(buffers[1]) if buffers else 0)
            kinds.append(buffers[2] if buffers else ())
            cols.append(_column_key(s, own[-1] if given is None else given[i], not a, na_first, buffers))
        keys = cols[0] if len(cols) == 1 else np.concatenate(cols, axis=1)
        return keys, tuple(own) if given is None else given, tuple(kinds)

    def words(self, df) -> np.ndarray:
        """The partition's keys as one uint64 per row whose ascending order is the wanted order
        (where :attr:`word`): the value's word (:func:`number_word`) at the meta's dtype (a
        partition of another dtype is cast to it, so every partition's words compare), inverted
        when descending; a float's NaN 0 when first and 2**64 - 1 when last, which no float's word
        is (they lie within those of -inf and +inf, either way). The same order as
        :meth:`encode`'s byte rows, as one word: no flag byte, sorted as numbers."""
        if not self.word:
            raise ValueError(f"keys by {list(self.by)} do not fit one word: use encode")
        return self.words_of(column(df, self.by[0]).to_numpy(dtype=np.dtype(self.word)))

    def words_of(self, x: np.ndarray) -> np.ndarray:
        """:meth:`words` of the sort column's values ``x`` (a NumPy array; cast to the spec's
        dtype where it is another), never written."""
        x = np.asarray(x, dtype=np.dtype(self.word))
        v, na = number_word(x, out=host.empty(len(x), np.uint64) if x.dtype.kind in "iu" else None)
        if v.dtype != np.uint64 or np.may_share_memory(v, x):  # a copy, once: the partition's own data is never written
            v = host.copy(v, np.uint64)
        if not self.ascending[0]:
            np.invert(v, out=v)
        if na.any():
            v[na] = 0 if self.na_position == "first" else np.iinfo(np.uint64).max
        return v


def _word_dtype(dtype) -> bool:
    """A NumPy boolean, integer or float dtype: its values' order fits one uint64 word, missing
    values (NaN) included. Not pandas' nullable types, whose missing values need the flag byte."""
    return isinstance(dtype, np.dtype) and dtype.kind in "biuf"


def common_widths(all_widths) -> tuple:
    """The widths at which keys of every one of ``all_widths`` compare: the widest of each column."""
    all_widths = [tuple(w) for w in all_widths]
    return tuple(int(max(c)) for c in zip(*all_widths)) if all_widths else ()


def join_kinds(spec: KeySpec, all_kinds) -> tuple:
    """The kinds of several parts' keys (:meth:`KeySpec.encode_part`'s, or a join's; ``()``: keys
    with no string or object column) as one: per column, the types met, in the order met. Each
    part's keys are in order alone, but where one part of a column holds numbers and another
    strings (or bytes), they do not compare, and pandas' sort of the parts together refuses them:
    refused here too, with an :class:`Incomparable` naming the column and the types, where the
    parts meet (a run of several partitions, the plan, the cuts). Empty and all-missing parts have
    no kinds; numbers of any type compare with each other."""
    joined = [dict() for _ in spec.by]
    for kinds in all_kinds:
        for met, names in zip(joined, kinds):
            met.update(dict.fromkeys(names))
    for c, met in zip(spec.by, joined):
        if not comparable(met):
            raise Incomparable(
                f"cannot sort by column {c!r}: its partitions hold values of {type_names(met)}, which do not compare with each other"
            )
    return tuple(tuple(met) for met in joined)


def comparable(kinds) -> bool:
    """Whether values of the types ``kinds`` (a column's kinds, :meth:`KeySpec.encode_part`'s,
    several parts' or boundaries' together) compare with each other: strings with strings, bytes
    with bytes, numbers of any type with numbers (what an object column's kinds name); no others."""
    return len({n if n in ("str", "bytes") else "number" for n in kinds}) <= 1


def type_names(names) -> str:
    """``type int``, ``types int and str``, ``types int, float and str``: each name once, in order,
    as dsort's refusals of values that do not compare name them."""
    *most, last = dict.fromkeys(names)
    return f"types {', '.join(most)} and {last}" if most else f"type {last}"


def widen(spec: KeySpec, keys: np.ndarray, have, want) -> np.ndarray:
    """Keys encoded at string widths ``have`` re-spelled at widths ``want`` (each at least as wide),
    equal to encoding the rows at ``want``: each string column's value gets pad bytes after it,
    before its length; a pad byte is a NUL as encoded (0xFF when descending), 0 on a missing value."""
    have, want = tuple(have), tuple(want)
    if have == want:
        return keys
    n = len(keys)
    pieces, at = [], 0
    for st, size, a, h, w in zip(spec.strings, spec.fixed, spec.ascending, have, want):
        end = at + size + h
        if not st or w == h:
            pieces.append(keys[:, at:end])
        else:
            if w < h:
                raise ValueError(f"cannot narrow a string key from {h} to {w} bytes")
            flag = keys[:, at]
            pad = np.zeros((n, w - h), np.uint8)
            if not a:  # a missing value's flag is 1 when missing values go last, 0 when first
                present = flag == (1 if spec.na_position == "first" else 0)
                pad[present] = 0xFF
            pieces += [keys[:, at : at + 1 + h], pad, keys[:, at + 1 + h : end]]
        at = end
    return np.ascontiguousarray(np.concatenate(pieces, axis=1))


def encode_keys(df: pd.DataFrame, by, ascending=True, na_position="last", widths=None) -> np.ndarray:
    """The ``by`` columns of a pandas dataframe as byte rows ``(len(df), width)`` whose unsigned
    byte order is pandas' order for ``sort_values(by, ascending, na_position)``. ``widths``: the
    byte width of each string column by name (equal across partitions; :func:`string_widths`),
    default this frame's own."""
    spec = KeySpec.of(df, by, ascending, na_position)
    if widths:
        widths = tuple(max(int(widths.get(c, 0)), 1) if st else 0 for c, st in zip(spec.by, spec.strings))
    return spec.encode(df, widths or None)[0]


def normalize(by, ascending):
    """``by`` as a list of column labels (a list of them, or one label: any hashable, an integer
    or a tuple too, as pandas takes them) and ``ascending`` as one bool per column (a bool, 0 or
    1, NumPy's too, or a list of them)."""
    by = list(by) if isinstance(by, list) else [by]
    if not by:
        raise ValueError("sort_values needs at least one column in by")
    one = (bool, np.bool_, int, np.integer)
    if isinstance(ascending, one):
        ascending = [ascending] * len(by)
    elif not isinstance(ascending, (list, tuple)) or not all(isinstance(a, one) for a in ascending):
        raise TypeError(f"ascending must be a bool or a list of bools, got {ascending!r}")
    if any(a not in (0, 1) for a in ascending):
        raise ValueError(f"ascending takes True/False (or 1/0), got {ascending!r}")
    if len(ascending) != len(by):
        raise ValueError(f"Length of ascending={ascending} != length of by={by}")  # dask's words
    return by, [bool(a) for a in ascending]


# -- fixed-width rows --------------------------------------------------------------------------------


FIXED_KINDS = "biufmM"  # NumPy bools, integers, floats, datetimes and durations (tz-naive)


def _has_nulls(x) -> bool:
    """Whether a cudf series or index holds nulls (NaN is a value, not a null)."""
    if hasattr(x, "start") and hasattr(x, "step"):  # a RangeIndex
        return False
    return bool(x.has_nulls if hasattr(x, "has_nulls") else x.to_series().has_nulls)


def _validity(s):
    """A cudf series' validity as CuPy uint8: 1 where it holds a value (NaN included), 0 at its
    nulls (its ``isna`` would count NaN too: pylibcudf's ``is_valid`` does not)."""
    import cudf
    import pylibcudf as plc

    column, meta = s.to_pylibcudf()
    return cudf.Series.from_pylibcudf(plc.unary.is_valid(column), meta).values.astype(np.uint8)


@dataclass(frozen=True)
class RowCodec:
    """A frame whose columns and index all have fixed-width NumPy dtypes, as byte rows: each
    row's columns' bytes, then its index's, so that a run of such rows needs no pickling and can
    ride with its keys through the run store, onto the GPUs too. :meth:`of` says None for other
    frames (strings, nullable and Arrow types, categoricals, a MultiIndex)."""

    meta: object  # an empty frame of the columns and index
    dtypes: tuple  # per column, then the index: NumPy dtype strings (with nulls: a validity byte per column before the index)
    nulls: bool = False  # cudf frames: each column's validity rides in the row too (gpu_columns, cudf_frame)

    @classmethod
    def of(cls, meta: pd.DataFrame, nulls: bool = False):
        if isinstance(meta.index, pd.MultiIndex):
            return None
        dtypes = [*meta.dtypes, meta.index.dtype]
        if not all(isinstance(d, np.dtype) and d.kind in FIXED_KINDS for d in dtypes):
            return None
        if meta.columns.has_duplicates:
            return None
        strs = [np.dtype(d).str for d in dtypes]
        if nulls:
            strs = strs[:-1] + ["|u1"] * (len(strs) - 1) + strs[-1:]
        return cls(meta.iloc[:0], tuple(strs), nulls)

    @property
    def width(self) -> int:
        """The frame's columns (without the validity bytes and the index)."""
        return len(self.meta.columns)

    @property
    def row_bytes(self) -> int:
        return int(sum(np.dtype(d).itemsize for d in self.dtypes))

    def _fields(self, rows: np.ndarray, at: int) -> np.ndarray:
        """``rows`` (C-contiguous ``(n, width)`` uint8) as n records whose fields are the columns
        then the index, from byte ``at`` of each row on: each value read or written as one element,
        not byte by byte."""
        names = [f"f{i}" for i in range(len(self.dtypes))]
        struct = np.dtype({"names": names, "formats": list(self.dtypes), "offsets": self._offsets(at), "itemsize": rows.shape[1]})
        return np.ascontiguousarray(rows).reshape(-1).view(struct)

    def columns(self, df: pd.DataFrame, index: bool = True) -> list:
        """The frame's columns, then its index (``index=False``: not), as NumPy arrays of the
        codec's dtypes."""
        values = [df[c].to_numpy() for c in df.columns] + ([df.index.to_numpy()] if index else [])
        return [np.asarray(v, dtype=d) for v, d in zip(values, self.dtypes)]

    def frame(self, columns: list) -> pd.DataFrame:
        """The frame of :meth:`columns`' arrays (NumPy; or their bytes as unsigned words, as
        :meth:`pick` gives them), which it holds as they are (no copy: pandas' default for a dict
        of arrays copies them into one block, a pass over every byte into new memory)."""
        columns = [x if x.dtype == d else x.view(d) for x, d in zip(columns, self.dtypes)]
        meta = self.meta
        index = pd.Index(columns[-1], name=meta.index.name, dtype=meta.index.dtype, copy=False)
        data = dict(zip(range(len(columns) - 1), columns[:-1]))
        return pd.DataFrame(data, index=index, copy=False).set_axis(meta.columns, axis=1)

    def gpu_columns(self, df) -> list:
        """:meth:`columns` of a cudf frame (a dask-cudf partition): CuPy arrays on its GPU, no copy
        to the host; datetimes and durations as int64 (CuPy has neither). With :attr:`nulls`, each
        column's nulls are filled (NaN for floats, 0 or False else) and its validity (1: a value,
        NaN included) follows the columns, before the index; without, a column with nulls is
        refused (:class:`~dsort.core.errors.UnsupportedValue`). An index with nulls is refused."""
        import cupy

        def words(x, d):  # x at the dtype CuPy holds for d (datetimes and durations as int64), converted by cudf
            want = np.dtype(np.int64) if np.dtype(d).kind in "mM" else np.dtype(d)
            return x if x.dtype == want else x.astype(want)  # on cudf's stream, which the caller waits for; nulls kept

        values, valid = [], []
        for name, d in zip(df.columns, self.dtypes):
            x, kind = words(df[name], d), np.dtype(d).kind
            gaps = _has_nulls(x)
            if gaps and not self.nulls:
                raise UnsupportedValue(f"column {name!r} holds nulls: dsort sorts cudf frames without nulls for now (fillna first)")
            fill = np.nan if kind == "f" else False if kind == "b" else 0
            values.append(x.to_cupy(na_value=fill) if gaps else x.values)
            if self.nulls:
                valid.append(_validity(x) if gaps else cupy.ones(len(x), np.uint8))
        x = df.index
        if _has_nulls(x):
            raise UnsupportedValue("the index holds nulls: dsort sorts cudf frames by an index without nulls")
        if hasattr(x, "start") and hasattr(x, "step"):  # a RangeIndex: no column of its own
            index = cupy.arange(x.start, x.stop, x.step, dtype=np.int64)
        else:
            index = words(x, self.dtypes[-1]).values
        return values + valid + [index]

    def missing(self, columns: list, i: int):
        """Column ``i``'s nulls among :meth:`gpu_columns`' arrays (a boolean array), or None."""
        return columns[self.width + i] == 0 if self.nulls else None

    def null_columns(self, rows, at: int) -> list:
        """With :attr:`nulls`, whether each column holds a null in any of ``rows`` (as :meth:`place`
        wrote them from byte ``at`` on): one look at their validity bytes (one wait), where
        :meth:`cudf_frame` would look column by column; else no column does."""
        k = self.width
        if not self.nulls or not len(rows):
            return [False] * k
        first = self._offsets(at)[k]
        return [bool(v) for v in (rows[:, first : first + k] == 0).any(axis=0).tolist()]

    def cudf_frame(self, columns: list, nulls: list | None = None):
        """:meth:`frame` as a cudf frame (CuPy arrays in, as :meth:`pick` gives them on a GPU): the
        rows stay on the GPU, NaN stays NaN (cudf would make it a null by default), and with
        :attr:`nulls` the nulls come back where the validity bytes say (looked for only in the
        columns ``nulls`` names, where given: :meth:`null_columns`)."""
        import cudf

        def values(x, d):
            d = np.dtype(d)
            return cudf.Series(x.view(np.int64)).astype(d) if d.kind in "mM" else cudf.Series(x.view(d), nan_as_null=False)

        k = self.width
        data = {}
        for i, (x, d) in enumerate(zip(columns[:k], self.dtypes[:k])):
            data[i] = values(x, d)
            if self.nulls and (nulls is None or nulls[i]):
                gone = columns[k + i].view(np.uint8) == 0
                if bool(gone.any()):
                    data[i] = data[i].mask(gone)  # nulls where the validity says; NaN left as it is
        out = cudf.DataFrame(data, nan_as_null=False)
        index = values(columns[-1], self.dtypes[-1])
        out.index = cudf.Index(index, name=self.meta.index.name, nan_as_null=False)  # set, not aligned
        out.columns = self.meta.columns
        return out

    def _offsets(self, at: int) -> list:
        return [at + int(o) for o in np.cumsum([0] + [np.dtype(d).itemsize for d in self.dtypes[:-1]])]

    def encode(self, df: pd.DataFrame, out: np.ndarray | None = None, at: int = 0) -> np.ndarray:
        """``(len(df), row_bytes)`` uint8: the rows' bytes; or written into bytes ``at`` on of
        every row of ``out`` (``(len(df), width)`` uint8, C-contiguous), which is returned."""
        if out is None:
            out = np.empty((len(df), self.row_bytes), np.uint8)
        elif not out.flags.c_contiguous:  # the records would view a copy: nothing written to out
            raise ValueError("RowCodec.encode writes into C-contiguous rows only")
        records = self._fields(out, at)
        for name, v in zip(records.dtype.names, self.columns(df)):
            records[name] = v
        return out

    def decode(self, rows: np.ndarray, at: int = 0) -> pd.DataFrame:
        """The frame of ``rows`` (``(n, width)`` uint8 holding :meth:`encode`'s bytes from byte
        ``at`` of every row on)."""
        return self.frame(self.unpack(rows, at))

    def unpack(self, rows: np.ndarray, at: int = 0) -> list:
        """:meth:`columns` of :meth:`decode`'s frame: new contiguous arrays, from ``rows`` on the host."""
        records = self._fields(rows, at)
        return [host.copy(records[name]) for name in records.dtype.names]

    def place(self, columns: list, out, at: int) -> None:
        """:meth:`encode` of arrays of any module (CuPy's on a GPU: byte slices, no structured views):
        ``columns`` (as :meth:`columns` gives them) written into bytes ``at`` on of every row of ``out``."""
        for x, d, off in zip(columns, self.dtypes, self._offsets(at)):
            size = np.dtype(d).itemsize
            out[:, off : off + size] = x.view(out.dtype).reshape(len(x), size)

    def pick(self, rows, at: int) -> list:
        """The inverse of :meth:`place`: the columns' bytes as unsigned words (arrays of ``rows``'
        module, contiguous: CuPy has no datetimes), for :meth:`frame`."""
        n, sizes = len(rows), [np.dtype(d).itemsize for d in self.dtypes]
        return [rows[:, off : off + size].copy().view(f"u{size}").reshape(n) for size, off in zip(sizes, self._offsets(at))]
