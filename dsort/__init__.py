"""dsort: GPU-accelerated, out-of-core sorting on Dask."""

from . import engine

__version__ = "0.1.0"

__all__ = ["engine", "__version__"]
