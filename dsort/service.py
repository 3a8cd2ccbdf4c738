"""The file sort as a Python API: :func:`sort_files` (the ``dsort sort`` command maps its options
onto it) and the :class:`SortReport` it returns.

Where it runs:

* **Embedded (default)**: one process, a pool of threads, the GPUs CuPy sees (or the CPU with
  ``cpu=True`` or none visible). The task graph runs on dask's threaded scheduler, so nothing is
  started: no scheduler, no worker processes, no transfers between them. Threads suffice because
  every heavy step (file I/O, NumPy and CuPy kernels, host-device copies) releases the GIL.
* **A running cluster** (``scheduler=ADDRESS`` or ``client=``): the same graph on its workers,
  which must see INPUT and OUTPUT under the same paths. Each worker keeps its runs on its own
  disk (its dask local directory); a merge reads a run's file where it can see it, else asks the
  worker holding it for the slices (:meth:`dsort.core.runs.RunStore.read_many`), so only slices
  travel.

The limits, in dask's words, set the sizes: ``n_workers * threads_per_worker`` threads,
``memory_limit`` per worker (``n_workers`` of them share the job's host memory budget),
``device_memory_limit`` per GPU. Half of each budget holds sorted runs (beyond it they go to disk),
half the tasks' working memory; from that come the block (run) and output range sizes, so memory
follows the limits, never the data's size. A limit too small for one block is refused up front
with the smallest workable value.

Nothing is lost: OUTPUT appears whole or not at all (:func:`dsort.io.staged`), the input's
record count and checksum must equal the output's, and the runs are removed however the job ends.

A call is one :class:`SortRequest` (its options, with one
:class:`~dsort.collections.config.Limits`), carried out in three steps by :mod:`dsort.fixed_sort`
(records, ``.npy``) or :mod:`dsort.parquet_sort`: plan (sizes and graph), run (the tasks), publish
(checked, then renamed into place).
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from pathlib import Path

from .collections import config  # noqa: F401  (the dsort.* settings, registered with dask)
from .collections.config import Limits, parse_size
from .core.errors import CheckFailed, InputError, JobFailed, LimitError
from .limits import Resources, bounded_fan_in, cpu_threads, fmt_bytes, mem_available, merge_groups
from .limits import on_cpu, resources, sizes
from .report import SortReport, format_report, process_age
from .request import SortRequest, check_local_directory

__all__ = [  # the service's API, and the names it hands on from below
    "CheckFailed", "InputError", "JobFailed", "LimitError", "Limits", "Resources", "SortReport",
    "SortRequest", "bounded_fan_in", "check_local_directory", "cpu_threads", "fmt_bytes",
    "format_report", "mem_available", "merge_groups", "on_cpu", "parse_size", "process_age",
    "resources", "run", "sizes", "sort_files", "validate",
]  # fmt: skip

# The sizes policy (block bounds, GPU threads, merge fan-in, Parquet's memory factor) and the
# no-workers timeout are dask settings: dsort.file-sort.* and dsort.no-workers-timeout
# (dsort/dsort.yaml), read at each call.


# -- the service
# ------------------------------------------------------------------------------------


def validate(input, output, *, format=None, record_size=100, key_size=10, by=None, overwrite=False):
    """Check INPUT and OUTPUT before any work: ``(format, files, OUTPUT path)``; :class:`InputError`
    names the problem."""
    from . import io
    from .io import npy, records

    fmt, files, dirs = io.discover(input, format)
    # paths as the caller typed them, resolved here: the workers of a cluster started elsewhere
    # have another working directory
    files, dirs = [Path(f).absolute() for f in files], [Path(d).absolute() for d in dirs]
    if fmt != "parquet" and by:
        raise InputError(f"--by names Parquet columns; INPUT is {fmt}")
    if fmt == "parquet" and not by:
        raise InputError("sorting Parquet needs the sort columns: --by COL[,COL...]")
    named = io.format_of(output)
    if named and named != fmt:
        raise InputError(
            f"OUTPUT {output} is named like {named} but INPUT is {fmt}, and dsort writes the "
            "input's format; choose a name that says so"
        )
    out = io.check_destination(output, files, overwrite=overwrite, input_dirs=dirs)
    if fmt == "records":
        records.check_sizes(record_size, key_size)
        records.lengths(files, record_size)
    elif fmt == "npy":
        npy.inspect(files)
    else:
        from .io import parquet

        parquet.check_columns(by, parquet.row_groups(files)[2], input)
    return fmt, files, out


def sort_files(
    input,
    output,
    *,
    format=None,
    record_size=100,
    key_size=10,
    by=None,
    descending=False,
    overwrite=False,
    chunk_size=None,
    scheduler=None,
    client=None,
    n_workers=None,
    threads_per_worker=None,
    memory_limit="auto",
    device_memory_limit=None,
    local_directory=None,
    cpu=None,
    security=None,
    progress=True,
    stream=None,
    limits=None,
) -> SortReport:
    """Sort the rows of INPUT (a file, a directory or a glob of one format) into OUTPUT.

    Parameters
    ----------
    input : str or Path
        A file, a directory or a glob, of one format.
    output : str or Path
        Where the sorted rows go: one file (records, ``.npy``), or a directory of parts with a
        manifest (Parquet). Written whole or not at all.
    format : {None, "records", "npy", "parquet"}
        Default: from the names.
    record_size, key_size : int, default 100 and 10
        Records: ``record_size`` bytes each, ordered by their first ``key_size`` bytes as unsigned
        bytes. ``.npy``: 1-D numbers by value, NaN last.
    by : str or list of str, optional
        Parquet: the sort columns (pandas' order, nulls last).
    descending : bool, default False
        Largest first; ties keep their input order either way.
    overwrite : bool, default False
        Replace an existing OUTPUT that is a file, or a directory dsort wrote, once the new one
        is complete.
    chunk_size : int, optional
        Bytes per block and output range (default: from the limits).
    scheduler, client, security
        A running dask cluster to sort on (its address, or a ``distributed.Client``); a
        ``tls://`` scheduler with ``security``: a ``distributed.security.Security`` or a directory
        made by ``dsort tls``. Default: embedded threads in this process.
    n_workers, threads_per_worker, memory_limit, device_memory_limit
        The embedded threads' limits, in dask's words: workers (GPUs), threads each, host memory
        per worker, GPU memory per GPU (bytes or a fraction).
    local_directory : str, optional
        Where runs that do not fit in memory go (default: beside OUTPUT).
    cpu : bool, optional
        True: no GPU; False: the GPUs (an error where none is visible); None: the GPUs, but
        inputs under ``dsort.file-sort.gpu-min-input`` on the CPU (:func:`on_cpu`). Parquet: the
        CPU, its keys on one GPU only with False.
    progress : bool, default True
        Progress bars on ``stream`` (default: standard output).
    limits : dsort.collections.config.Limits, optional
        The six limits above as one object (then none of them).

    Returns
    -------
    SortReport
        What was sorted, where the time went, and the input's and output's checks.

    Raises
    ------
    InputError
        Bad input or limits, before any work where it can be checked.
    CheckFailed
        The output's count, checksum or order is wrong: nothing is left at OUTPUT.
    """
    words = dict(
        n_workers=n_workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit
    )
    words.update(device_memory_limit=device_memory_limit, local_directory=local_directory, cpu=cpu)
    request = SortRequest(
        input,
        output,
        format,
        record_size,
        key_size,
        by,
        descending,
        overwrite,
        chunk_size,
        scheduler,
        client,
        security,
        Limits.of(limits, **words),
        progress,
        stream,
    )
    return run(request)


def run(req: SortRequest) -> SortReport:
    """Carry out ``req``: check it before any work, decide where it runs, then sort its format
    (:func:`dsort.fixed_sort.sort`, :func:`dsort.parquet_sort.sort`)."""
    from . import fixed_sort, parquet_sort

    req = replace(req, stream=req.stream or sys.stdout)
    t0 = time.perf_counter()
    startup = process_age()
    if req.chunk_size is not None and int(req.chunk_size) < 1:
        raise LimitError(f"--chunk-size must be at least 1 byte, got {req.chunk_size}")
    fmt, files, out = validate(
        req.input,
        req.output,
        format=req.format,
        record_size=req.record_size,
        key_size=req.key_size,
        by=req.by,
        overwrite=req.overwrite,
    )
    lim = req.limits
    if lim.local_directory is not None:
        # the caller's, not a worker's
        lim = replace(lim, local_directory=os.path.abspath(lim.local_directory))
        check_local_directory(lim.local_directory)
    small = False  # the CPU chosen for an input too small to pay for a GPU
    if req.client is None and req.scheduler is None:
        input_bytes = sum(os.path.getsize(f) for f in files)
        threads = cpu_threads(lim.n_workers, lim.threads_per_worker)
        if lim.cpu is None and on_cpu(None, input_bytes, lim.device_memory_limit, threads):
            lim, small = replace(lim, cpu=True), True  # else None: the GPUs where any is visible
    clock = (t0, time.perf_counter())  # the call's start, input validated
    own_client = None
    if req.client is None and req.scheduler:
        from .cluster import open_client

        own_client = open_client(req.scheduler, security=req.security)
    req = replace(req, limits=lim, client=req.client or own_client)
    try:
        if fmt == "parquet":
            # Parquet sorts on the CPU unless --gpu: only its keys would go to a GPU, and on a 1x
            # H100 box that never paid (BENCHMARKS.md section 10)
            return parquet_sort.sort(req, files, out, clock, startup)
        return fixed_sort.sort(req, fmt, files, out, clock, startup, small)
    finally:
        if own_client is not None:
            own_client.close()
