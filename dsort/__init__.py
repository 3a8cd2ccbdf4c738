"""dsort: GPU-accelerated, out-of-core sorting on Dask.

``dsort.sort``, ``dsort.argsort`` and ``dsort.sort_by_key`` sort dask arrays (see :mod:`dsort.array`);
:mod:`dsort.engine` sorts one array on one device and needs no dask, so it is imported eagerly and
the dask front end only on first use.
"""

from . import engine

__version__ = "0.1.0"

__all__ = ["argsort", "engine", "sort", "sort_by_key", "__version__"]


def __getattr__(name):
    if name in ("sort", "argsort", "sort_by_key"):
        from . import array

        return getattr(array, name)
    if name == "dataframe":  # dask.dataframe on first use only
        import importlib

        return importlib.import_module(".dataframe", __name__)
    raise AttributeError(f"module 'dsort' has no attribute {name!r}")
