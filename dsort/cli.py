"""The ``dsort`` command line (``python -m dsort`` too): ``gen``, ``sort``, ``check``, ``demo``,
``tls``.

Exit status: 0 success; 1 a check failed (unsorted data, or a sort whose output's count or
checksum differs from its input's); 2 bad input, usage or limits, or a failure of the file system
(full disk, permission); 130 interrupted (143 on SIGTERM). On any failure nothing is left at OUTPUT
and no sorted runs are left behind.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import threading
import tempfile
import time
from pathlib import Path

import numpy as np
from dask.utils import format_bytes

from .io import InputError
from .check import check_path, report_check
from .service import JobFailed  # exit status 1 (a failed check too)
from .cli_parser import parser


# -- helpers ------------------------------------------------------------------------------------


def _security(args):
    """``--tls-ca-file``, ``--tls-cert``, ``--tls-key`` as a ``distributed.security.Security`` (None
    without them): :func:`dsort.tls.security`."""
    from .tls import security

    sec = security(tls_ca_file=args.tls_ca_file, tls_cert=args.tls_cert, tls_key=args.tls_key)
    if sec is not None and not args.scheduler:
        raise InputError(
            "the TLS options are for a running cluster: give its tls:// address with --scheduler"
        )
    return sec


def _service_kwargs(args) -> dict:
    """``dsort sort`` / ``dsort demo`` options as :func:`dsort.service.sort_files` keywords: the
    limits as one :class:`~dsort.collections.config.Limits`, and the chunk size."""
    from .collections.config import Limits

    limits = Limits(
        n_workers=args.n_workers,
        threads_per_worker=args.threads_per_worker,
        memory_limit=args.memory_limit,
        device_memory_limit=args.device_memory_limit,
        local_directory=args.local_directory,
        cpu=args.cpu,
    )
    return dict(limits=limits, chunk_size=args.chunk_size)


# -- dsort gen -----------------------------------------------------------------------------------


def _gen(args) -> int:
    from .io import gen

    path = Path(args.path)
    if path.exists() and not args.overwrite:
        raise InputError(f"{path} exists; pass --overwrite to replace it")
    if not path.absolute().parent.is_dir():
        raise InputError(f"the directory of {path} does not exist")
    t = time.perf_counter()
    if args.what == "records":
        if not 0 < args.key_size <= args.record_size:
            raise InputError(f"--key-size must be between 1 and --record-size ({args.record_size})")
        if args.ascii and args.record_size < args.key_size + 18:
            raise InputError(
                "--ascii needs records of at least --key-size + 18 bytes (the index and the line "
                f"end): {args.key_size + 18}"
            )
        gen.records(
            args.n,
            path,
            seed=args.seed,
            record_size=args.record_size,
            key_size=args.key_size,
            skew=args.skew,
            ascii=args.ascii,
        )
        size = args.n * args.record_size
    else:
        gen.npy(args.n, path, dtype=args.dtype, seed=args.seed)
        size = path.stat().st_size
    dt = time.perf_counter() - t
    print(f"wrote {args.n:,} {args.what} ({format_bytes(size)}) to {path} in {dt:.2f} s")
    return 0


# -- dsort sort ----------------------------------------------------------------------------------


def _parquet_input(args) -> bool:
    """Whether INPUT is Parquet (``--format``, else what its files' names say); False where it
    cannot be found: the sort reports that, with its exit code."""
    from .core.errors import InputError
    from .io._inputs import discover

    if args.format:
        return args.format == "parquet"
    try:
        return discover(args.input)[0] == "parquet"
    except (InputError, OSError):
        return False


def _sort(args) -> int:
    from .engine import device as dev, host
    from .service import format_report, sort_files

    # this process's own CPUs hold the rows: a sort on the CPU, and any Parquet sort (with --gpu
    # only its keys go to the GPU; every column's takes, hashes and writes stay here)
    on_cpu = args.cpu or _parquet_input(args) or not dev.has_gpu()
    if args.scheduler is None and on_cpu:
        host.keep_freed_memory()
    report = sort_files(
        args.input,
        args.output,
        format=args.format,
        record_size=args.record_size,
        key_size=args.key_size,
        by=args.by,
        descending=args.descending,
        overwrite=args.overwrite,
        scheduler=args.scheduler,
        security=_security(args),
        **_service_kwargs(args),
    )
    print(format_report(report))
    print(f"OK: wrote {report.output}")
    return 0


# -- dsort check ---------------------------------------------------------------------------------


def _check(args) -> int:
    options = dict(
        fmt=args.format,
        record_size=args.record_size,
        key_size=args.key_size,
        by=args.by,
        chunk_size=args.chunk_size,
        scheduler=args.scheduler,
        security=_security(args),
    )
    s = check_path(args.path, descending=args.descending, **options)
    report_check(s)
    if (
        not s.sorted
        and _reversed_order(s)
        and check_path(args.path, descending=not args.descending, **options).sorted
    ):
        other = "descending" if not args.descending else "ascending"
        flag = "--descending" if not args.descending else "no --descending"
        print(f"(it is in {other} order: check it with {flag}, as it was sorted)")
    return 0 if s.sorted and not s.problems else 1


def _reversed_order(s) -> bool:
    """Whether a failed check's counts fit data in the other order: every pair of unequal
    neighbours out of order (but one, where missing values start: they come last either way)."""
    unequal = s.records - 1 - s.duplicates
    return s.records > 2 and s.unordered >= max(1, unequal - 1)


# -- dsort demo ----------------------------------------------------------------------------------


def _demo(args) -> int:
    """Generate Sort Benchmark records, sort them on the embedded executor, check them,
    summarize."""
    from .io import gen
    from .service import format_report, sort_files

    from .limits import resources_of, sizes

    sizes(resources_of(_service_kwargs(args)["limits"]), 100, args.chunk_size)  # limits first
    if args.chunk_size is not None and args.chunk_size < 1:
        raise InputError(f"--chunk-size must be at least 1 byte, got {args.chunk_size}")
    work = Path(tempfile.mkdtemp(prefix="dsort-demo-", dir=args.local_directory))
    try:
        src, dst = work / "input.bin", work / "sorted.bin"
        t = time.perf_counter()
        gen.records(args.n, src, seed=args.seed)
        print(
            f"generated {args.n:,} records ({format_bytes(args.n * 100)}) in "
            f"{time.perf_counter() - t:.2f} s: {src}"
        )
        report = sort_files(src, dst, **_service_kwargs(args))
        print("checking the output:")
        s = check_path(dst)
        report_check(s)
        print(format_report(report))
        return 0 if s.sorted and s.records == args.n else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)


# -- dsort build-kernels -------------------------------------------------------------------------


def _build_kernels(args) -> int:
    """Fill CuPy's kernel cache with every kernel dsort can launch, for the visible GPU's
    architecture (once per machine or image, instead of compiling on first use)."""
    from .engine import device

    if not device.has_gpu():
        raise InputError(
            "no CUDA device is visible (or CuPy is missing): the kernels are built for the GPU "
            "they run on"
        )
    from .engine import _aot, _cuda, crc, cupy_engine

    t = time.perf_counter()
    crc.warm()
    print(f"compiled the CPU record checksum in {time.perf_counter() - t:.1f} s into numba's cache")
    t = time.perf_counter()
    if _aot.shipped_all(_cuda.target()):
        print(
            f"dsort's kernels for {_cuda.arch()} are shipped, built ahead of time: nothing of "
            "dsort's to compile"
        )
    else:
        n = cupy_engine.compile_all(args.jobs)
        print(
            f"built {n} kernels for {_cuda.arch()} in {time.perf_counter() - t:.1f} s into "
            f"{_cuda.cache_dir()}"
        )
    t = time.perf_counter()
    _warm_up()
    print(
        "sorted small inputs of every kind once (CuPy's own kernels, cached too) in "
        f"{time.perf_counter() - t:.1f} s"
    )
    return 0


def _warm_up() -> None:
    """Sort a few rows of every key type in both orders on the GPU, so that CuPy compiles and
    caches its own kernels that a sort uses (checksums, order checks, casts, the cuts' ranking of
    samples) now, not on first use."""
    from .collections import config
    from .core import cuts
    from .io import gen
    from .service import sort_files

    min_block = config.nbytes("file-sort.min-block")
    ranked = cuts.GPU_RANKED_SAMPLES, cuts.GPU_RANKED_SAMPLES_COLD
    # the cuts' ranking of samples on the GPU too
    cuts.GPU_RANKED_SAMPLES = cuts.GPU_RANKED_SAMPLES_COLD = 0
    try:
        _warm_up_sorts(min_block, gen, sort_files)
    finally:
        cuts.GPU_RANKED_SAMPLES, cuts.GPU_RANKED_SAMPLES_COLD = ranked


def _warm_up_sorts(min_block: int, gen, sort_files) -> None:
    import io

    with tempfile.TemporaryDirectory(prefix="dsort-warm-up-") as d:
        inputs = [Path(d, "records.bin")]
        gen.records(3 * min_block // 100 + 7, inputs[0])
        for dtype in gen.NPY_DTYPES:
            inputs.append(Path(d, f"{dtype}.npy"))
            gen.npy(3 * min_block // np.dtype(dtype).itemsize + 7, inputs[-1], dtype=dtype)
        for src in inputs:  # several runs and output ranges each: the merges' kernels too
            for descending in (False, True):
                sort_files(
                    src,
                    Path(d, "out" + src.suffix),
                    descending=descending,
                    overwrite=True,
                    cpu=False,  # small inputs: on the GPU all the same
                    progress=False,
                    stream=io.StringIO(),
                    chunk_size=min_block,
                )
        gen.records(1000, inputs[0])  # and one run, one range: what a small input takes
        gen.npy(1000, inputs[5], dtype="int64")
        for src in (inputs[0], inputs[5]):
            sort_files(
                src,
                Path(d, "out" + src.suffix),
                overwrite=True,
                cpu=False,
                progress=False,
                stream=io.StringIO(),
            )


# -- dsort tls -------------------------------------------------------------------------------------


def _tls(args) -> int:
    from . import tls

    ca, cert, key = tls.make(args.directory, days=args.days, overwrite=args.overwrite)
    print(
        f"wrote {ca} (the deployment's CA), {cert} and {key} (every process's certificate and "
        f"key), valid {args.days} days"
    )
    print(
        f"scheduler, workers and clients: --tls-ca-file {ca} --tls-cert {cert} --tls-key {key}; "
        "addresses tls://HOST:PORT"
    )
    return 0


COMMANDS = {  # what each command of the parser (dsort.cli_parser) runs
    "gen": _gen, "sort": _sort, "check": _check, "demo": _demo, "build-kernels": _build_kernels,
    "tls": _tls,
}  # fmt: skip


def _terminated(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)  # one line and the cleanup, as for Ctrl-C
    nothing = "; nothing was written at OUTPUT" if args.command == "sort" else ""  # sort's promise
    try:
        return COMMANDS[args.command](args)
    except InputError as e:
        print(f"dsort: error: {e}", file=sys.stderr)
        return 2
    except JobFailed as e:
        print(
            f"dsort: FAILED: {e}{nothing if 'nothing was written' not in str(e) else ''}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        print(f"dsort: interrupted{nothing}", file=sys.stderr)
        return 130
    except SystemExit as e:
        if e.code != 128 + signal.SIGTERM:
            raise
        print(f"dsort: terminated (SIGTERM){nothing}", file=sys.stderr)
        return e.code
    # a full disk, a file that vanished, a permission: one line, not a traceback
    except OSError as e:
        where = f": {e.filename}" if getattr(e, "filename", None) else ""
        print(f"dsort: error: {e.strerror or e}{where}{nothing}", file=sys.stderr)
        return 2
    except Exception as e:
        from distributed.scheduler import KilledWorker

        if not isinstance(e, KilledWorker):
            raise
        print(
            f"dsort: FAILED: workers died running the {args.command} ({e}); out of memory? raise "
            "--memory-limit or "
            f"lower --chunk-size{nothing}",
            file=sys.stderr,
        )
        return 1


def run() -> None:
    """The ``dsort`` command: :func:`main`, then exit at once. Everything the command promises is
    done by then (OUTPUT written, flushed and in place, runs removed, the report printed); what
    is skipped is the interpreter's teardown of CUDA contexts and memory pools, which takes a
    good part of a second on a GPU machine."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
