"""The core: what is neither dask nor files. Splitters (``plan``), the run store (``runs``), the
per-chunk and per-partition functions (``chunk``, ``frame_keys``, ``frame_chunk``), the run, cut
and merge tasks of an external sort (``filesort``), valsort's checks (``valsort``) and the error
types (``errors``). Built on :mod:`dsort.engine`; used by the dask collections and the files
above."""
