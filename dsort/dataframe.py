"""``dsort.dataframe``: the public name of :mod:`dsort.collections.dataframe` (the sorts of dask
dataframes and the ``.dsort`` accessor), one module under both names."""

import sys

from .collections import dataframe as _dataframe

sys.modules[__name__] = _dataframe
