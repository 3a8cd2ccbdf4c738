"""dsort: GPU-accelerated, out-of-core sorting on Dask.

``dsort.sort``, ``dsort.argsort`` and ``dsort.sort_by_key`` sort dask arrays (see
:mod:`dsort.collections.array`); ``dsort.dataframe`` sorts dask dataframes, and ``import dsort``
puts a ``.dsort`` accessor on dask dataframes and series (``ddf.dsort.sort_values("k")``).
:mod:`dsort.engine` sorts one array on one device and needs no dask, so it is imported eagerly and
the dask front ends only on first use: the accessor is registered when ``dask.dataframe`` is
imported (now, if it already is). ``dsort.enable()`` / ``with dsort.enabled():`` put dsort under
dask's own ``sort_values`` and ``set_index`` (:mod:`dsort.collections.switch`).
"""

import sys

from . import engine

__version__ = "0.1.0"


def _dask_worker():
    """The dask worker running this task, or None: the engine's (``engine.host.find_worker``), which
    imports no dask itself."""
    if "distributed" not in sys.modules:
        return None
    from .collections.remote import this_worker

    return this_worker()


engine.host.find_worker = _dask_worker

__all__ = [
    "argsort",
    "disable",
    "enable",
    "enabled",
    "engine",
    "is_enabled",
    "sort",
    "sort_by_key",
    "__version__",
]


def __getattr__(name):
    if name in ("sort", "argsort", "sort_by_key"):
        from .collections import array

        return getattr(array, name)
    if name in ("enable", "disable", "enabled", "is_enabled"):  # the switch under dask's sorts
        from .collections import switch

        return getattr(switch, name)
    if name == "dataframe":  # dask.dataframe on first use only
        import importlib

        return importlib.import_module(".dataframe", __name__)
    raise AttributeError(f"module 'dsort' has no attribute {name!r}")


def __dir__():
    return sorted({*globals(), *__all__, "dataframe"})


def _register_accessors() -> None:
    """Once dsort and dask.dataframe are both imported: the ``.dsort`` accessors, and the switch
    under dask's sorts where dask's config turns it on (DASK_DSORT__DATAFRAME__DROP_IN=1)."""
    from .collections import config
    from .collections.dataframe import register_accessors

    register_accessors()
    if config.get("dataframe.drop-in"):
        from .collections.switch import enable

        enable()


class _WhenDaskDataframeLoads:
    """An import hook, used once: after ``dask.dataframe`` loads, register dsort's accessors."""

    def find_spec(self, name, path=None, target=None):
        if name != "dask.dataframe":
            return None
        import importlib.util

        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenRegister(spec.loader)
        return spec


class _ThenRegister:
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _register_accessors()

    def __getattr__(self, name):
        return getattr(self._loader, name)


if "dask.dataframe" in sys.modules:
    _register_accessors()
elif not any(isinstance(f, _WhenDaskDataframeLoads) for f in sys.meta_path):
    sys.meta_path.insert(0, _WhenDaskDataframeLoads())
