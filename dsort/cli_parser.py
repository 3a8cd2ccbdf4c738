"""The ``dsort`` command line's parser: its commands, their options, and the types that read
them (counts, sizes, column lists). :mod:`dsort.cli` runs the commands.
"""

from __future__ import annotations

import argparse

from dask.utils import parse_bytes

from .io.gen import NPY_DTYPES


def count(text: str) -> int:
    """A record count: ``1000000``, ``1_000_000``, ``1e6``."""
    try:
        value = (
            float(text.replace("_", ""))
            if any(c in text for c in ".eE")
            else int(text.replace("_", ""))
        )
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}") from None
    if value < 0 or value != int(value):
        raise argparse.ArgumentTypeError(f"not a count: {text!r}")
    return int(value)


def nbytes(text: str) -> int:
    try:
        return parse_bytes(text)
    except (ValueError, TypeError):
        raise argparse.ArgumentTypeError(f"not a size in bytes: {text!r} (e.g. 64MiB)") from None


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def size(text: str):
    """A memory size as dask takes it (``2GB``, ``512MiB``, ``auto``) or a fraction ``0 < x <=
    1``."""
    from .collections.config import parse_size
    from .core.errors import LimitError

    try:
        parse_size(text, 1 << 30)
    except LimitError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    return text


def columns(text: str) -> list[str]:
    cols = [c.strip() for c in text.split(",") if c.strip()]
    if not cols:
        raise argparse.ArgumentTypeError("--by needs at least one column name")
    return cols


def _scheduler_options(g, what="a running dask cluster's scheduler"):
    g.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help=f"{what}, e.g. tcp://scheduler:8786 or tls://scheduler:8786 (default: embedded, "
        "threads in this process)",
    )
    g.add_argument(
        "--tls-ca-file",
        metavar="PATH",
        help="a tls:// scheduler: the deployment's CA certificate (dsort tls DIR makes a set)",
    )
    g.add_argument(
        "--tls-cert", metavar="PATH", help="a tls:// scheduler: this client's certificate"
    )
    g.add_argument(
        "--tls-key", metavar="PATH", help="a tls:// scheduler: this client's private key"
    )


def _cluster_options(p, embedded_only=False):
    g = p.add_argument_group("where it runs (dask's own option names)")
    if not embedded_only:
        _scheduler_options(g)
    engine = g.add_mutually_exclusive_group()
    engine.add_argument(
        "--cpu",
        dest="cpu",
        action="store_const",
        const=True,
        help="sort on the CPU even where a GPU is visible",
    )
    engine.add_argument(
        "--gpu",
        dest="cpu",
        action="store_const",
        const=False,
        help="sort on the GPUs even an input too small to pay for them (default: inputs under "
        "dsort.file-sort.gpu-min-input go "
        "to the CPU; Parquet always, unless --gpu: only its keys would go to a GPU, which did not "
        "pay)",
    )
    g.add_argument(
        "--n-workers",
        type=positive,
        help="workers: GPUs to use (default: one, dsort.file-sort.input-per-extra-gpu), or CPU "
        "workers",
    )
    g.add_argument("--threads-per-worker", type=positive, help="threads per worker")
    g.add_argument(
        "--memory-limit",
        type=size,
        default="auto",
        help="host memory per worker, e.g. 2GB or 0.5 (default: auto, 60%% of what is free)",
    )
    g.add_argument(
        "--device-memory-limit",
        type=size,
        default=None,
        help="GPU memory per GPU, bytes or a fraction (default: 80%% of what is free)",
    )
    g.add_argument(
        "--local-directory",
        help="where sorted runs that do not fit in memory go (default: beside OUTPUT)",
    )


def _format_options(p, check=False):
    p.add_argument(
        "--format",
        choices=("records", "npy", "parquet"),
        help="default: from the file names (.npy, .parquet), else records",
    )
    p.add_argument(
        "--record-size", type=int, default=100, help="records: bytes per record (default 100)"
    )
    p.add_argument(
        "--key-size",
        type=int,
        default=10,
        help="records: key bytes at the start of each record (default 10)",
    )
    p.add_argument(
        "--by",
        type=columns,
        metavar="COL[,COL...]",
        help="Parquet: the columns to sort by" + (" (default: the manifest's)" if check else ""),
    )
    p.add_argument(
        "--descending",
        action="store_true",
        help="largest first (ties keep their input order; NaN and nulls stay last)",
    )
    p.add_argument(
        "--chunk-size",
        type=nbytes,
        metavar="BYTES",
        help="bytes per block and output range (default: from the memory limits; Parquet in "
        "memory: decoded bytes per output part)",
    )


class _Parser(argparse.ArgumentParser):
    """A usage error is one line (exit status 2); ``--help`` shows the usage."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="dsort", description="GPU-accelerated, out-of-core sorting on Dask")
    sub = p.add_subparsers(
        dest="command", required=True, metavar="{gen,sort,check,demo,build-kernels,tls}"
    )

    g = sub.add_parser("gen", help="generate test data: Sort Benchmark records or a numeric .npy")
    gsub = g.add_subparsers(dest="what", required=True)
    gr = gsub.add_parser(
        "records", help="N records of 100 bytes: a random 10-byte key, then the record's index"
    )
    gr.add_argument("n", type=count, metavar="N")
    gr.add_argument("path", metavar="PATH")
    gr.add_argument(
        "--skew", action="store_true", help="skewed keys: a few hot prefixes, many repeats"
    )
    gr.add_argument(
        "--ascii",
        action="store_true",
        help="printable keys: every record is a text line ending in \\r\\n (gensort -a), so "
        "LC_ALL=C sort can sort the same records",
    )
    gr.add_argument("--record-size", type=int, default=100)
    gr.add_argument("--key-size", type=int, default=10)
    gn = gsub.add_parser("npy", help="N random numbers as a 1-D .npy")
    gn.add_argument("n", type=count, metavar="N")
    gn.add_argument("path", metavar="PATH")
    gn.add_argument(
        "--dtype",
        default="int64",
        choices=NPY_DTYPES,
    )
    for q in (gr, gn):
        q.add_argument(
            "--seed",
            type=int,
            default=0,
            help="random seed (default 0): the same seed gives the same data",
        )
        q.add_argument("--overwrite", action="store_true", help="replace an existing PATH")
        q.set_defaults(command="gen")

    s = sub.add_parser("sort", help="sort INPUT (a file, a directory or a glob) into OUTPUT")
    s.add_argument("input", metavar="INPUT")
    s.add_argument("output", metavar="OUTPUT")
    _format_options(s)
    s.add_argument(
        "--overwrite",
        action="store_true",
        help="replace an existing OUTPUT (only once the new one is complete)",
    )
    _cluster_options(s)
    s.set_defaults(command="sort")

    c = sub.add_parser(
        "check", help="verify order; report record count, checksum and duplicate keys (valsort)"
    )
    c.add_argument("path", metavar="PATH")
    _format_options(c, check=True)
    _scheduler_options(
        c.add_argument_group("where it runs (dask's own option names)"),
        "check on a running cluster",
    )
    c.set_defaults(command="check")

    d = sub.add_parser(
        "demo",
        help="generate records, sort them (embedded, on the visible GPUs or the CPU), check them, "
        "print the summary",
    )
    d.add_argument("-n", type=count, default=2_000_000, help="records (default 2,000,000: 200 MB)")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument(
        "--chunk-size", type=nbytes, metavar="BYTES", help="bytes per block and output range"
    )
    _cluster_options(d, embedded_only=True)
    d.set_defaults(command="demo")

    b = sub.add_parser(
        "build-kernels",
        help="compile dsort's GPU kernels into CuPy's cache now (once per machine), not on first "
        "use",
    )
    b.add_argument("--jobs", type=positive, help="compiler processes (default: one per core)")
    b.set_defaults(command="build-kernels")

    t = sub.add_parser(
        "tls",
        help="make a TLS certificate set for one deployment: DIR/ca.pem, cert.pem, key.pem "
        "(openssl)",
    )
    t.add_argument("directory", metavar="DIR")
    t.add_argument("--days", type=positive, default=365, help="validity in days (default 365)")
    t.add_argument("--overwrite", action="store_true", help="replace an existing set")
    t.set_defaults(command="tls")
    return p
