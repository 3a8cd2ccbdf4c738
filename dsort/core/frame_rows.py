"""Fixed-width rows of a frame: :class:`RowCodec` encodes a frame whose columns and index all have
fixed-width dtypes (NumPy bools, integers, floats, datetimes and durations) as byte rows, so a run
of them needs no pickling and rides with its keys (:mod:`dsort.core.frame_keys`) through the run
store, onto the GPUs too; and decodes merged rows into frames again (pandas or cudf).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from .lazy import pd

from ..engine import host
from .errors import UnsupportedValue


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
    # per column, then the index: NumPy dtype strings (with nulls: a validity byte per column before
    # the index)
    dtypes: tuple
    # cudf frames: each column's validity rides in the row too (gpu_columns, cudf_frame)
    nulls: bool = False

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
        struct = np.dtype(
            {
                "names": names,
                "formats": list(self.dtypes),
                "offsets": self._offsets(at),
                "itemsize": rows.shape[1],
            }
        )
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

        # x at the dtype CuPy holds for d (datetimes and durations as int64), converted by cudf
        def words(x, d):
            want = np.dtype(np.int64) if np.dtype(d).kind in "mM" else np.dtype(d)
            # on cudf's stream, which the caller waits for; nulls kept
            return x if x.dtype == want else x.astype(want)

        values, valid = [], []
        for name, d in zip(df.columns, self.dtypes):
            x, kind = words(df[name], d), np.dtype(d).kind
            gaps = _has_nulls(x)
            if gaps and not self.nulls:
                raise UnsupportedValue(
                    f"column {name!r} holds nulls: dsort sorts cudf frames without nulls for now "
                    "(fillna first)"
                )
            fill = np.nan if kind == "f" else False if kind == "b" else 0
            values.append(x.to_cupy(na_value=fill) if gaps else x.values)
            if self.nulls:
                valid.append(_validity(x) if gaps else cupy.ones(len(x), np.uint8))
        x = df.index
        if _has_nulls(x):
            raise UnsupportedValue(
                "the index holds nulls: dsort sorts cudf frames by an index without nulls"
            )
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
            return (
                cudf.Series(x.view(np.int64)).astype(d)
                if d.kind in "mM"
                else cudf.Series(x.view(d), nan_as_null=False)
            )

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
        # set, not aligned
        out.index = cudf.Index(index, name=self.meta.index.name, nan_as_null=False)
        out.columns = self.meta.columns
        return out

    def _offsets(self, at: int) -> list:
        return [
            at + int(o) for o in np.cumsum([0] + [np.dtype(d).itemsize for d in self.dtypes[:-1]])
        ]

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
        """:meth:`columns` of :meth:`decode`'s frame: new contiguous arrays, from ``rows`` on the
        host."""
        records = self._fields(rows, at)
        return [host.copy(records[name]) for name in records.dtype.names]

    def place(self, columns: list, out, at: int) -> None:
        """:meth:`encode` of arrays of any module (CuPy's on a GPU: byte slices, no structured
        views): ``columns`` (as :meth:`columns` gives them) written into bytes ``at`` on of every
        row of ``out``."""
        for x, d, off in zip(columns, self.dtypes, self._offsets(at)):
            size = np.dtype(d).itemsize
            out[:, off : off + size] = x.view(out.dtype).reshape(len(x), size)

    def pick(self, rows, at: int) -> list:
        """The inverse of :meth:`place`: the columns' bytes as unsigned words (arrays of ``rows``'
        module, contiguous: CuPy has no datetimes), for :meth:`frame`."""
        n, sizes = len(rows), [np.dtype(d).itemsize for d in self.dtypes]
        return [
            rows[:, off : off + size].copy().view(f"u{size}").reshape(n)
            for size, off in zip(sizes, self._offsets(at))
        ]
