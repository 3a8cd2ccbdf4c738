"""Where a whole `dsort sort` spends its threads: CPU and wall seconds of each task function.

Runs ``dsort ARGS...`` in this process with the columnar Parquet sort's task functions (and the
calls inside them that cost most) wrapped: each call's CPU time (its thread's, user and system:
``time.thread_time``) and wall time summed per function. Where wall is far above CPU, the threads
wait inside that function: for the GIL (many short NumPy calls), a lock in the kernel (page
faults beside other threads' mappings) or Arrow's own thread pool (the reader's columns run
there, so a read's CPU is not its thread's). A probe thread measures the GIL's wait directly:
it sleeps 1 ms again and again and times how late it runs Python again (the median and 90th
percentile of the delay past the 1 ms).

    python benchmarks/task_clock.py sort T.parquet OUT --by fare --cpu --threads-per-worker 16
    python benchmarks/task_clock.py --set dsort.core.arrow_hash.BLOCK_ROWS=16384 sort ...

(``arrow_hash.block_rows`` multiplies BLOCK_ROWS by threads / 4, up to 4: at 16 threads 65,536 here.)

``--set MODULE.NAME=INT`` (again for more) sets a module's constant first: an A/B in one tree.

The table comes last (``--json F`` before ``sort`` writes it too).
"""

from __future__ import annotations

import argparse
import collections
import resource
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import print_table, write_json  # noqa: E402

# (module, function): the columnar sort's tasks, then calls inside them
WRAPPED = [
    ("dsort.io.parquet", "read_table"),
    ("dsort.io.parquet", "_tally_piece"),  # before the hashes were carried (A/Bs)
    ("dsort.core.table_chunk", "tally_sorted"),
    ("dsort.io.parquet", "_sort_piece"),
    ("dsort.io.parquet", "_merge_parts"),
    ("dsort.io.parquet", "_write_table"),
    ("dsort.io.parquet", "write_part"),
    ("dsort.io.parquet", "fsync"),  # in write_part, in older trees: the part flushed to its disk
    ("dsort.io.parquet", "flush_soon"),  # in write_part: the part's flush begun
    ("dsort.core.table_chunk", "take"),
    ("dsort.core.table_chunk", "table_keys"),
    ("dsort.core.table_chunk", "summarize"),
    ("dsort.core.frame_chunk", "_argsort"),
    ("dsort.core.frame_chunk", "merge_order"),
    ("dsort.core.arrow_hash", "row_hashes"),
]


class Clock:
    def __init__(self):
        self.cpu, self.wall, self.calls = (collections.Counter() for _ in range(3))
        self.lock = threading.Lock()

    def wrap(self, module, name):
        import importlib

        mod = importlib.import_module(module)
        f = getattr(mod, name, None)
        if f is None:  # another version of dsort (an A/B)
            return
        label = f"{module.rsplit('.', 1)[-1]}.{name}"

        def timed(*args, **kwargs):
            c, w = time.thread_time(), time.perf_counter()
            try:
                return f(*args, **kwargs)
            finally:
                c, w = time.thread_time() - c, time.perf_counter() - w
                with self.lock:
                    self.cpu[label] += c
                    self.wall[label] += w
                    self.calls[label] += 1

        setattr(mod, name, timed)


def probe(delays, stop, nap=0.001):
    """The GIL's wait, sampled: how late this thread runs again after each ``nap``."""
    while not stop.is_set():
        t = time.perf_counter()
        time.sleep(nap)
        delays.append(time.perf_counter() - t - nap)


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--json", default=None)
    p.add_argument("--set", action="append", default=[], help="MODULE.NAME=INT: a constant set first")
    p.add_argument("--switch-interval", type=float, default=None, help="sys.setswitchinterval first (s)")
    p.add_argument("dsort", nargs=argparse.REMAINDER, help="dsort's arguments (sort ...)")
    args = p.parse_args(argv)
    import importlib

    for setting in args.set:
        name, value = setting.split("=")
        module, attr = name.rsplit(".", 1)
        setattr(importlib.import_module(module), attr, int(value))
    if args.switch_interval:
        sys.setswitchinterval(args.switch_interval)
    clock = Clock()
    for module, name in WRAPPED:
        clock.wrap(module, name)
    from dsort.cli import main as dsort_main

    delays, stop = [], threading.Event()
    t = threading.Thread(target=probe, args=(delays, stop), daemon=True)
    wall = time.perf_counter()
    t.start()
    rc = dsort_main(args.dsort)
    stop.set()
    t.join()
    wall = time.perf_counter() - wall
    r = resource.getrusage(resource.RUSAGE_SELF)
    rows = [
        {
            "function": k,
            "calls": clock.calls[k],
            "cpu s": f"{clock.cpu[k]:.2f}",
            "wall s": f"{clock.wall[k]:.2f}",
            "wall / cpu": f"{clock.wall[k] / max(clock.cpu[k], 1e-9):.1f}",
        }
        for k in sorted(clock.calls, key=lambda k: -clock.wall[k])
    ]
    q = sorted(delays) or [0.0]
    summary = {
        "rc": rc,
        "wall s": round(wall, 2),
        "user s": round(r.ru_utime, 2),
        "system s": round(r.ru_stime, 2),
        "cores busy": round((r.ru_utime + r.ru_stime) / wall, 1),
        "GIL wait median ms": round(statistics.median(q) * 1e3, 2),
        "GIL wait p90 ms": round(q[int(0.9 * (len(q) - 1))] * 1e3, 2),
    }
    print(
        " ".join(f"{k} {v}" for k, v in summary.items())
        + "".join(f" {x}" for x in args.set)
        + f" switch interval {sys.getswitchinterval()}"
    )
    print_table(rows, ["function", "calls", "cpu s", "wall s", "wall / cpu"])
    if args.json:
        write_json(args.json, rows, summary=summary, argv=args.dsort)


if __name__ == "__main__":
    main()
