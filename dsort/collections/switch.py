"""One switch that puts dsort under dask's own sorts, for code the user does not own.

While it is on, dask's ``DataFrame.sort_values`` and ``DataFrame.set_index`` run dsort's
(:func:`dsort.dataframe.sort_values`, :func:`dsort.dataframe.set_index`) with dask's arguments, and
dask Series gain pandas' ``sort_values`` (:func:`dsort.dataframe.sort_series`). Every call form of
dask's keeps dask's meaning; the differences are dsort's (stable sorts, partitions balanced to
within a row, exact divisions, rows outside user divisions kept in the first and last partitions)
and dask's own shuffle knobs (``shuffle_method``, ``upsample``, ``partition_size``, ``**options``)
have no effect. A call dsort cannot sort (a key type it does not support, frames whose partitions
are not pandas', such as dask-cudf's) is handed to dask's own method unchanged; but not one whose
key's values do not compare (numbers and strings: :class:`~dsort.core.errors.Incomparable`), with
each other or with the user's divisions, which dask cannot sort either (or cuts at divisions of
another kind than its index's): dsort's refusal says why.

    import dsort
    dsort.enable()              # from now on, in this process
    with dsort.enabled():       # or for a block, restored after it
        ...
    DASK_DSORT__DATAFRAME__DROP_IN=1   # dask's config (or dsort.yaml): on when dsort is imported

The switch replaces the class attributes of dask's ``DataFrame`` and ``Series`` (for every thread
of the process): graphs are built by the caller, so only the client process needs it, never the
workers. :func:`disable` puts dask's methods back exactly as they were.
"""

from __future__ import annotations

import contextlib
import functools
import threading

from ..core.errors import Incomparable, Unsupported

_lock = threading.RLock()
_depth = 0  # enable() calls and enabled() blocks now in force


def _stand_in(name: str):
    """dsort's ``name`` (``sort_values``, ``set_index``) in the place of dask's ``DataFrame.name``:
    the call bound to dask's own signature (every argument form dask takes, positional ones too)
    and handed to dsort by keyword; dask's ``**options`` (its shuffle's) dropped; a call dsort
    cannot sort (:class:`~dsort.core.errors.Unsupported`) handed to dask's method unchanged, unless
    its values do not compare (:class:`~dsort.core.errors.Incomparable`: no sort can)."""

    def method(self, *args, **kwargs):
        import inspect

        from . import dataframe as D
        from .indexing import dask_method

        dasks = dask_method(type(self), name)
        try:
            given = inspect.signature(dasks).bind(self, *args, **kwargs).arguments
        except TypeError:  # a call dask refuses: dask's words
            return dasks(self, *args, **kwargs)
        if name == "sort_values":
            _dasks_checks(given)
        # ddf.set_index(ddf.index): dask gives the frame itself, as it is
        elif _its_own_index(self, given):
            return dasks(self, *args, **kwargs)
        if not given.get("npartitions"):  # dask reads 0 as "as many as the input"
            given.pop("npartitions", None)
        ours = getattr(D, name)
        takes = inspect.signature(ours).parameters
        first = list(given)[1]  # by, other: dask's first argument after self
        arguments = {k: v for k, v in given.items() if k in takes and k not in ("self", first)}
        try:
            return ours(self, given[first], **arguments)
        except Incomparable:
            raise
        except Unsupported:
            return dasks(self, *args, **kwargs)

    method.__name__ = name
    return method


def _its_own_index(df, given) -> bool:
    other = given.get("other")
    return (
        getattr(other, "_name", None) is not None
        and hasattr(other, "dask")
        and other._name == df.index._name
    )


def _dasks_checks(given) -> None:
    """dask's ``sort_values`` refusals, in dask's words: a bad na_position, a key that is no label
    (dsort takes any label, integers too, where dask takes strings only), an ``ascending`` of
    another length than the keys."""
    if given.get("na_position", "last") not in ("first", "last"):
        raise ValueError("na_position must be either 'first' or 'last'")
    by = given["by"] if isinstance(given["by"], list) else [given["by"]]
    if any(b is None or hasattr(b, "dask") for b in by):
        raise NotImplementedError(
            "Dataframes only support sorting by named columns which must be passed as a string or "
            f"a list of strings.\nYou passed {by}"
        )
    ascending = given.get("ascending", True)
    if not isinstance(ascending, bool) and not len(ascending) == len(by):
        raise ValueError(f"Length of {ascending=} != length of {by=}")


def _series_sort_values(
    self, *, ascending=True, kind=None, na_position="last", ignore_index=False, npartitions=None
):
    """pandas' ``Series.sort_values`` (keywords only; always stable, whatever ``kind`` says) on
    dsort (:func:`dsort.dataframe.sort_series`); pandas' ``axis``, ``inplace`` and ``key`` are not
    taken."""
    from . import dataframe as D

    return D.sort_series(
        self,
        ascending=ascending,
        na_position=na_position,
        npartitions=npartitions,
        ignore_index=ignore_index,
    )


def _targets():
    """``[(class, name, dsort's function)]``: what the switch puts in place."""
    import dask.dataframe as dd

    return [
        (dd.DataFrame, "sort_values", _stand_in("sort_values")),
        (dd.DataFrame, "set_index", _stand_in("set_index")),
        (dd.Series, "sort_values", _series_sort_values),
    ]


_MISSING = object()


def _install() -> None:
    for cls, name, ours in _targets():
        saved = f"_dsort_dask_{name}"
        if saved in cls.__dict__:
            continue  # in place already
        original = cls.__dict__.get(name, _MISSING)
        setattr(cls, saved, original)
        # dask's signature and docstring (for help() and IDEs), and a note
        if original is not _MISSING:
            functools.update_wrapper(ours, original)
            ours.__doc__ = (
                f"dsort's {name} in dask's place (dsort.enable()); dask's own, "
                f"{cls.__name__}.{saved}:\n\n{original.__doc__}"
            )
        setattr(cls, name, ours)


def _uninstall() -> None:
    for cls, name, _ in _targets():
        saved = f"_dsort_dask_{name}"
        if saved not in cls.__dict__:
            continue
        original = cls.__dict__[saved]
        delattr(cls, saved)
        if original is _MISSING:  # dask has no such method (Series.sort_values)
            delattr(cls, name)
        else:
            setattr(cls, name, original)


def enable() -> None:
    """Put dsort under dask's ``sort_values`` and ``set_index`` in this process, until
    :func:`disable`."""
    global _depth
    with _lock:
        _depth += 1
        _install()


def disable() -> None:
    """Put dask's own methods back (whatever :func:`enable` calls and :func:`enabled` blocks
    did)."""
    global _depth
    with _lock:
        _depth = 0
        _uninstall()


def is_enabled() -> bool:
    """Whether dask's sorts run on dsort now."""
    import dask.dataframe as dd

    return "_dsort_dask_set_index" in dd.DataFrame.__dict__


@contextlib.contextmanager
def enabled():
    """dsort under dask's sorts inside the block; as before it after (off, unless it was on)."""
    global _depth
    with _lock:
        _depth += 1
        _install()
    try:
        yield
    finally:
        with _lock:
            _depth = max(_depth - 1, 0)
            if not _depth:
                _uninstall()
