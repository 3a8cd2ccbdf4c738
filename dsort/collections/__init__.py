"""Dask collections: the one way dsort builds tasks (``tasks``), its settings in dask's
configuration (``config``), how chunks group into runs and outputs into merges (``scale``), and the
sorts of dask arrays (``array``, ``graph``, ``external``) and dataframes (``dataframe``). Built on
:mod:`dsort.core`; the public names are ``dsort.sort``/``argsort``/``sort_by_key`` and
``dsort.dataframe``."""
