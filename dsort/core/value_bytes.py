"""The bytes of one key column's values, read from their buffers: NumPy's, Arrow's (strings,
decimals), or a Python object column's (strings, bytes and numbers, each in its own order:
:func:`_number_bytes`). :mod:`dsort.core.frame_keys` makes the keys from them.
"""

from __future__ import annotations

import numpy as np
from .lazy import pd, pdt

from .errors import Incomparable, UnsupportedType


def unordered(s: pd.Series) -> TypeError:
    dtype = getattr(s.dtype, "pyarrow_dtype", s.dtype)
    kinds = "numbers, decimals, booleans, strings, bytes, dates and times"
    return UnsupportedType(
        f"cannot sort by column {s.name!r} of type {dtype}; dsort sorts by {kinds}"
    )


def from_arrow(s: pd.Series) -> pd.Series:
    """An Arrow-backed column (``pd.ArrowDtype``) in a form :func:`_column_key` orders: numbers,
    booleans and strings as they are; timestamps, dates, times and durations as their integers
    (one unit per column, timestamps in UTC); any other type a :class:`TypeError`."""
    import pyarrow as pa

    t = s.dtype.pyarrow_dtype
    if (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or variable_width(t)
    ):
        return s
    if (
        pa.types.is_timestamp(t)
        or pa.types.is_date(t)
        or pa.types.is_time(t)
        or pa.types.is_duration(t)
    ):
        return s.astype(pd.ArrowDtype(pa.int32() if t.bit_width == 32 else pa.int64()))
    if pa.types.is_decimal(t):  # 32, 64 (cudf's), 128 or 256 bits
        return s
    raise unordered(s)


def is_decimal(dtype) -> bool:
    if not isinstance(dtype, pd.ArrowDtype):
        return False
    import pyarrow as pa

    return pa.types.is_decimal(dtype.pyarrow_dtype)


def decimal_bytes(s: pd.Series) -> np.ndarray:
    """Arrow decimals (one scale per column) as their unscaled integers' order-preserving bytes:
    Arrow holds each as a little-endian two's complement integer of 4, 8, 16 or 32 bytes; big-endian
    with the sign bit flipped, they compare as unsigned bytes in the decimals' order."""
    import pyarrow as pa

    arr = pa.chunked_array(pa.array(s.array)).combine_chunks()
    width = arr.type.byte_width
    data = np.frombuffer(arr.buffers()[1], np.uint8) if len(arr) else np.empty(0, np.uint8)
    rows = data[arr.offset * width : (arr.offset + len(arr)) * width].reshape(len(arr), width)
    out = np.ascontiguousarray(rows[:, ::-1])
    out[:, 0] ^= 0x80
    return out


def value_buffers(s: pd.Series):
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
        # Python strings: a lone surrogate
        except (pa.ArrowTypeError, pa.ArrowInvalid, TypeError, UnicodeEncodeError):
            arr = None
    if arr is None:
        return _object_buffers(s)
    binary = pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type)
    return (
        *_arrow_buffers(arr),
        () if arr.null_count == len(arr) else ("bytes",) if binary else ("str",),
    )


def _arrow_buffers(arr):
    """An Arrow string or binary array's ``(data uint8, offsets int64)``, nulls empty."""
    import pyarrow as pa

    if not variable_width(arr.type):
        arr = arr.cast(pa.large_string())
    if arr.null_count:
        arr = arr.fill_null(
            b"" if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type) else ""
        )
    _, offsets, data = arr.buffers()
    kind = (
        np.int64
        if pa.types.is_large_string(arr.type) or pa.types.is_large_binary(arr.type)
        else np.int32
    )
    offsets = np.frombuffer(offsets, kind)[arr.offset : arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8)
    return data, offsets


# Python's bool is an int: 0 and 1, as it compares them
NUMBERS = (int, float, np.integer, np.floating, np.bool_)
# the kinds of an object column of numbers, by what pandas' infer_dtype says of it (else its values'
# types)
NUMBER_KINDS = {
    "integer": ("int",),
    "floating": ("float",),
    "mixed-integer-float": ("int", "float"),
    "boolean": ("bool",),
}
# an object column's number: the nearest float64's word (8), then the int's distance from it (2)
NUMBER_BYTES = 10


def _object_buffers(s: pd.Series):
    """An object column's values (or Python-stored strings) as bytes that order them as Python
    compares them, ``(data, offsets, kinds)`` as :func:`value_buffers` gives them, missing values
    empty: strings as UTF-8, lone surrogates kept (``surrogatepass``: their bytes lie between those
    of U+D7FF and U+E000, in code point order); bytes as they are; numbers (ints, floats and bools,
    Python's or NumPy's) as :func:`_number_bytes`. Values of any other type, or of types that do not
    compare with each other (strings and numbers, which pandas' sort refuses too), are refused with
    an :class:`UnsupportedType` that names the column and the types."""
    import pyarrow as pa

    na = s.isna().to_numpy(dtype=bool)
    values = s.to_numpy(dtype=object)
    kind = pdt.infer_dtype(values, skipna=True)
    # numbers or none; or missing values it does not skip (NaT): looked at without them
    if kind not in ("string", "bytes"):
        present = values[~na]
        kind = pdt.infer_dtype(present, skipna=False)
    if kind in ("string", "bytes"):
        try:
            arr = pa.array(
                values, mask=na, type=pa.large_string() if kind == "string" else pa.large_binary()
            )
        except UnicodeEncodeError:  # a lone surrogate, which UTF-8 proper has no bytes for
            arr = pa.array(
                [None if m else v.encode("utf-8", "surrogatepass") for v, m in zip(values, na)],
                type=pa.large_binary(),
            )
        return (*_arrow_buffers(arr), ("str",) if kind == "string" else ("bytes",))
    if kind == "empty":  # no values
        return np.empty(0, np.uint8), np.zeros(len(s) + 1, np.int64), ()
    found = None if kind in NUMBER_KINDS else dict.fromkeys(map(type, present))
    if found is None or all(issubclass(t, NUMBERS) for t in found):
        rows = _number_bytes(present, s.name)
        kinds = NUMBER_KINDS[kind] if found is None else tuple(t.__name__ for t in found)
        return (
            rows.reshape(-1),
            np.concatenate([[0], np.cumsum(np.where(na, 0, NUMBER_BYTES))]),
            kinds,
        )
    other = [t.__name__ for t in found if not issubclass(t, (str, bytes, *NUMBERS))]
    if other:
        raise UnsupportedType(
            f"cannot sort by column {s.name!r}: it holds {', '.join(other)} values; dsort sorts an "
            "object column of strings, "
            "bytes or numbers: give it a dtype (astype) first"
        )
    names = ", ".join(t.__name__ for t in found)
    raise Incomparable(
        f"cannot sort by column {s.name!r}: it holds values of types {names}, which do not compare "
        "with each other"
    )


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
            raise UnsupportedType(
                f"cannot sort by column {name!r}: it holds an int of more than 64 bits ({int(v)})"
            )
        off[i] = int(v) - int(f[i]) if f is not None else 0
    word, _ = number_word(f)
    out = np.empty((len(values), NUMBER_BYTES), np.uint8)
    out[:, :8] = word.astype(">u8").view(np.uint8).reshape(-1, 8)
    out[:, 8:] = (off + 2**15).astype(">u2").view(np.uint8).reshape(-1, 2)
    return out


def number_word(x, xp=np, kind=None, out=None) -> tuple:
    """``(words, missing)`` of an array (NumPy, or CuPy with ``xp=cupy``) of numbers, booleans,
    datetimes or durations of a NumPy dtype: unsigned words whose order is the values' order
    (sign bit flipped; all bits flipped for negative floats; -0.0 as +0.0; float16 as float64),
    and where the values are missing (NaN, NaT), whose words are 0. The one home of the order of
    numbers: the keys made on the host (:func:`_column_key`) and on a GPU
    (:func:`write_number_keys`). ``kind``: the values' NumPy kind where ``x`` holds them as other
    words (``"M"``/``"m"`` for datetimes or durations given as int64, which CuPy holds). ``out``:
    where integers' words are written (unsigned, at least as wide), so they are made once, in memory
    the caller chose."""
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
    bits = (x + x.dtype.type(0.0)).view(f"u{size}")  # a new array; -0.0 → +0.0
    # all bits flipped where the sign is set, else the sign bit alone: the sign spread over the
    # word by an arithmetic shift, the top bit set in it, the word xor it (few passes, in place)
    flip = bits.view(f"i{size}") >> (8 * size - 1)
    flip = flip.view(bits.dtype)
    flip |= xp.array(1 << (8 * size - 1), dtype=bits.dtype)
    bits ^= flip
    if xp is not np:  # no wait for the GPU: a choice on the host would need one
        return xp.where(na, bits.dtype.type(0), bits), na
    if na.any():
        bits[na] = 0
    return bits, na


def variable_width(t) -> bool:
    """An Arrow string or binary type: its values' bytes (UTF-8 or raw) compare as the values do."""
    import pyarrow as pa

    return (
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    )
