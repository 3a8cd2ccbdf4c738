"""The ``dsort`` command line (``python -m dsort`` too): ``gen``, ``sort``, ``check``, ``demo``.

Exit status: 0 success; 1 a check failed (unsorted data, or a sort whose output's count or
checksum differs from its input's); 2 bad input or usage; 130 interrupted. On any failure nothing
is left at OUTPUT.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from dask.utils import format_bytes, parse_bytes

from . import check as C
from .io import InputError


class CheckFailed(Exception):
    """Data that fails verification (exit status 1)."""


# -- helpers ------------------------------------------------------------------------------------


def _count(text: str) -> int:
    """A record count: ``1000000``, ``1_000_000``, ``1e6``."""
    try:
        value = float(text.replace("_", "")) if any(c in text for c in ".eE") else int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}") from None
    if value < 0 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a count: {text!r}")
    return int(value)


def _bytes(text: str) -> int:
    try:
        return parse_bytes(text)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 64MiB)") from None


def _columns(text: str) -> list[str]:
    cols = [c.strip() for c in text.split(",") if c.strip()]
    if not cols:
        raise argparse.ArgumentTypeError("--by needs at least one column name")
    return cols


def _rows_per_block(session, row_bytes: int, chunk_size: int | None) -> int:
    """Rows per input chunk: ``--chunk-size`` bytes, else a sixteenth of a worker's memory limit
    (an eighth of its device memory limit on GPUs), between 1 MiB and 128 MiB (1 GiB on GPUs)."""
    if chunk_size is None:
        if session is not None and session.gpu:
            limit = session.device_memory_limit or 8 * 2**30
            chunk_size = min(max(limit // 8, 2**20), 2**30)
        else:
            limit = session.memory_limit if session is not None and session.memory_limit else 2**31
            chunk_size = min(max(limit // 16, 2**20), 2**27)
    return max(int(chunk_size) // max(row_bytes, 1), 1)


def _checksum_line(name: str, s: C.Summary) -> str:
    return f"{name:<7}{s.records:>15,} records  checksum {s.checksum:x}"


def _cluster_kwargs(args) -> dict:
    return dict(
        n_workers=args.n_workers, threads_per_worker=args.threads_per_worker, memory_limit=args.memory_limit,
        device_memory_limit=args.device_memory_limit, local_directory=args.local_directory,
        dashboard_address=args.dashboard_address, cpu=args.cpu, protocol=args.protocol, rmm_pool_size=args.rmm_pool_size,
    )


# -- dsort gen -----------------------------------------------------------------------------------


def _gen(args) -> int:
    from . import gen

    path = Path(args.path)
    if path.exists() and not args.overwrite:
        raise InputError(f"{path} exists; pass --overwrite to replace it")
    if not path.absolute().parent.is_dir():
        raise InputError(f"the directory of {path} does not exist")
    t = time.perf_counter()
    if args.what == "records":
        if not 0 < args.key_size <= args.record_size:
            raise InputError(f"--key-size must be between 1 and --record-size ({args.record_size})")
        gen.records(args.n, path, seed=args.seed, record_size=args.record_size, key_size=args.key_size, skew=args.skew)
        size = args.n * args.record_size
    else:
        gen.npy(args.n, path, dtype=args.dtype, seed=args.seed)
        size = path.stat().st_size
    dt = time.perf_counter() - t
    print(f"wrote {args.n:,} {args.what} ({format_bytes(size)}) to {path} in {dt:.2f} s")
    return 0


# -- dsort sort ----------------------------------------------------------------------------------


def validate(args):
    """Check INPUT and OUTPUT before any cluster starts: ``(format, files, OUTPUT path)``."""
    from . import io
    from .io import npy, parquet, records

    fmt, files, dirs = io.discover(args.input, args.format)
    if fmt != "parquet" and args.by:
        raise InputError(f"--by names Parquet columns; INPUT is {fmt}")
    if fmt == "parquet" and not args.by:
        raise InputError("sorting Parquet needs the sort columns: --by COL[,COL...]")
    output = io.check_destination(args.output, files, overwrite=args.overwrite, input_dirs=dirs)
    if fmt == "records":
        records.check_sizes(args.record_size, args.key_size)
        records.lengths(files, args.record_size)
    elif fmt == "npy":
        npy.inspect(files)
    else:
        parquet.check_columns(args.by, parquet.row_groups(files)[2], args.input)
    return fmt, files, output


def sort_files(args, session, checked=None) -> dict:
    """Sort INPUT into OUTPUT on ``session``'s cluster; return the run's figures. Raises
    :class:`InputError` for bad input and :class:`CheckFailed` when the output does not match."""
    from . import io
    from .io import npy, parquet, records

    t0 = time.perf_counter()
    fmt, files, output = checked or validate(args)
    to_device = None
    if session.gpu:
        from .io._blocks import to_device
    with io.staged(output, directory=fmt == "parquet", overwrite=args.overwrite) as tmp:
        if fmt == "records":
            rows = _rows_per_block(session, args.record_size, args.chunk_size)
            job = records.sort_job(files, tmp, record_size=args.record_size, key_size=args.key_size, rows_per_block=rows,
                                   descending=args.descending, to_device=to_device)
        elif fmt == "npy":
            rows = _rows_per_block(session, npy.inspect(files)[0].itemsize, args.chunk_size)
            job = npy.sort_job(files, tmp, rows_per_block=rows, descending=args.descending, to_device=to_device)
        else:
            job = parquet.sort_job(files, tmp, by=args.by, descending=args.descending)
        print(f"sorting {job.records:,} {fmt} ({format_bytes(job.nbytes)}) from {args.input} into {output}")
        if job.records:
            in_parts, out_parts = run(session, job.inputs, job.outputs)
            # Parquet keys are encoded in the wanted order: the check compares them ascending
            ins, outs = C.combine(in_parts), C.combine(out_parts, descending=args.descending and fmt != "parquet")
        else:
            in_parts = out_parts = []
            ins = outs = C.Summary()
            session.phases = {}
        print(_checksum_line("input", ins))
        print(_checksum_line("output", outs))
        problems = []
        if (ins.records, ins.checksum) != (outs.records, outs.checksum) or outs.records != job.records:
            problems.append("the output's record count or checksum differs from the input's")
        if outs.unordered:
            problems.append(f"the output is not sorted: {outs.unordered:,} records out of order, the first at record {outs.first_unordered:,}")
        if problems:
            raise CheckFailed("; ".join(problems) + f"; nothing was written at {output}")
        job.finish(out_parts)
    wall = time.perf_counter() - t0
    return dict(records=job.records, bytes=job.nbytes, wall=wall, phases=session.phases, duplicates=outs.duplicates, output=output)


def run(session, *collections):
    from .cluster import run as _run

    return _run(session, *collections, progress=True)


def print_summary(fig: dict) -> None:
    from .cluster import format_phases

    wall = fig["wall"]
    rate = fig["bytes"] / wall if wall > 0 else 0.0
    print(f"sorted: {fig['records']:,} records, {format_bytes(fig['bytes'])}, duplicate keys {fig['duplicates']:,}")
    if fig["phases"]:
        print(f"phases: {format_phases(fig['phases'])}")
    print(f"wall time {wall:.2f} s, throughput {format_bytes(rate)}/s ({fig['records'] / wall if wall > 0 else 0:,.0f} records/s)")


def _sort(args) -> int:
    from .cluster import connect

    checked = validate(args)
    with connect(args.scheduler, **_cluster_kwargs(args)) as session:
        fig = sort_files(args, session, checked)
    print_summary(fig)
    print(f"OK: wrote {fig['output']}")
    return 0


# -- dsort check ---------------------------------------------------------------------------------


def check_path(path, *, fmt=None, record_size=100, key_size=10, by=None, descending=False, chunk_size=None, scheduler=None) -> C.Summary:
    """The :class:`~dsort.check.Summary` of the data at ``path`` (chunk by chunk, in parallel)."""
    import dask

    from . import io
    from .io import npy, parquet, records

    fmt, files, dirs = io.discover(path, fmt)
    if fmt == "records":
        tasks = records.check_tasks(files, record_size=record_size, key_size=key_size,
                                    rows_per_block=_rows_per_block(None, record_size, chunk_size), descending=descending)
    elif fmt == "npy":
        tasks = npy.check_tasks(files, rows_per_block=_rows_per_block(None, npy.inspect(files)[0].itemsize, chunk_size), descending=descending)
    else:
        order = parquet.manifest(dirs[0]) if dirs else None
        tasks = parquet.check_tasks(files, by=by, descending=descending, order=order)
    if scheduler:
        from .cluster import connect, run

        with connect(scheduler, quiet=True) as session:
            parts = run(session, tasks)[0] if tasks else []
    else:
        from dask.diagnostics import ProgressBar

        bar = ProgressBar(minimum=1.0) if sys.stdout.isatty() else _null()
        with bar:
            parts = dask.compute(*tasks, scheduler="threads") if tasks else []
    return C.combine(parts, descending=descending and fmt != "parquet")


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def report(s: C.Summary, out=None) -> None:
    """``valsort``'s report."""
    out = out or sys.stdout
    print(f"Records: {s.records:,}", file=out)
    print(f"Checksum: {s.checksum:x}", file=out)
    print(f"Duplicate keys: {s.duplicates:,}", file=out)
    if s.sorted:
        print("SUCCESS - all records are in order", file=out)
    else:
        print(f"FAILURE - {s.unordered:,} records out of order, the first at record {s.first_unordered:,}", file=out)


def _check(args) -> int:
    s = check_path(args.path, fmt=args.format, record_size=args.record_size, key_size=args.key_size, by=args.by,
                   descending=args.descending, chunk_size=args.chunk_size, scheduler=args.scheduler)
    report(s)
    return 0 if s.sorted else 1


# -- dsort demo ----------------------------------------------------------------------------------


def _demo(args) -> int:
    """Generate Sort Benchmark records, sort them on the embedded cluster, check them, summarize."""
    from . import gen
    from .cluster import connect

    work = Path(tempfile.mkdtemp(prefix="dsort-demo-", dir=args.local_directory))
    try:
        src, dst = work / "input.bin", work / "sorted.bin"
        t = time.perf_counter()
        gen.records(args.n, src, seed=args.seed)
        print(f"generated {args.n:,} records ({format_bytes(args.n * 100)}) in {time.perf_counter() - t:.2f} s: {src}")
        sort_args = argparse.Namespace(input=str(src), output=str(dst), format="records", record_size=100, key_size=10, by=None,
                                       descending=False, overwrite=False, chunk_size=args.chunk_size)
        with connect(None, **_cluster_kwargs(args)) as session:
            fig = sort_files(sort_args, session)
        print("checking the output:")
        s = check_path(dst)
        report(s)
        print_summary(fig)
        return 0 if s.sorted and s.records == args.n else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- the parser ----------------------------------------------------------------------------------


def _cluster_options(p, embedded_only=False):
    g = p.add_argument_group("cluster (dask's own option names)")
    if not embedded_only:
        g.add_argument("--scheduler", metavar="ADDRESS", help="a running cluster's scheduler, e.g. tcp://scheduler:8786 (default: an embedded cluster)")
    g.add_argument("--cpu", action="store_true", help="embedded cluster: CPU workers (LocalCluster) even where a GPU is visible")
    g.add_argument("--n-workers", type=int, help="embedded cluster: workers (default: dask's choice; one per GPU on GPUs)")
    g.add_argument("--threads-per-worker", type=int, help="embedded cluster: threads per worker")
    g.add_argument("--memory-limit", default="auto", help="embedded cluster: memory limit per worker, e.g. 2GB (default: auto)")
    g.add_argument("--device-memory-limit", default=None, help="embedded GPU cluster: device memory per worker above which dask-cuda spills to host")
    g.add_argument("--protocol", choices=("tcp", "ucx"), default=None,
                   help="embedded GPU cluster: transport between workers (default tcp); ucx moves chunks GPU to GPU (pip install 'dsort[ucx]')")
    g.add_argument("--rmm-pool-size", default=None, help="embedded GPU cluster with --protocol ucx: RMM pool per worker, bytes or a fraction of the GPU (default 0.25)")
    g.add_argument("--local-directory", help="embedded cluster: where workers spill to disk (default: dask's temporary directory)")
    g.add_argument("--dashboard-address", default=":0", help="embedded cluster: dashboard address (default :0, any free port)")


def _format_options(p, check=False):
    p.add_argument("--format", choices=("records", "npy", "parquet"), help="default: from the file names (.npy, .parquet), else records")
    p.add_argument("--record-size", type=int, default=100, help="records: bytes per record (default 100)")
    p.add_argument("--key-size", type=int, default=10, help="records: key bytes at the start of each record (default 10)")
    p.add_argument("--by", type=_columns, metavar="COL[,COL...]", help="Parquet: the columns to sort by" + (" (default: the manifest's)" if check else ""))
    p.add_argument("--descending", action="store_true", help="largest first (ties keep their input order; NaN and nulls stay last)")
    p.add_argument("--chunk-size", type=_bytes, metavar="BYTES", help="bytes per input chunk (default: from the workers' memory limit)")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dsort", description="GPU-accelerated, out-of-core sorting on Dask")
    sub = p.add_subparsers(dest="command", required=True, metavar="{gen,sort,check,demo}")

    g = sub.add_parser("gen", help="generate test data: Sort Benchmark records or a numeric .npy")
    gsub = g.add_subparsers(dest="what", required=True)
    gr = gsub.add_parser("records", help="N records of 100 bytes: a random 10-byte key, then the record's index")
    gr.add_argument("n", type=_count, metavar="N")
    gr.add_argument("path", metavar="PATH")
    gr.add_argument("--skew", action="store_true", help="skewed keys: a few hot prefixes, many repeats")
    gr.add_argument("--record-size", type=int, default=100)
    gr.add_argument("--key-size", type=int, default=10)
    gn = gsub.add_parser("npy", help="N random numbers as a 1-D .npy")
    gn.add_argument("n", type=_count, metavar="N")
    gn.add_argument("path", metavar="PATH")
    gn.add_argument("--dtype", default="int64", choices=("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64"))
    for q in (gr, gn):
        q.add_argument("--seed", type=int, default=0, help="random seed (default 0): the same seed gives the same data")
        q.add_argument("--overwrite", action="store_true", help="replace an existing PATH")
        q.set_defaults(func=_gen)

    s = sub.add_parser("sort", help="sort INPUT (a file, a directory or a glob) into OUTPUT")
    s.add_argument("input", metavar="INPUT")
    s.add_argument("output", metavar="OUTPUT")
    _format_options(s)
    s.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT (only once the new one is complete)")
    _cluster_options(s)
    s.set_defaults(func=_sort)

    c = sub.add_parser("check", help="verify order; report record count, checksum and duplicate keys (valsort)")
    c.add_argument("path", metavar="PATH")
    _format_options(c, check=True)
    c.add_argument("--scheduler", metavar="ADDRESS", help="check on a running cluster (default: threads in this process)")
    c.set_defaults(func=_check)

    d = sub.add_parser("demo", help="generate records, sort them on the embedded cluster, check them, print the summary")
    d.add_argument("-n", type=_count, default=2_000_000, help="records (default 2,000,000: 200 MB)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--chunk-size", type=_bytes, metavar="BYTES", help="bytes per input chunk")
    _cluster_options(d, embedded_only=True)
    d.set_defaults(func=_demo)
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except InputError as e:
        print(f"dsort: error: {e}", file=sys.stderr)
        return 2
    except CheckFailed as e:
        print(f"dsort: FAILED: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("dsort: interrupted", file=sys.stderr)
        return 130
    except Exception as e:
        from distributed.scheduler import KilledWorker

        if not isinstance(e, KilledWorker):
            raise
        print(f"dsort: FAILED: workers died running the sort ({e}); out of memory? raise --memory-limit or lower "
              "--chunk-size. Nothing was written at OUTPUT.", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
