"""Shared helpers for the benchmark scripts: timing, a table printed last, optional JSON."""

from __future__ import annotations

import datetime
import json
import platform
import statistics
import time


def paired_times(fns, repeat=7, warmup=1, setup=None, sync=None):
    """Median times (seconds) of several functions timed in alternation on the same fresh inputs.

    Interleaving keeps a busy machine's load from favouring whichever function ran first, so the
    ratios between the medians are fair even when the absolute times drift.
    """
    times = [[] for _ in fns]
    for i in range(warmup + repeat):
        args = setup() if setup else ()
        for j, fn in enumerate(fns if i % 2 == 0 else fns[::-1]):
            j = j if i % 2 == 0 else len(fns) - 1 - j
            if sync:
                sync()
            t = time.perf_counter()
            fn(*args)
            if sync:
                sync()
            if i >= warmup:
                times[j].append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


def print_table(rows, columns):
    widths = [max([len(c), *(len(str(r.get(c, ""))) for r in rows)]) for c in columns]
    line = " | ".join(c.ljust(w) for c, w in zip(columns, widths))
    print("| " + line + " |")
    print("| " + " | ".join("-" * w for w in widths) + " |")
    for r in rows:
        print("| " + " | ".join(str(r.get(c, "")).ljust(w) for c, w in zip(columns, widths)) + " |")


def write_json(path, rows, **meta):
    if not path:
        return
    doc = {
        "date": datetime.date.today().isoformat(),
        "host": platform.node(),
        "machine": platform.processor() or platform.machine(),
        **meta,
        "rows": rows,
    }
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)


def present_peers(spec: str) -> list:
    """The peers named in ``spec`` (comma separated) that this machine has: DuckDB is left out,
    saying so, where its Python module is missing."""
    peers = [x for x in spec.split(",") if x]
    if "duckdb" in peers:
        try:
            import duckdb  # noqa: F401
        except ImportError:
            print("duckdb is not installed: skipped (pip install duckdb)")
            peers.remove("duckdb")
    return peers
