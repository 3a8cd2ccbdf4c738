"""The divisions a user gives ``set_index``: as values of the key's dtype, checked against the
key's values (numbers with numbers, strings with strings, times with times: :data:`TAKES`), and
refused, with dask's answer to them, where they do not compare.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..core.errors import Incomparable, UnsupportedType, UnsupportedValue
from ..core.frame_keys import type_names


def as_key_values(divisions, dtype, other) -> pd.Series:
    """The user's divisions as values of the key's dtype (``"2021-01-02"`` on a datetime key is
    that day's timestamp, as pandas' datetime index takes a string in ``loc``); ones that do not
    compare with the key's values (:func:`check_kinds`) refused with :class:`Incomparable`, others
    that are not values of its dtype (``0.5`` on an int key) with :class:`UnsupportedValue`, which
    the drop-in hands to dask's own set_index (it may take them)."""
    given = list(divisions)
    family = check_kinds(given, dtype, other)
    try:
        values = pd.Series(given, dtype=dtype)
    except (TypeError, ValueError) as e:
        # a string that is no date
        if family in ("datetime", "timedelta", "time") and any(isinstance(v, str) for v in given):
            strings = [type(v).__name__ for v in given if isinstance(v, str)]
            raise incomparable(
                other, given, strings, f"values ({dtype}), nor parse as them ({e})"
            ) from None
        raise UnsupportedValue(
            f"divisions {given!r} are not values of column {other!r} ({dtype}): {e}"
        ) from None
    if values.isna().any() or not values.is_monotonic_increasing:
        raise UnsupportedValue(
            f"divisions {list(divisions)!r} are not increasing values of column {other!r} ({dtype})"
        )
    return values


# what division values each family of key dtypes compares with (:func:`_family`): numbers with
# numbers (Python's, NumPy's, bools, decimals), strings with strings, bytes with bytes; a date or
# time key with its own values and strings that parse as them (pandas' datetime index takes those in
# loc and searchsorted)
TAKES = {
    "number": ("number", "decimal"),
    "str": ("str",),
    "bytes": ("bytes",),
    "datetime": ("datetime", "str"),
    "timedelta": ("timedelta", "str"),
    "time": ("time", "str"),
    # what dsort sorts in an object column; which of them: its values say
    "object": ("number", "str", "bytes"),
}


def check_kinds(given: list, dtype, other) -> str | None:
    """The family of the key's dtype (:func:`_family`), once the user's divisions are checked
    against it, before any task runs: values of another kind (strings on an int key, ints on a
    string or datetime key) refused with :class:`Incomparable`, naming the column, its dtype and
    the divisions' types. dask's own set_index takes them as they are and fails at the compute, in
    the task that puts each row in a partition, with pandas' ``TypeError`` (``'<' not supported
    between instances of 'str' and 'int'``), naming no column; or, where pandas converts, cuts
    somewhere the user did not say (dsort took ``["1", "5"]`` on an int key as ``[1, 5]``).
    :class:`Incomparable` is a ``TypeError`` too, raised at the call, and the drop-in does not hand
    it on. An object key's values are known only as its partitions' keys are made, so divisions of
    strings, bytes or numbers are checked against them then (:func:`_below`); divisions of other
    types on an object key are values dsort does not sort there (:class:`UnsupportedType`: dask's
    own may). Missing divisions are not looked at here (refused after)."""
    family = _family(dtype)
    if family is None:
        return None
    found = {}
    for v in given:
        if not missing(v):
            found.setdefault(_value_family(v), []).append(type(v).__name__)
    wrong = [name for f, names in found.items() if f not in TAKES[family] for name in names]
    if wrong and family == "object":
        raise UnsupportedType(
            f"divisions {given!r} hold values of {type_names(wrong)}: dsort sorts an object column "
            f"{other!r} of strings, bytes or numbers"
        )
    if wrong:
        raise incomparable(other, given, wrong, f"values ({dtype})")
    return family


def incomparable(other, given, types, theirs) -> Incomparable:
    """The refusal of the user's divisions ``given``, of ``types``, by a key whose values are
    ``theirs``."""
    return Incomparable(
        f"cannot sort by column {other!r} at divisions {given!r}: they hold values of "
        f"{type_names(types)}, "
        f"which do not compare with the column's {theirs}"
    )


def _family(dtype) -> str | None:
    """The kind of values a key dtype holds, as :data:`TAKES` names them; a categorical's, its
    categories'; None for a dtype that no division is checked against."""
    import pyarrow as pa

    if isinstance(dtype, pd.CategoricalDtype):
        return _family(dtype.categories.dtype) if dtype.categories is not None else None
    if isinstance(dtype, pd.ArrowDtype):
        t = dtype.pyarrow_dtype
        kinds = [
            ("str", (pa.types.is_string, pa.types.is_large_string)),
            ("bytes", (pa.types.is_binary, pa.types.is_large_binary)),
            (
                "number",
                (
                    pa.types.is_integer,
                    pa.types.is_floating,
                    pa.types.is_boolean,
                    pa.types.is_decimal,
                ),
            ),
            ("datetime", (pa.types.is_timestamp, pa.types.is_date)),
            ("timedelta", (pa.types.is_duration,)),
            ("time", (pa.types.is_time,)),
        ]
        return next((name for name, tests in kinds if any(test(t) for test in tests)), None)
    if pd.api.types.is_object_dtype(dtype):
        return "object"
    if pd.api.types.is_string_dtype(dtype):
        return "str"
    if pd.api.types.is_bool_dtype(dtype) or pd.api.types.is_numeric_dtype(dtype):
        return "number"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "datetime"
    if pd.api.types.is_timedelta64_dtype(dtype):
        return "timedelta"
    return None


def _value_family(v) -> str:
    """The kind of a division's value, as :data:`TAKES` names them (else its type's name)."""
    import datetime
    import decimal

    from ..core.value_bytes import NUMBERS

    kinds = [
        ("str", str),
        ("bytes", bytes),
        ("number", NUMBERS),
        ("decimal", decimal.Decimal),
        # a Timestamp is a datetime, a datetime a date
        ("datetime", (datetime.date, np.datetime64)),
        ("timedelta", (datetime.timedelta, np.timedelta64)),
        ("time", datetime.time),
    ]
    return next((name for name, types in kinds if isinstance(v, types)), type(v).__name__)


def missing(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):  # a value pandas cannot tell (an array): not missing
        return False
