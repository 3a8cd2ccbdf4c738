"""The cuts task of an external GPU sort, alone: ``--rows`` int64 keys with int64 payloads in
``--runs`` runs, sorted and kept on the GPU by another process (the ``shared`` run tier, as dask
worker processes keep them), then cut here into ``--runs`` balanced output ranges
(:func:`dsort.core.filesort.cut_runs`) ``--repeat`` times. Prints each stage's median time, then the
functions that took longest in one more round (cProfile), then a table.

    python benchmarks/bench_cuts.py --rows 2**28 --runs 64 [--json cuts.json]

Needs a CUDA device. The peer is the sort itself: the cuts are a serial step between the runs
and the merges, every GPU idle while it runs, so their time adds to the sort's.
"""

from __future__ import annotations

import argparse
import cProfile
import faulthandler
import io
import os
import pickle
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
import uuid

import numpy as np

from _common import print_table, write_json


def _job(rows: int, runs: int, directory: str):
    from dsort.collections import external
    from dsort.core import plan
    from dsort.core import runs as R

    sizes = [len(c) for c in np.array_split(np.arange(rows), runs)]
    layout = R.Layout(16, 8, "<i8")
    store = R.StoreConfig(uuid.uuid4().hex, directory, 16, shared_fraction=0.5)
    spacing = plan.sample_spacing(sizes, max(runs - 1, 1))
    return external.ArrayJob((), np.dtype(np.int64), gpu=True, layout=layout, range_rows=tuple(sizes), spacing=spacing, store=store)


def owner(rows: int, runs: int, directory: str) -> None:
    """Make the runs (in this process, on its GPU), send the job and the handles, keep them until stdin closes."""
    import cupy

    from dsort.collections import external

    job = _job(rows, runs, directory)
    rng = cupy.random.default_rng(1)
    made, offset = [], 0
    for i, n in enumerate(job.range_rows):
        keys = rng.integers(-(2**62), 2**62, n, dtype=cupy.int64)
        made.append(external.run_chunk(job, i, keys, cupy.arange(offset, offset + n, dtype=cupy.int64), offset))
        offset += n
    cupy.cuda.Device().synchronize()
    sys.stdout.buffer.write(pickle.dumps((job, made)))
    sys.stdout.buffer.flush()
    os.close(1)  # the end of what the parent reads (sys.stdout's close leaves the descriptor open)
    sys.stdin.read()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", default="2**26", help="rows in all (an expression: 2**28)")
    ap.add_argument("--runs", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    ap.add_argument("--timeout", type=float, default=240, help="seconds before the stacks are printed and it ends")
    ap.add_argument("--owner", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--directory", help=argparse.SUPPRESS)
    a = ap.parse_args()
    rows = int(eval(a.rows, {}))
    faulthandler.dump_traceback_later(a.timeout, exit=True)  # a hang shows where, in either process
    if a.owner:
        return owner(rows, a.runs, a.directory)
    from dsort.core import filesort as F

    with tempfile.TemporaryDirectory() as d:
        child = subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--owner",
                "--rows",
                str(rows),
                "--runs",
                str(a.runs),
                "--directory",
                f"{d}/runs",
                "--timeout",
                str(a.timeout),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        try:
            job, made = pickle.loads(child.stdout.read())
            print(f"{len(made)} runs made: {sorted({r.tier for r in made})}", file=sys.stderr, flush=True)
            stages: dict = {}
            totals = []
            for _ in range(a.repeat + 1):  # the first round warms up (CuPy's kernels, the IPC mappings)
                watch = F.Stopwatch()
                t = time.perf_counter()
                F.cut_runs(job, made, watch)
                totals.append(time.perf_counter() - t)
                for k, v in watch.times.items():
                    stages.setdefault(k, []).append(v)
            prof = cProfile.Profile()
            prof.enable()
            F.cut_runs(job, made, F.Stopwatch())
            prof.disable()
        finally:
            child.stdin.close()
            child.wait(timeout=60)
    s = io.StringIO()
    pstats.Stats(prof, stream=s).sort_stats("tottime").print_stats(15)
    print("\n".join(s.getvalue().splitlines()[-22:]))
    table = [{"stage": k, "median ms": f"{1e3 * statistics.median(v[1:]):.1f}"} for k, v in stages.items()]
    table.append({"stage": "cuts (all)", "median ms": f"{1e3 * statistics.median(totals[1:]):.1f}"})
    print(f"-- cuts of {rows:,} rows in {a.runs} runs kept on the GPU by another process (spacing {job.spacing})")
    print_table(table, ["stage", "median ms"])
    if a.json:
        write_json(a.json, table, rows=rows, runs=a.runs)


if __name__ == "__main__":
    main()
