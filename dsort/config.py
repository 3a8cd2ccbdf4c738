"""dsort's runtime settings: the ``dsort.*`` namespace of dask's configuration.

Importing this module registers the defaults of ``dsort/dsort.yaml`` (which documents every key)
with ``dask.config.update_defaults``, as dask's own subprojects do; values set in dask's YAML
files, ``DASK_DSORT__*`` environment variables or ``dask.config.set`` take precedence. The dask
front end (:mod:`dsort.graph`, :mod:`dsort.service`, :mod:`dsort.cluster`) imports it; ``import
dsort`` does not, so the engines stay usable without dask.
"""

from __future__ import annotations

from pathlib import Path

import dask.config
import yaml
from dask.utils import parse_bytes, parse_timedelta

DEFAULTS_FILE = Path(__file__).with_name("dsort.yaml")

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
