"""dsort's runtime settings: the ``dsort.*`` namespace of dask's configuration.

Importing this module registers the defaults of ``dsort/dsort.yaml`` (which documents every key)
with ``dask.config.update_defaults``, as dask's own subprojects do; values set in dask's YAML
files, ``DASK_DSORT__*`` environment variables or ``dask.config.set`` take precedence. The dask
front end (:mod:`dsort.collections.graph`, :mod:`dsort.service`, :mod:`dsort.cluster`) imports it;
``import dsort`` does not, so the engines stay usable without dask. Sizes a user gives (memory
limits, as dask and dask-cuda take them) are parsed here too: :func:`parse_size`.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import dask.config
import yaml
from dask.utils import parse_bytes, parse_timedelta

from ..core.errors import LimitError

DEFAULTS_FILE = Path(__file__).resolve().parent.parent / "dsort.yaml"  # dsort/dsort.yaml

with open(DEFAULTS_FILE) as f:
    defaults = yaml.safe_load(f)

dask.config.update_defaults(defaults)


def get(key: str):
    """The value of ``dsort.KEY`` (``key`` without the ``dsort.`` prefix)."""
    return dask.config.get(f"dsort.{key}")


def nbytes(key: str) -> int:
    """``dsort.KEY`` as bytes: a number or a size such as ``"64MiB"``."""
    return int(parse_bytes(get(key)))


def seconds(key: str) -> float:
    """``dsort.KEY`` as seconds: a number or a duration such as ``"30s"``."""
    return float(parse_timedelta(get(key), default="seconds"))


def parse_size(value, whole: int | None = None, what: str = "size") -> int | None:
    """Bytes from ``value``: an int, ``"2GB"``/``"512MiB"``, or a fraction ``0 < x <= 1`` of
    ``whole`` (as dask and dask-cuda take memory limits); None for None/"auto"."""
    if value is None or value == "auto":
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            try:
                nbytes = int(parse_bytes(text))
            except (ValueError, TypeError):
                raise LimitError(
                    f"{what} {value!r} is not a size (e.g. 2GB, 512MiB, or a fraction like 0.5)"
                ) from None
            if nbytes <= 0:  # parse_bytes takes "-2GB"
                raise LimitError(f"{what} {value!r} must be a positive number of bytes") from None
            return nbytes
        value = number
    if 0 < value <= 1 and whole:
        return int(value * whole)
    if value <= 0 or (0 < value < 1):
        raise LimitError(
            f"{what} {value!r} must be a positive number of bytes"
            + (" or a fraction of memory" if whole else "")
        )
    return int(value)


def size_or_share(value, what: str = "size") -> int | float | None:
    """:func:`parse_size` where the whole is known only where the limit applies (a worker's GPU):
    bytes (an int), or a share ``0 < x <= 1`` of that whole (a float: ``1`` is all of it, as
    dask-cuda reads its memory limits); None for None/"auto"."""
    try:
        number = (
            float(value)
            if isinstance(value, (int, float, str)) and not isinstance(value, bool)
            else None
        )
    except ValueError:
        number = None
    if number is not None and 0 < number <= 1:
        return number
    return parse_size(value, None, what)


@dataclass(frozen=True)
class Limits:
    """Where a sort runs and within what, in dask's words: one object, made once from what the user
    wrote by the command line, :func:`dsort.service.sort_files`, :func:`dsort.cluster.connect` and
    the dataframe sorts alike, and handed down whole.

    Parameters
    ----------
    n_workers, threads_per_worker : int, optional
        An embedded cluster's workers, and threads each (default: the machine's).
    memory_limit : int, str or float
        Memory of each worker: bytes, a size (``"4GB"``), a fraction of the machine's, or
        ``"auto"``.
    device_memory_limit : int, str or float, optional
        Memory of each GPU for runs: bytes, a size, or a fraction of the GPU (as dask-cuda reads
        its limit of that name).
    local_directory : str, optional
        Where runs that do not fit in memory go.
    cpu : bool, optional
        True: no GPU; False: the GPUs (an error where none is visible); None: the GPUs, but
        inputs too small to pay for one on the CPU.
    """

    n_workers: int | None = None
    threads_per_worker: int | None = None
    memory_limit: object = "auto"
    device_memory_limit: object = None
    local_directory: str | None = None
    cpu: bool | None = None

    @classmethod
    def of(cls, limits=None, **words):
        """``limits`` where given (then no other word may be), else a new one of ``words``."""
        given = {k: v for k, v in words.items() if v != _DEFAULTS[k]}
        if limits is not None and given:
            raise TypeError(f"pass either limits= or {', '.join(sorted(given))}, not both")
        return limits if limits is not None else cls(**words)


_DEFAULTS = {f.name: f.default for f in fields(Limits)}
