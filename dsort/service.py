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
  worker holding it for the slices (:meth:`dsort.core.runs.RunStore.read_many`), so only slices travel.

The limits, in dask's words, set the sizes: ``n_workers * threads_per_worker`` threads,
``memory_limit`` per worker (``n_workers`` of them share the job's host memory budget),
``device_memory_limit`` per GPU. Half of each budget holds sorted runs (beyond it they go to disk),
half the tasks' working memory; from that come the block (run) and output range sizes, so memory
follows the limits, never the data's size. A limit too small for one block is refused up front
with the smallest workable value.

Nothing is lost: OUTPUT appears whole or not at all (:func:`dsort.io.staged`), the input's
record count and checksum must equal the output's, and the runs are removed however the job ends.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from dataclasses import replace
from pathlib import Path

from .core import checksums, valsort
from .collections import config
from .collections.config import parse_size  # noqa: F401  (public here too)
from .core.errors import CheckFailed, InputError, JobFailed, LimitError  # noqa: F401  (public here too)
from .compute import compute_client, compute_threads
from .report import SortReport, format_report, process_age  # noqa: F401  (public here too)
from .limits import Resources, bounded_fan_in, cpu_threads, fmt_bytes, mem_available, merge_groups, on_cpu, resources, sizes  # noqa: F401  (public here too)

# The sizes policy (block bounds, GPU threads, merge fan-in, Parquet's memory factor) and the
# no-workers timeout are dask settings: dsort.file-sort.* and dsort.no-workers-timeout
# (dsort/dsort.yaml), read at each call.


# -- the service ------------------------------------------------------------------------------------


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
            f"OUTPUT {output} is named like {named} but INPUT is {fmt}, and dsort writes the input's format; choose a name that says so"
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
) -> SortReport:
    """Sort the rows of INPUT (a file, a directory or a glob of one format) into OUTPUT.

    ``format``: ``"records"``, ``"npy"`` or ``"parquet"`` (default: from the names). Records:
    ``record_size`` bytes each, ordered by the first ``key_size`` bytes as unsigned bytes. ``.npy``:
    1-D numbers by value, NaN last. Parquet: by the columns ``by`` (pandas' order, nulls last),
    written as a directory of parts with a manifest. ``descending``: largest first; ties keep
    their input order either way. ``overwrite``: replace an existing OUTPUT that is a file or a
    directory dsort wrote, once the new one is complete.

    Where: ``scheduler``/``client`` for a running dask cluster (a ``tls://`` scheduler with
    ``security``: a ``distributed.security.Security`` or a directory made by ``dsort tls``); else
    embedded threads with
    ``n_workers``, ``threads_per_worker``, ``memory_limit`` (per worker), ``device_memory_limit``
    (per GPU; bytes or a fraction), ``cpu`` (True: no GPU; False: the GPUs, an error where none is
    visible; None: the GPUs, but inputs under ``dsort.file-sort.gpu-min-input`` on the CPU: see
    :func:`on_cpu`; Parquet: the CPU, its keys on one GPU only with False). ``local_directory``: where runs that do not
    fit in memory go (default: beside OUTPUT). ``chunk_size``: bytes per block and output range
    (default: from the limits).

    Raises :class:`~dsort.io.InputError` (bad input or limits, before any work where it can be
    checked) or :class:`CheckFailed` (output count, checksum or order wrong: nothing at OUTPUT).
    """
    stream = stream or sys.stdout
    t0 = time.perf_counter()
    startup = process_age()
    if chunk_size is not None and int(chunk_size) < 1:
        raise LimitError(f"--chunk-size must be at least 1 byte, got {chunk_size}")
    fmt, files, out = validate(input, output, format=format, record_size=record_size, key_size=key_size, by=by, overwrite=overwrite)
    if local_directory is not None:
        local_directory = os.path.abspath(local_directory)  # the caller's, not a worker's
        check_local_directory(local_directory)
    small = False  # the CPU chosen for an input too small to pay for a GPU
    if client is None and scheduler is None:
        input_bytes = sum(os.path.getsize(f) for f in files)
        threads = cpu_threads(n_workers, threads_per_worker)
        if cpu is None and on_cpu(None, input_bytes, device_memory_limit, threads):
            cpu = small = True  # else None: the GPUs where any is visible
    clock = (t0, time.perf_counter())  # the call's start, input validated
    if client is None and scheduler:
        from .cluster import open_client

        client = own_client = open_client(scheduler, security=security)
    else:
        own_client = None
    try:
        if fmt == "parquet":
            # Parquet sorts on the CPU unless --gpu: only its keys would go to a GPU, and on the 1x H100
            # box that never paid (3e6 and 3e7 rows, BENCHMARKS.md section 10)
            return _sort_parquet(
                input,
                out,
                files,
                by,
                descending,
                overwrite,
                client,
                n_workers,
                threads_per_worker,
                memory_limit,
                device_memory_limit,
                local_directory,
                cpu is not False,
                progress,
                stream,
                clock,
                startup,
            )
        return _sort_fixed(
            input,
            out,
            fmt,
            files,
            record_size,
            key_size,
            descending,
            overwrite,
            chunk_size,
            client,
            n_workers,
            threads_per_worker,
            memory_limit,
            device_memory_limit,
            local_directory,
            cpu,
            progress,
            stream,
            clock,
            startup,
            small,
        )
    finally:
        if own_client is not None:
            own_client.close()


def _sort_fixed(
    input,
    out,
    fmt,
    files,
    record_size,
    key_size,
    descending,
    overwrite,
    chunk_size,
    client,
    n_workers,
    threads_per_worker,
    memory_limit,
    device_memory_limit,
    local_directory,
    cpu,
    progress,
    stream,
    clock,
    startup,
    small=False,
):
    from .core import filesort as F
    from . import io
    from .core import plan
    from .collections import remote
    from .core import runs as R
    from .io import _fixed as fixed, npy, records
    from .io._blocks import allocate
    from .progress import Progress

    if fmt == "records":
        layout = R.Layout(record_size, key_size)
        lengths, offsets, dtype = records.lengths(files, record_size), [0] * len(files), None
    else:
        dtype, lengths, offsets = npy.inspect(files)
        layout = R.Layout(dtype.itemsize, dtype.itemsize, dtype.str)
    n = sum(lengths)
    nbytes = n * layout.row_bytes
    if client is None:
        res = resources(
            n_workers=n_workers,
            threads_per_worker=threads_per_worker,
            memory_limit=memory_limit,
            device_memory_limit=device_memory_limit,
            cpu=cpu,
            nbytes=nbytes,
        )
        if small:
            res.described += f" (under dsort.file-sort.gpu-min-input, {config.get('file-sort.gpu-min-input')}: --gpu for the GPUs)"
    else:
        from .collections.remote import scheduler_identity

        info = scheduler_identity(client)["workers"].values()
        if not info:
            raise LimitError("the cluster has no workers")
        mem = min((w.get("memory_limit") or 0 for w in info), default=0) or 4 << 30
        from .engine.device import has_gpu

        gpu = not cpu and all(client.run(has_gpu).values())
        res = Resources(
            sum(w["nthreads"] for w in info),
            mem * len(info),
            (0,) if gpu else (),
            8 << 30 if gpu else 0,
            f"the cluster at {client.scheduler.address}: {len(info)} workers, {sum(w['nthreads'] for w in info)} threads",
        )
    apart = not res.gpus and client is None and checksums.worth_apart(nbytes, res.threads)  # checksums summed by a process of their own
    if apart:
        checksums.start_apart()
    t0, t_valid = clock
    t_res = time.perf_counter()
    phases = {"validate": t_valid - t0, "resources": t_res - t_valid}
    rows_per_block, rows_per_range, host_runs, device_runs, gpu_tasks = sizes(res, layout.row_bytes, chunk_size, nbytes)
    rows_per_block, rows_per_range = bounded_fan_in(n, layout.row_bytes, rows_per_block, res, chunk_size, gpu_tasks)
    job_id = uuid.uuid4().hex  # 32 hex digits, as dask's tokens: key_split drops them from task names
    base = Path(local_directory).absolute() if local_directory else out.parent
    made = [] if base.is_dir() else _make_dirs(base)
    if base != out.parent:
        io.remove_leftovers(base, out.name)
    runs_dir = base / f".{out.name}.dsort-runs-{os.getpid()}-{job_id[:8]}"
    if client is not None:  # workers of a cluster keep runs on their own disks; slices are read where they are
        host_runs = device_runs = 0
    store = R.StoreConfig(job_id, str(runs_dir), layout.row_bytes, host_runs, device_runs, local=client is not None, cluster=remote.DASK)
    blocks = fixed.plan_blocks(files, offsets, lengths, layout.row_bytes, rows_per_block)
    ranges = plan.ranges(n, rows_per_range)
    groups = merge_groups(len(blocks))
    group_ranges = tuple(plan.ranges(sum(b[2] for b in blocks[a:z]), rows_per_range) for a, z in groups)
    print(f"sorting {n:,} {fmt} ({fmt_bytes(nbytes)}) from {input} into {out}", file=stream)
    at_once = f", {gpu_tasks} at once per GPU" if gpu_tasks else ""
    passes = f", merged in two passes (first {len(groups)} groups of up to {max(z - a for a, z in groups):,} runs)" if groups else ""
    print(
        f"on {res.described}; {len(blocks)} runs of up to {fmt_bytes(rows_per_block * layout.row_bytes)}, "
        f"{len(ranges)} output ranges{at_once}{passes}",
        file=stream,
    )
    if res.gpus and client is None:
        _first_use_notice(stream)
    stages, tiers = {}, {}
    input_sums = None  # the input's checksums, asked of the checksum process (a future)
    with io.staged(out, overwrite=overwrite) as tmp:
        try:
            out_offset = npy.create(tmp, dtype, n) if fmt == "npy" else allocate(tmp, nbytes) or 0
            ins = outs = valsort.Summary()
            if n:
                spacing, chain_spacing = plan.pass_spacings([b[2] for b in blocks], len(ranges), groups, group_ranges)
                gpus = res.gpus if client is None else ((0,) if res.gpus else ())
                job = F.Job(
                    job_id, blocks, str(tmp), out_offset, gpus, max(gpu_tasks, 1), checksums_apart=apart, store=store,
                    spacing=spacing, layout=layout, range_rows=ranges, descending=descending, groups=groups,
                    group_ranges=group_ranges, chain_spacing=chain_spacing,
                )  # fmt: skip
                dsk, run_keys, chain_keys, merge_keys = fixed.graph(job)
                input_sums = _input_sums(job, res.threads) if apart else None
                phases["allocate"] = time.perf_counter() - t_res
                counts = {
                    "run": len(run_keys),
                    "first pass": 2 * len(chain_keys) + sum(map(len, group_ranges)),
                    "cuts": 1,
                    "merge": len(merge_keys),
                }
                bar = Progress({k: v for k, v in counts.items() if v}, stream) if progress else None
                keys = [run_keys, chain_keys, merge_keys]
                if client is None:
                    with bar if bar is not None else _Null():
                        run_results, chain_results, merge_results = compute_threads(dsk, keys, res.threads, bar)
                    if bar is not None:
                        phases.update({p: s[1] - s[0] for p, s in bar.spans.items()})
                else:
                    run_results, chain_results, merge_results = compute_client(client, dsk, keys, progress)
                for run, _, times in run_results:
                    tier = "workers' disks" if run.worker else run.tier
                    tiers[tier] = tiers.get(tier, 0) + 1
                    _add(stages, times)
                if apart:
                    run_results, merge_results = _checksums_apart(job, input_sums, run_results, merge_results, res.threads, phases)
                for _, times in [*chain_results, *merge_results]:
                    _add(stages, times)
                ins = valsort.combine([s for _, s, _ in run_results])
                outs = valsort.combine([s for s, _ in merge_results], descending=descending)
            _check(ins, outs, n, out, stream)
            t_pub = time.perf_counter()
        finally:
            if input_sums is not None and not input_sums.done():  # the job failed: its input's sums are not wanted
                checksums.stop_apart()
            R.drop(job_id, str(runs_dir))
            for d in reversed(made):  # directories this run made for its runs, if left empty
                with contextlib.suppress(OSError):
                    d.rmdir()
            if client is not None:
                try:
                    client.run(R.drop, job_id)
                except Exception:
                    pass
    phases["publish"] = time.perf_counter() - t_pub
    return SortReport(str(input), out, fmt, n, nbytes, time.perf_counter() - t0, ins, outs, res.described, startup, phases, stages, tiers)


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

    # a daemon: a job that fails meanwhile ends the checksum process (checksums.stop_apart) and this thread
    # with it, and an interpreter that exits does not wait for it
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
    outputs = checksums.sums_apart([(job.output, job.out_offset + a * rb, r, rb) for a, r in zip(starts, job.range_rows)], threads)
    inputs = input_sums.result()
    phases["checksums"] = time.perf_counter() - t
    runs = [
        (run, valsort.Summary(records=n, checksum=c, bytes=n * rb), times)
        for (run, _, times), (_, _, n), c in zip(run_results, job.blocks, inputs)
    ]
    merges = [(replace(s, checksum=c) if s.records else s, times) for (s, times), c in zip(merge_results, outputs)]
    return runs, merges


def _first_use_notice(stream) -> None:
    """Say so when this run compiles the GPU kernels (the first on a machine): it costs seconds."""
    from .engine import _cuda

    if not _cuda.kernels_built():
        print(
            f"first use of dsort's kernels on this {_cuda.arch()} GPU: compiling what this sort needs (seconds, once; "
            "`dsort build-kernels` builds them all ahead of time)",
            file=stream,
        )


def check_local_directory(path) -> None:
    """Refuse a ``--local-directory`` that cannot hold runs, before any work: not writable, or not
    makeable (its nearest existing parent a file, or not writable)."""
    path = Path(path)
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"--local-directory {path} cannot be made: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        where = "" if existing == path else f" in {existing}"
        raise InputError(f"--local-directory {path} is not writable" + (f" (it would be made{where})" if where else ""))


def _make_dirs(path: Path) -> list:
    """Make ``path`` and its missing parents (as dask makes a worker's local directory); return
    the directories made, outermost first, so they can be removed again."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--local-directory {path} cannot be made: {e.strerror}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise InputError(f"--local-directory {path} is not writable")
    return list(reversed(missing))


def _add(acc: dict, times: dict) -> None:
    for k, v in times.items():
        acc[k] = acc.get(k, 0.0) + v


def _check(ins: valsort.Summary, outs: valsort.Summary, n: int, out, stream) -> None:
    print(f"input  {ins.records:>15,} records  checksum {ins.checksum:x}", file=stream)
    print(f"output {outs.records:>15,} records  checksum {outs.checksum:x}", file=stream)
    problems = []
    if (ins.records, ins.checksum) != (outs.records, outs.checksum) or outs.records != n:
        problems.append("the output's record count or checksum differs from the input's")
    if outs.unordered:
        problems.append(f"the output is not sorted: {outs.unordered:,} records out of order, the first at record {outs.first_unordered:,}")
    if problems:
        raise CheckFailed("; ".join(problems) + f"; nothing was written at {out}")


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _sort_parquet(
    input,
    out,
    files,
    by,
    descending,
    overwrite,
    client,
    n_workers,
    threads_per_worker,
    memory_limit,
    device_memory_limit,
    local_directory,
    cpu,
    progress,
    stream,
    clock,
    startup,
):
    """Parquet rows by columns (:func:`dsort.io.parquet.sort_job`), on the embedded threads or the
    cluster: the columnar sort in memory (one part per row group) where
    ``dsort.file-sort.parquet-memory-factor`` times the files fit the memory, its keys ordered on
    one GPU where ``cpu`` is False (``--gpu``); else the dataframe sort through runs
    under ``local_directory`` (default: beside OUTPUT), parts balanced to within one row."""

    from . import io
    from .io import parquet

    t0 = clock[0]
    res = None
    if client is None and cpu:
        res = resources(n_workers=n_workers, threads_per_worker=threads_per_worker, memory_limit=memory_limit, cpu=True)
    elif client is None:  # only the keys go to a GPU: one (where any is visible) orders them
        limits = {"threads_per_worker": threads_per_worker, "memory_limit": memory_limit, "device_memory_limit": device_memory_limit}
        res = resources(n_workers=1, cpu=cpu, **limits)
    where = res.described if res else f"the cluster at {client.scheduler.address}"
    if res:
        memory = res.host_budget
    else:
        from .collections.remote import scheduler_identity

        workers = scheduler_identity(client)["workers"].values()
        memory = sum(w.get("memory_limit") or mem_available() for w in workers) or mem_available()
    external = sum(Path(f).stat().st_size for f in files) * config.get("file-sort.parquet-memory-factor") > memory
    with io.staged(out, directory=True, overwrite=overwrite) as tmp:
        try:
            job = parquet.sort_job(
                files,
                tmp,
                by=by,
                descending=descending,
                external=external,
                local_directory=local_directory or out.parent,
                device="gpu" if res is not None and res.gpus else None,
                cluster=client is not None,
            )
            print(f"sorting {job.records:,} parquet rows ({fmt_bytes(job.nbytes)}) from {input} into {out}", file=stream)
            print(f"on {where}" + ("; through runs on disk (more than fits in memory)" if external else ""), file=stream)
            phases = {"validate": clock[1] - t0}
            if job.records:
                in_parts, out_parts = _run_parquet(job, client, res, progress, stream, phases)
        except InputError as e:  # a damaged row group, found when it is read
            raise InputError(f"{e}; nothing was written at {out}") from None
        if job.records:
            ins, outs = valsort.combine(in_parts), valsort.combine(job.comparable(out_parts))
        else:
            out_parts, ins, outs = [], valsort.Summary(), valsort.Summary()
        _check(ins, outs, job.records, out, stream)
        job.finish(out_parts)
        t_pub = time.perf_counter()
    return SortReport(
        str(input),
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
    graphs = {id(d.dask): d.__dask_graph__() for d in [*job.inputs, *job.outputs]}  # the columnar sort's handles share one
    for g in graphs.values():
        dsk.update(g)
    if client is None:
        phase_of = make_phase_of()
        counts = Counter(phase_of(k) for k in dsk)
        bar = Progress({p: counts[p] for p in sorted(counts, key=_bar_order)}, stream) if progress else None
        with bar if bar is not None else _Null():
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
