"""The sort of fixed-width rows in files (records, ``.npy``) for :func:`dsort.service.run`, in three
steps: :func:`plan` (resources, block and range sizes, the run store, the blocks), :func:`run_tasks`
(the graph of :func:`dsort.io._fixed.graph`, on the embedded threads or a cluster) and the publish
that :func:`sort` ends with (counts, checksums and order checked, then the output renamed into
place; on any failure nothing is left at OUTPUT and the runs are removed).
"""

from __future__ import annotations

import contextlib
import os
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path

from .collections import config
from .core import checksums, valsort
from .core.errors import LimitError
from .compute import compute_client, compute_threads
from .limits import Resources, bounded_fan_in, fmt_bytes, merge_groups, resources_of, sizes
from .report import SortReport
from .request import Null, SortRequest, check, first_use_notice, make_dirs


@dataclass
class Plan:
    """What :func:`plan` decided for one sort: the rows, where they run, their blocks and ranges."""

    fmt: str
    files: list
    out: Path
    layout: object  # dsort.core.runs.Layout
    dtype: object  # a .npy file's dtype; None for records
    n: int  # rows
    nbytes: int
    res: Resources
    apart: bool  # checksums summed by a process of their own (the CPU path)
    gpu_tasks: int
    job_id: str
    runs_dir: Path
    made: list  # directories made for the runs, outermost first
    store: object  # dsort.core.runs.StoreConfig
    blocks: tuple
    ranges: tuple
    groups: tuple
    group_ranges: tuple
    rows_per_block: int
    phases: dict = field(default_factory=dict)
    planned: float = 0.0  # when the resources were known (perf_counter): "allocate" counts from it


def sort(
    req: SortRequest, fmt: str, files, out: Path, clock, startup, small: bool = False
) -> SortReport:
    """Sort ``files`` (records or ``.npy``) into ``out`` as ``req`` asks: :func:`plan`, then
    :func:`run_tasks` into a staged output, checked and published."""
    from . import io
    from .core import runs as R

    p = plan(req, fmt, files, out, clock, small)
    describe(req, p)
    with io.staged(out, overwrite=req.overwrite) as tmp:
        try:
            ins, outs, stages, tiers = run_tasks(req, p, tmp)
            check(ins, outs, p.n, out, req.stream)
            t_pub = time.perf_counter()
        finally:
            R.drop(p.job_id, str(p.runs_dir))
            for d in reversed(p.made):  # directories this run made for its runs, if left empty
                with contextlib.suppress(OSError):
                    d.rmdir()
            if req.client is not None:
                with contextlib.suppress(Exception):
                    req.client.run(R.drop, p.job_id)
    p.phases["publish"] = time.perf_counter() - t_pub
    t0 = clock[0]
    return SortReport(
        str(req.input),
        out,
        fmt,
        p.n,
        p.nbytes,
        time.perf_counter() - t0,
        ins,
        outs,
        p.res.described,
        startup,
        p.phases,
        stages,
        tiers,
    )


def plan(req: SortRequest, fmt: str, files, out: Path, clock, small: bool = False) -> Plan:
    """The rows of ``files``, the resources the sort runs on (the embedded threads within
    ``req.limits``, or the cluster's workers), the block and output range sizes from them, the run
    store and the input blocks. Makes the runs' directory where it is missing."""
    from . import io
    from .collections import remote
    from .core import plan as P
    from .core import runs as R
    from .io import _fixed as fixed, npy, records

    if fmt == "records":
        layout = R.Layout(req.record_size, req.key_size)
        lengths, offsets, dtype = records.lengths(files, req.record_size), [0] * len(files), None
    else:
        dtype, lengths, offsets = npy.inspect(files)
        layout = R.Layout(dtype.itemsize, dtype.itemsize, dtype.str)
    n = sum(lengths)
    nbytes = n * layout.row_bytes
    res = _resources(req, nbytes, small)
    apart = not res.gpus and req.client is None and checksums.worth_apart(nbytes, res.threads)
    if apart:
        checksums.start_apart()
    t0, t_valid = clock
    t_res = time.perf_counter()
    rows_per_block, rows_per_range, host_runs, device_runs, gpu_tasks = sizes(
        res, layout.row_bytes, req.chunk_size, nbytes
    )
    rows_per_block, rows_per_range = bounded_fan_in(
        n, layout.row_bytes, rows_per_block, res, req.chunk_size, gpu_tasks
    )
    # 32 hex digits, as dask's tokens: key_split drops them from task names
    job_id = uuid.uuid4().hex
    local = req.limits.local_directory
    base = Path(local).absolute() if local else out.parent
    made = [] if base.is_dir() else make_dirs(base)
    if base != out.parent:
        io.remove_leftovers(base, out.name)
    runs_dir = base / f".{out.name}.dsort-runs-{os.getpid()}-{job_id[:8]}"
    # workers of a cluster keep runs on their own disks; slices are read where they are
    if req.client is not None:
        host_runs = device_runs = 0
    store = R.StoreConfig(
        job_id,
        str(runs_dir),
        layout.row_bytes,
        host_runs,
        device_runs,
        local=req.client is not None,
        cluster=remote.DASK,
    )
    blocks = fixed.plan_blocks(files, offsets, lengths, layout.row_bytes, rows_per_block)
    ranges = P.ranges(n, rows_per_range)
    groups = merge_groups(len(blocks))
    group_ranges = tuple(
        P.ranges(sum(b[2] for b in blocks[a:z]), rows_per_range) for a, z in groups
    )
    phases = {"validate": t_valid - t0, "resources": t_res - t_valid}
    return Plan(
        fmt,
        files,
        out,
        layout,
        dtype,
        n,
        nbytes,
        res,
        apart,
        gpu_tasks,
        job_id,
        runs_dir,
        made,
        store,
        blocks,
        ranges,
        groups,
        group_ranges,
        rows_per_block,
        phases,
        t_res,
    )


def _resources(req: SortRequest, nbytes: int, small: bool) -> Resources:
    """The threads, memory and GPUs the sort runs on: the embedded ones within ``req.limits``, or
    those of ``req.client``'s workers."""
    lim, client = req.limits, req.client
    if client is None:
        res = resources_of(lim, nbytes)
        if small:
            res.described += (
                " (under dsort.file-sort.gpu-min-input, "
                f"{config.get('file-sort.gpu-min-input')}: --gpu for the GPUs)"
            )
        return res
    from .collections.remote import scheduler_identity
    from .engine.device import has_gpu

    info = scheduler_identity(client)["workers"].values()
    if not info:
        raise LimitError("the cluster has no workers")
    mem = min((w.get("memory_limit") or 0 for w in info), default=0) or 4 << 30
    gpu = not lim.cpu and all(client.run(has_gpu).values())
    return Resources(
        sum(w["nthreads"] for w in info),
        mem * len(info),
        (0,) if gpu else (),
        8 << 30 if gpu else 0,
        f"the cluster at {client.scheduler.address}: {len(info)} workers, "
        f"{sum(w['nthreads'] for w in info)} threads",
    )


def describe(req: SortRequest, p: Plan) -> None:
    """The two lines that say what the sort will do, and where."""
    stream = req.stream
    print(
        f"sorting {p.n:,} {p.fmt} ({fmt_bytes(p.nbytes)}) from {req.input} into {p.out}",
        file=stream,
    )
    at_once = f", {p.gpu_tasks} at once per GPU" if p.gpu_tasks else ""
    passes = ""
    if p.groups:
        passes = (
            f", merged in two passes (first {len(p.groups)} groups of up to "
            f"{max(z - a for a, z in p.groups):,} runs)"
        )
    print(
        f"on {p.res.described}; {len(p.blocks)} runs of up to "
        f"{fmt_bytes(p.rows_per_block * p.layout.row_bytes)}, "
        f"{len(p.ranges)} output ranges{at_once}{passes}",
        file=stream,
    )
    if p.res.gpus and req.client is None:
        first_use_notice(stream)


def run_tasks(req: SortRequest, p: Plan, tmp) -> tuple:
    """Allocate the staged output ``tmp`` and run the sort's tasks into it: ``(input summary,
    output summary, seconds per task stage, runs per tier)``; each phase's span into
    ``p.phases``."""
    from .core import filesort as F
    from .core import plan as P
    from .io import _fixed as fixed, npy
    from .io._blocks import allocate
    from .progress import Progress

    stages, tiers = {}, {}
    input_sums = None  # the input's checksums, asked of the checksum process (a future)
    try:
        out_offset = (
            npy.create(tmp, p.dtype, p.n) if p.fmt == "npy" else allocate(tmp, p.nbytes) or 0
        )
        if not p.n:
            return valsort.Summary(), valsort.Summary(), stages, tiers
        spacing, chain_spacing = P.pass_spacings(
            [b[2] for b in p.blocks], len(p.ranges), p.groups, p.group_ranges
        )
        gpus = p.res.gpus if req.client is None else ((0,) if p.res.gpus else ())
        job = F.Job(
            p.job_id,
            p.blocks,
            str(tmp),
            out_offset,
            gpus,
            max(p.gpu_tasks, 1),
            checksums_apart=p.apart,
            store=p.store,
            spacing=spacing,
            layout=p.layout,
            range_rows=p.ranges,
            descending=req.descending,
            groups=p.groups,
            group_ranges=p.group_ranges,
            chain_spacing=chain_spacing,
        )
        dsk, run_keys, chain_keys, merge_keys = fixed.graph(job)
        input_sums = _input_sums(job, p.res.threads) if p.apart else None
        p.phases["allocate"] = time.perf_counter() - p.planned
        first_pass = 2 * len(chain_keys) + sum(map(len, p.group_ranges))
        counts = {
            "run": len(run_keys),
            "first pass": first_pass,
            "cuts": 1,
            "merge": len(merge_keys),
        }
        bar = Progress({k: v for k, v in counts.items() if v}, req.stream) if req.progress else None
        keys = [run_keys, chain_keys, merge_keys]
        if req.client is None:
            with bar if bar is not None else Null():
                run_results, chain_results, merge_results = compute_threads(
                    dsk, keys, p.res.threads, bar
                )
            if bar is not None:
                p.phases.update({ph: s[1] - s[0] for ph, s in bar.spans.items()})
        else:
            run_results, chain_results, merge_results = compute_client(
                req.client, dsk, keys, req.progress
            )
        for run, _, times in run_results:
            tier = "workers' disks" if run.worker else run.tier
            tiers[tier] = tiers.get(tier, 0) + 1
            _add(stages, times)
        if p.apart:
            run_results, merge_results = _checksums_apart(
                job, input_sums, run_results, merge_results, p.res.threads, p.phases
            )
        for _, times in [*chain_results, *merge_results]:
            _add(stages, times)
        ins = valsort.combine([s for _, s, _ in run_results])
        outs = valsort.combine([s for s, _ in merge_results], descending=req.descending)
        return ins, outs, stages, tiers
    finally:
        # the job failed: its input's sums are not wanted
        if input_sums is not None and not input_sums.done():
            checksums.stop_apart()


def _input_sums(job, threads: int):
    """The input blocks' checksums, asked of the checksum process now (it sums them from the input
    file while the sort runs): a future of their list, in block order."""
    import threading
    from concurrent.futures import Future

    items = [(path, offset, n, job.layout.row_bytes) for path, offset, n in job.blocks]
    done: Future = Future()

    def ask():
        try:
            done.set_result(checksums.sums_apart(items, threads))
        except BaseException as e:
            done.set_exception(e)

    # a daemon: a job that fails meanwhile ends the checksum process (checksums.stop_apart) and this
    # thread with it, and an interpreter that exits does not wait for it
    threading.Thread(target=ask, name="dsort-input-sums", daemon=True).start()
    return done


def _checksums_apart(job, input_sums, run_results, merge_results, threads: int, phases: dict):
    """The run and merge tasks' results with the checksums that the checksum process summed from
    the files (``Job.checksums_apart``): the input blocks' (``input_sums``, asked at the start), and
    the output ranges' now that they are written. Phase "checksums": the wait for both."""
    from .core import plan

    t = time.perf_counter()
    rb = job.layout.row_bytes
    starts = plan.offsets(job.range_rows).tolist()
    outputs = checksums.sums_apart(
        [(job.output, job.out_offset + a * rb, r, rb) for a, r in zip(starts, job.range_rows)],
        threads,
    )
    inputs = input_sums.result()
    phases["checksums"] = time.perf_counter() - t
    runs = [
        (run, valsort.Summary(records=n, checksum=c, bytes=n * rb), times)
        for (run, _, times), (_, _, n), c in zip(run_results, job.blocks, inputs)
    ]
    merges = [
        (replace(s, checksum=c) if s.records else s, times)
        for (s, times), c in zip(merge_results, outputs)
    ]
    return runs, merges


def _add(acc: dict, times: dict) -> None:
    for k, v in times.items():
        acc[k] = acc.get(k, 0.0) + v
