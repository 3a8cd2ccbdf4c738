"""The backend of a dataframe's partitions, decided once from their type, as
:func:`dsort.engine.get` is an array's engine: :mod:`dsort.core.frame_pandas` or
:mod:`dsort.core.frame_cudf`, modules with the same functions (``concat``, ``gather``,
``with_positions``, ``like``, ``key_frame``, ``to_pandas``, ``pandas_meta``, ``check_keys``, and
``ON_HOST``). cudf is imported only when a cudf frame arrives.
"""

from __future__ import annotations

from . import frame_cudf, frame_pandas
from .frame_wire import Wired
from .lazy import pd


def of(frame):
    """The backend of ``frame`` (a frame, series or index; a meta too)."""
    return frame_cudf if frame_cudf.is_cudf(frame) else frame_pandas


def is_frame(x) -> bool:
    """Whether ``x`` is one frame (pandas', cudf's or a wired one), not a list of them."""
    return isinstance(x, (pd.DataFrame, Wired)) or frame_cudf.is_cudf(x)
