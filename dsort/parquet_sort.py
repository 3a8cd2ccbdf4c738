"""The sort of Parquet files by columns for :func:`dsort.service.run`: the columnar sort in memory
(one part per piece of a row group) or, where the files would not fit, the dataframe sort through
runs (:func:`dsort.io.parquet.sort_job`), on the embedded threads or a cluster; then published as
the records sort is (counts, checksums and order checked, the directory renamed into place).
"""

from __future__ import annotations

import time
from pathlib import Path

from .collections import config
from .core import valsort
from .core.errors import InputError
from .limits import fmt_bytes, mem_available, resources_of
from .report import SortReport
from .request import Null, SortRequest, check


def sort(req: SortRequest, files, out: Path, clock, startup) -> SortReport:
    """Parquet rows by columns (:func:`dsort.io.parquet.sort_job`), on the embedded threads or the
    cluster: the columnar sort in memory (one part per piece of a row group) where
    ``dsort.file-sort.parquet-memory-factor`` times the files fit the memory, its keys ordered on
    one GPU where ``req.limits.cpu`` is False (``--gpu``); else the dataframe sort through runs
    under ``req.limits.local_directory`` (default: beside OUTPUT), parts balanced to within one
    row."""

    from . import io
    from .io import parquet

    t0 = clock[0]
    lim, client, stream = req.limits, req.client, req.stream
    cpu = lim.cpu is not False  # the CPU unless --gpu
    res = None
    if client is None and cpu:
        res = resources_of(lim, device_memory_limit=None, cpu=True)
    elif client is None:  # only the keys go to a GPU: one (where any is visible) orders them
        res = resources_of(lim, n_workers=1, cpu=cpu)
    where = res.described if res else f"the cluster at {client.scheduler.address}"
    if res:
        memory = res.host_budget
    else:
        from .collections.remote import scheduler_identity

        workers = scheduler_identity(client)["workers"].values()
        memory = sum(w.get("memory_limit") or mem_available() for w in workers) or mem_available()
    external = (
        sum(Path(f).stat().st_size for f in files) * config.get("file-sort.parquet-memory-factor")
        > memory
    )
    with io.staged(out, directory=True, overwrite=req.overwrite) as tmp:
        try:
            job = parquet.sort_job(
                files,
                tmp,
                by=req.by,
                descending=req.descending,
                external=external,
                local_directory=lim.local_directory or out.parent,
                device="gpu" if res is not None and res.gpus else None,
                cluster=client is not None,
                threads=res.threads if res else None,
                chunk_size=req.chunk_size,
            )
            print(
                f"sorting {job.records:,} parquet rows ({fmt_bytes(job.nbytes)}) from {req.input} "
                f"into {out}",
                file=stream,
            )
            how = "; through runs on disk (more than fits in memory)" if external else ""
            if external and req.chunk_size:
                how += ", a part a row group (--chunk-size sizes the in-memory sort's parts)"
            print(f"on {where}{how}", file=stream)
            phases = {"validate": clock[1] - t0}
            if job.records:
                in_parts, out_parts = _run_parquet(job, client, res, req.progress, stream, phases)
        except InputError as e:  # a damaged row group, found when it is read
            raise InputError(f"{e}; nothing was written at {out}") from None
        if job.records:
            ins, outs = valsort.combine(in_parts), valsort.combine(job.comparable(out_parts))
        else:
            out_parts, ins, outs = [], valsort.Summary(), valsort.Summary()
        check(ins, outs, job.records, out, stream)
        job.finish(out_parts)
        t_pub = time.perf_counter()
    return SortReport(
        str(req.input),
        out,
        "parquet",
        job.records,
        job.nbytes,
        time.perf_counter() - t0,
        ins,
        outs,
        where,
        startup,
        {**phases, "publish": time.perf_counter() - t_pub},
        {},
        {},
    )


def _run_parquet(job, client, res, progress, stream, phases) -> tuple:
    """``(input parts' summaries, output parts' summaries)`` of a Parquet sort job, computed on
    the embedded threads (``res``) or ``client``'s cluster, with the phase bars a records sort
    shows; each phase's span (first task start to last task end) into ``phases``."""
    from collections import Counter

    from .compute import compute_threads
    from .progress import Progress, _bar_order, make_phase_of, phase_times

    keys = [[d.key for d in job.inputs], [d.key for d in job.outputs]]
    dsk: dict = {}
    # the columnar sort's handles share one
    graphs = {id(d.dask): d.__dask_graph__() for d in [*job.inputs, *job.outputs]}
    for g in graphs.values():
        dsk.update(g)
    if client is None:
        phase_of = make_phase_of()
        counts = Counter(phase_of(k) for k in dsk)
        bar = (
            Progress({p: counts[p] for p in sorted(counts, key=_bar_order)}, stream)
            if progress
            else None
        )
        with bar if bar is not None else Null():
            got = compute_threads(dsk, keys, res.threads, bar)
        if bar is not None:
            phases.update({p: b - a for p, (a, b) in bar.spans.items()})
        return tuple(got)
    from distributed import get_task_stream

    from .compute import compute_client

    with get_task_stream(client=client) as ts:
        got = compute_client(client, dsk, keys, progress)
    phases.update({p: span for p, (_, span) in phase_times(ts.data).items()})
    return tuple(got)
