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
the cuts) :func:`join_kinds` refuses kinds that do not compare (one partition of ints, one of
strings).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from .lazy import pd, pdt

from ..engine import host
from .errors import Incomparable
from .value_bytes import (
    decimal_bytes,
    from_arrow,
    is_decimal,
    number_word,
    unordered,
    value_buffers,
    variable_width,
)

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


def _column_key(
    s: pd.Series, width: int | None, descending: bool, na_first: bool, buffers=None
) -> np.ndarray:
    """One column as byte rows: a missing-value byte, then the value's order-preserving bytes
    (big-endian, sign bit flipped; all bits flipped for negative floats; inverted when
    descending, the missing-value byte never, so missing values stay last/first both ways).
    ``buffers``: a string column's :func:`value_buffers` where the caller has read them already."""
    n = len(s)
    if isinstance(s.dtype, pd.ArrowDtype):
        s = from_arrow(s)
    if isinstance(s.dtype, pd.SparseDtype):
        raise unordered(s)
    na = s.isna().to_numpy(dtype=bool, copy=True)
    dtype = s.dtype
    # in category order, as pandas sorts them (ordered or not)
    if isinstance(dtype, pd.CategoricalDtype):
        s = pd.Series(np.where(na, 0, s.cat.codes.to_numpy()).astype(np.int32), index=s.index)
        dtype = s.dtype
    if isinstance(dtype, pd.DatetimeTZDtype):
        s, dtype = s.dt.tz_convert("UTC").dt.tz_localize(None), np.dtype("datetime64[ns]")
    if is_decimal(dtype):
        v = decimal_bytes(s)
    elif pdt.is_bool_dtype(dtype):
        v, _ = number_word(s.to_numpy(dtype=bool, na_value=False))
    elif (
        pdt.is_integer_dtype(dtype)
        or pdt.is_datetime64_dtype(dtype)
        or pdt.is_timedelta64_dtype(dtype)
    ):
        if pdt.is_integer_dtype(dtype):
            x = s.to_numpy(dtype=np.dtype(getattr(dtype, "numpy_dtype", dtype)), na_value=0)
        else:
            x = s.to_numpy()
        v, missing = number_word(x)  # one unsigned word per row, written big-endian below
        na |= missing
    elif pdt.is_float_dtype(dtype):
        np_dtype = np.dtype(getattr(dtype, "numpy_dtype", dtype))
        v, missing = number_word(
            s.to_numpy(
                dtype=np_dtype if np_dtype.itemsize in (4, 8) else np.float64, na_value=np.nan
            )
        )
        # NaN that is a value, not missing: a nullable or Arrow float's (NumPy's NaN is missing)
        nan = missing & ~na
        if nan.any():
            v[nan] = np.iinfo(v.dtype).max if _nan_high(dtype, descending, na_first) else 0
    elif _is_string(s):
        data, offsets, _ = buffers or value_buffers(s)
        width = max(int(width or 0), 1)
        # UTF-8 bytes (an object column's numbers: bytes of their own) compare like the code points
        # that Python and pandas compare; NUL pads. The byte length follows (big-endian), so "a"
        # sorts before "a\0": padding alone would tie them. Built with array operations: each row's
        # bytes gathered from the buffers at once.
        size = np.diff(offsets)
        if len(size) and int(size.max()) > width:
            raise ValueError(
                f"column {s.name!r} holds a value of {int(size.max())} bytes, wider than the "
                f"{width} given"
            )
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
    # words: each row's flag and big-endian word written as two elements, not byte by byte
    if v.ndim == 1:
        size = v.dtype.itemsize
        out = np.empty((n, 1 + size), np.uint8)
        words = np.dtype(
            {
                "names": ["na", "v"],
                "formats": ["u1", f">u{size}"],
                "offsets": [0, 1],
                "itemsize": 1 + size,
            }
        )
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
    for x, ascending, kind, gone, high in zip(
        columns, spec.ascending, kinds or none, missing or none, nan_high or none
    ):
        word, na = number_word(x, xp, kind)
        size = word.dtype.itemsize
        # NaN a value, not missing: its word is 0 (number_word's), else the highest
        if high is not None and (kind or x.dtype.kind) == "f":
            nan = na if gone is None else na & ~gone
            word = (
                xp.where(nan, xp.array(np.iinfo(word.dtype).max, dtype=word.dtype), word)
                if high
                else word
            )
            na = xp.zeros(len(x), dtype=bool) if gone is None else gone
        elif gone is not None:
            na = na | gone
        if not ascending:
            word = ~word
        # a missing value's word is 0 (NaN's and NaT's already are, ascending)
        if gone is not None or not ascending:
            word = xp.where(na, 0, word)
        out[:, at] = ~na if na_first else na
        # big-endian
        out[:, at + 1 : at + 1 + size] = word.view(xp.uint8).reshape(len(word), size)[:, ::-1]
        at += 1 + size


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
    raise KeyError(
        f"no column or index level {label!r}; the columns are {', '.join(map(str, df.columns))}"
    )


def _is_string(s: pd.Series) -> bool:
    """Strings, or Arrow binary: values of varying byte width, ordered by their bytes."""
    if isinstance(s.dtype, pd.ArrowDtype):
        return variable_width(s.dtype.pyarrow_dtype)
    return pdt.is_string_dtype(s.dtype) or pdt.is_object_dtype(s.dtype)


def string_widths(df, by) -> dict:
    """The widest value (UTF-8 bytes; at least 1) of each string ``by`` column of a pandas
    partition."""
    out = {}
    for c in by:
        s = column(df, c)
        if _is_string(s):
            out[c] = _widest(value_buffers(s)[1])
    return out


def _widest(offsets) -> int:
    """The widest value (bytes; at least 1) of a string column's :func:`value_buffers` offsets."""
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
    # the dtype (from the meta) of one column of NumPy numbers or booleans: keys may be words
    # (:meth:`words`)
    word: str | None = None

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
            _column_key(column(empty, c), 1, not a, na_position == "first").shape[1] - int(st)
            for c, a, st in zip(by, ascending, strings)
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
    def of_numbers(
        cls, by, dtypes, ascending=True, na_position="last", word: bool = False
    ) -> KeySpec:
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
        # a flag byte, then the word (_column_key)
        fixed = tuple(1 + number_word(np.empty(0, d))[0].dtype.itemsize for d in dtypes)
        return cls(
            tuple(by),
            tuple(ascending),
            na_position,
            (False,) * len(by),
            fixed,
            dtypes[0].name if word else None,
        )

    def widths(self, df) -> tuple:
        """The string widths of a partition, one per column (0 for other columns)."""
        w = string_widths(df, [c for c, st in zip(self.by, self.strings) if st])
        return tuple(w.get(c, 0) if st else 0 for c, st in zip(self.by, self.strings))

    def width(self, widths) -> int:
        """Bytes of a key at string widths ``widths``."""
        return int(sum(self.fixed) + sum(widths))

    def encode(self, df, widths=None) -> tuple[np.ndarray, tuple]:
        """``(keys, widths)``: the partition's keys as byte rows, at ``widths`` (default its
        own)."""
        keys, widths, _ = self.encode_part(df, widths)
        return keys, widths

    def encode_part(self, df, widths=None) -> tuple[np.ndarray, tuple, tuple]:
        """``(keys, widths, kinds)``: :meth:`encode`'s, and per column the types of its values (a
        string or object column's, :func:`value_buffers`; ``()`` for the others), which
        :func:`join_kinds` checks where partitions meet. Found as the keys are made: each string
        column's values are read once, for its width, its kinds and its keys."""
        na_first = self.na_position == "first"
        given = None if widths is None else tuple(widths)
        cols, own, kinds = [], [], []
        for i, (c, a, st) in enumerate(zip(self.by, self.ascending, self.strings)):
            s = column(df, c)
            buffers = value_buffers(s) if st and _is_string(s) else None
            own.append(_widest(buffers[1]) if buffers else 0)
            kinds.append(buffers[2] if buffers else ())
            cols.append(
                _column_key(s, own[-1] if given is None else given[i], not a, na_first, buffers)
            )
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
        # a copy, once: the partition's own data is never written
        if v.dtype != np.uint64 or np.may_share_memory(v, x):
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
    """The widths at which keys of every one of ``all_widths`` compare: the widest of each
    column."""
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
                f"cannot sort by column {c!r}: its partitions hold values of {type_names(met)}, "
                "which do not compare with each other"
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
    before its length; a pad byte is a NUL as encoded (0xFF when descending), 0 on a missing
    value."""
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


def encode_keys(
    df: pd.DataFrame, by, ascending=True, na_position="last", widths=None
) -> np.ndarray:
    """The ``by`` columns of a pandas dataframe as byte rows ``(len(df), width)`` whose unsigned
    byte order is pandas' order for ``sort_values(by, ascending, na_position)``. ``widths``: the
    byte width of each string column by name (equal across partitions; :func:`string_widths`),
    default this frame's own."""
    spec = KeySpec.of(df, by, ascending, na_position)
    if widths:
        widths = tuple(
            max(int(widths.get(c, 0)), 1) if st else 0 for c, st in zip(spec.by, spec.strings)
        )
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
