"""pandas, imported where a function first uses it, not where a module is imported.

A Parquet sort keyed by one column of numbers runs on Arrow and NumPy alone: importing pandas (with
what it pulls in) is a large share of such a command (BENCHMARKS.md section 10). The modules of
frames (:mod:`.frame_keys`, :mod:`.frame_chunk`, ...) name pandas as ``pd`` from here; the first
attribute read imports it, as ``import pandas as pd`` would have.
"""

from __future__ import annotations

import importlib


class LazyModule:
    """A module, imported at its first attribute read."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, attr):
        if attr.startswith("__"):  # copy, pickle and introspection: not the module's own
            raise AttributeError(attr)
        return getattr(importlib.import_module(self._name), attr)

    def __repr__(self) -> str:
        return f"<module {self._name!r}, imported at first use>"


pd = LazyModule("pandas")
pdt = LazyModule("pandas.api.types")
