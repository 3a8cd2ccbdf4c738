"""The embedded executor's resources and the file sort's sizes: threads, GPUs and memory budgets
from dask's cluster options (:func:`resources`), the engine an input goes to (:func:`on_cpu`), and
from the budgets the block (run) and output range sizes (:func:`sizes`) and the merges' bounded
fan-in (:func:`bounded_fan_in`). Limits that cannot work are refused here, before any work, with
the smallest workable value."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .collections import config
from .collections.config import parse_size
from .core.errors import LimitError


@dataclass
class Resources:
    threads: int
    host_budget: int  # bytes for the whole job (runs + working memory)
    gpus: tuple = ()
    device_budget: int = 0  # bytes per GPU
    described: str = ""


def mem_available() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_AVPHYS_PAGES")


def cpu_threads(n_workers=None, threads_per_worker=None) -> int:
    """The threads of the embedded executor's CPU workers: ``n_workers`` (default one) of
    ``threads_per_worker`` each (default: the CPUs shared among them)."""
    cpus = os.cpu_count() or 1
    workers = n_workers or 1
    if threads_per_worker:
        return workers * threads_per_worker
    return workers * max(1, cpus // workers) if n_workers else cpus


def default_gpus(visible: int, nbytes: int | None) -> int:
    """How many of the ``visible`` GPUs an embedded sort of ``nbytes`` of input takes when the
    user names no count: one, and one more for each ``dsort.file-sort.input-per-extra-gpu`` of
    input (0: one at any size). Data in files and host memory is bounded by the host (its
    memory bandwidth, the disk): a second GPU adds a worker's threads, its copies and an
    exchange between GPUs, and must be measured to win before the default takes it (BENCHMARKS.md
    section 7). ``--n-workers N`` takes N GPUs whatever the size."""
    per = config.nbytes("file-sort.input-per-extra-gpu")
    if not visible:
        return 0
    if per <= 0 or nbytes is None:
        return 1
    return min(visible, 1 + int(nbytes) // per)


def resources(
    *,
    n_workers=None,
    threads_per_worker=None,
    memory_limit="auto",
    device_memory_limit=None,
    cpu=None,
    nbytes=None,
) -> Resources:
    """The embedded executor's threads, GPUs and budgets from dask's cluster options. ``cpu``:
    True for CPU workers, False for the GPUs (an error where none is visible), None for the GPUs
    where any is visible: ``n_workers`` of them, else :func:`default_gpus` for ``nbytes`` of
    input."""
    from .engine import device as dev

    cpus = os.cpu_count() or 1
    for name, v in (("--n-workers", n_workers), ("--threads-per-worker", threads_per_worker)):
        if v is not None and v < 1:
            raise LimitError(f"{name} must be at least 1, got {v}")
    visible = 0 if cpu else dev.gpu_count()
    if cpu is False and not visible:
        raise LimitError(
            "--gpu: no CUDA device is visible (or CuPy is missing); leave it out to sort on the CPU"
        )
    if visible and n_workers is not None and n_workers > visible:
        raise LimitError(
            f"--n-workers {n_workers}: there is one worker per GPU and {visible} GPU(s) are "
            "visible; pass --cpu for CPU workers"
        )
    gpus = (
        tuple(range(n_workers if n_workers else default_gpus(visible, nbytes))) if visible else ()
    )
    workers = n_workers or (len(gpus) or 1)
    if threads_per_worker:
        threads = workers * threads_per_worker
    elif gpus:
        threads = min(cpus, config.get("file-sort.gpu-threads")) * len(gpus)
    else:
        threads = cpu_threads(n_workers)
    available = mem_available()
    per_worker = parse_size(memory_limit, available // workers, "--memory-limit")
    host = per_worker * workers if per_worker else int(available * 0.6)
    device_budget = 0
    if gpus:
        import cupy

        free, total = cupy.cuda.Device(gpus[0]).mem_info
        device_budget = parse_size(device_memory_limit, total, "--device-memory-limit") or int(
            free * 0.8
        )
    elif device_memory_limit is not None:
        parse_size(device_memory_limit, 1, "--device-memory-limit")
    where = f"{threads} threads"
    where += (
        f" on {len(gpus)} GPU(s), device memory {fmt_bytes(device_budget)} each"
        if gpus
        else " on the CPU"
    )
    if gpus and not n_workers and visible > len(gpus):
        where += f" ({visible} visible: --n-workers {visible} for all)"
    where += f", host memory {fmt_bytes(host)}"
    return Resources(threads, host, gpus, device_budget, where)


def resources_of(limits, nbytes=None, **instead) -> Resources:
    """:func:`resources` within ``limits`` (a :class:`~dsort.collections.config.Limits`), some
    of its fields replaced by ``instead``."""
    words = dict(
        n_workers=limits.n_workers,
        threads_per_worker=limits.threads_per_worker,
        memory_limit=limits.memory_limit,
    )
    words.update(device_memory_limit=limits.device_memory_limit, cpu=limits.cpu)
    return resources(**{**words, **instead}, nbytes=nbytes)


def on_cpu(cpu, nbytes: int, device_memory_limit=None, threads: int = 1) -> bool:
    """Whether an embedded sort of ``nbytes`` of input on ``threads`` CPU threads runs on the CPU:
    ``cpu`` where it is given (True: ``--cpu``, False: ``--gpu``); else where the input is under
    ``dsort.file-sort.gpu-min-input``, or under ``gpu-min-input-per-thread`` for each thread (the
    CPU's sort scales with its threads, a GPU's start does not), as starting a GPU costs more than
    such a whole sort on the CPU, unless a ``device_memory_limit`` asks for the GPU."""
    if cpu is not None:
        return bool(cpu)
    least = max(
        config.nbytes("file-sort.gpu-min-input"),
        config.nbytes("file-sort.gpu-min-input-per-thread") * max(1, int(threads)),
    )
    return device_memory_limit is None and nbytes < least


def fmt_bytes(n) -> str:
    from dask.utils import format_bytes

    return format_bytes(int(n))


def sizes(res: Resources, row_bytes: int, chunk_size: int | None, nbytes: int | None = None):
    """``(rows per block, rows per output range, host bytes for runs, device bytes for runs, GPU
    tasks at once per GPU)`` from the budgets: half of each holds runs, the other half the tasks
    at work (a task needs about three times its block: the rows, their sorted copy, keys and
    positions). On a GPU, fewer tasks at once when its budget is small, so blocks stay large.
    On the CPU, when the input (``nbytes``) is larger than half the host budget its runs go to
    disk anyway: runs keep an eighth, the tasks the rest, so that blocks are larger and the
    merges read fewer, longer slices (runs x ranges slices: 3 GB in 715 MiB on 16 threads made
    384 x 384 of them, 147,000 reads)."""
    host_runs = host_run_bytes(res, nbytes)
    gpu_tasks = 0
    min_block = config.nbytes("file-sort.min-block")
    if res.gpus:
        work = res.device_budget // 2
        gpu_tasks = max(
            1,
            min(
                config.get("file-sort.gpu-threads"),
                -(-res.threads // len(res.gpus)),
                work // 3 // (64 << 20),
            ),
        )
        block = min(config.nbytes("file-sort.gpu-block"), work // gpu_tasks // 3)
        smallest = ("--device-memory-limit", min_block * 3 * 2 * gpu_tasks, "per GPU")
    else:
        block = min(
            config.nbytes("file-sort.cpu-block"), (res.host_budget - host_runs) // res.threads // 3
        )
        # what the tasks need; the runs keep the rest (an eighth of a big input's budget)
        tasks = min_block * 3 * res.threads
        need = (
            -(-tasks * 8 // 7)
            if nbytes is not None and nbytes > -(-tasks * 8 // 7) // 2
            else tasks * 2
        )
        smallest = ("--memory-limit", need, f"in all for {res.threads} threads")
    if chunk_size:
        block = int(chunk_size)
    elif block < max(min_block, row_bytes):
        option, need, per = smallest
        have = res.device_budget if res.gpus else res.host_budget
        raise LimitError(
            f"{option}: {fmt_bytes(have)} is too small to sort blocks of at least "
            f"{fmt_bytes(min_block)}; "
            f"the smallest workable total is {fmt_bytes(need)} {per}"
        )
    rows = max(1, block // row_bytes)
    return rows, rows, host_runs, res.device_budget // 2 if res.gpus else 0, gpu_tasks


def host_run_bytes(res: Resources, nbytes: int | None) -> int:
    """Host bytes that hold runs (:func:`sizes`)."""
    if not res.gpus and nbytes is not None and nbytes > res.host_budget // 2:
        return res.host_budget // 8
    return res.host_budget // 2


def bounded_fan_in(n: int, row_bytes: int, rows: int, res: Resources, chunk_size, gpu_tasks: int):
    """``(rows per block, rows per output range)``: blocks grown towards the size that makes at
    most ``dsort.file-sort.max-runs`` runs (one merge pass) while a task's three copies of one fit
    its share of the memory; past that (or with an explicit ``--chunk-size``) the runs are merged
    in two passes (:func:`merge_groups`). More runs than two passes merge: a :class:`LimitError`
    that names the smallest workable memory or ``--chunk-size``."""
    max_runs = config.get("file-sort.max-runs")
    need = -(-n // max_runs) if n else 1
    if gpu_tasks:
        room = res.device_budget // 2 // gpu_tasks // 3
    else:
        room = (res.host_budget - host_run_bytes(res, n * row_bytes)) // res.threads // 3
    if rows < need and not chunk_size:  # an explicit --chunk-size is the user's call
        rows = max(rows, min(need, room // row_bytes))
    runs = max(1, -(-n // rows))
    if runs > max_runs * max_runs:
        least = -(-n // (max_runs * max_runs)) * row_bytes
        if chunk_size:
            fix = f"the smallest workable --chunk-size here is {fmt_bytes(least)}"
        else:
            option = "--device-memory-limit" if gpu_tasks else "--memory-limit"
            fix = (
                f"raise {option} so that each of {gpu_tasks or res.threads} tasks holds three "
                f"blocks of {fmt_bytes(least)}"
            )
        raise LimitError(
            f"{fmt_bytes(n * row_bytes)} of input in blocks of {fmt_bytes(rows * row_bytes)} makes "
            f"{runs:,} runs; dsort merges "
            f"at most {max_runs:,} in one pass and {max_runs * max_runs:,} in two: {fix}"
        )
    # merges of a first pass, each over a group of runs (one: a single pass)
    groups = len(merge_groups(runs)) or 1
    fan_in, group_rows = -(-runs // groups), -(-n // groups)
    # few runs x ranges (slices) per merge pass: the per-slice costs stay small
    range_rows = max(rows, -(-group_rows // max(1, config.get("file-sort.max-slices") // fan_in)))
    return rows, max(rows, min(range_rows, room // row_bytes))


def merge_groups(runs: int) -> tuple:
    """:func:`dsort.core.plan.pass_groups` of ``runs`` at ``dsort.file-sort.max-runs``: about
    sqrt(runs) groups, where one pass does not merge them all."""
    from .core.plan import pass_groups

    max_runs = config.get("file-sort.max-runs")
    if runs > max_runs * max_runs:  # many small files: a run each at least
        raise LimitError(
            f"the input makes {runs:,} runs (no run holds rows of two files); dsort merges at most "
            f"{max_runs * max_runs:,} "
            "in two passes: fewer, larger files, or a larger --chunk-size"
        )
    return pass_groups(runs, max_runs)
