"""``dask worker ... --preload dsort.preload``: a worker process set up to sort on its own host.

glibc keeps freed memory for the next arrays instead of handing every large one back to the OS
(which dask's nanny asks for, ``MALLOC_TRIM_THRESHOLD_``), and Arrow's arrays come from glibc's
heaps (:func:`dsort.engine.host.keep_freed_memory`): the command line does the same for its own
threads on the CPU. A whole `dsort sort` of 3e6 Parquet rows on two such workers took 2.6-3.4 s
against 3.7-5.8 s on plain ones (BENCHMARKS.md section 10). It changes the whole process's
allocator settings, so a worker takes it only where whoever starts it asks.
"""

from __future__ import annotations

from .engine import host

APPLIED = host.keep_freed_memory()  # False where the C library has no mallopt (not glibc)
