"""dsort: GPU-accelerated, out-of-core sorting on Dask."""

from . import engine
from .array import argsort, sort, sort_by_key

__version__ = "0.1.0"

__all__ = ["argsort", "engine", "sort", "sort_by_key", "__version__"]
