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


def timeline(title, records) -> None:
    """Where one sort's time went: per task group (and for transfers between workers) the number
    of tasks, the first start and last end (seconds from the first task's start) and the summed
    busy seconds."""
    from dask.utils import key_split

    spans, by_worker = {}, {}
    for r in records:
        for ss in r.get("startstops", ()):
            g = key_split(r["key"]) if ss["action"] == "compute" else ss["action"]
            spans.setdefault(g, []).append((ss["start"], ss["stop"]))
            if ss["action"] == "compute":  # dsort's tasks and the input's: where each ran
                by_worker.setdefault((g, r.get("worker", "?")), []).append((ss["start"], ss["stop"]))
    t0 = min((a for v in spans.values() for a, _ in v), default=0.0)

    def line(name, v):
        first, last, busy = min(a for a, _ in v) - t0, max(b for _, b in v) - t0, sum(b - a for a, b in v)
        print(f"   {name[:32]:32s} {len(v):5d} {first:7.3f} {last:7.3f} {busy:7.3f}", flush=True)

    print(f"-- {title}: group, tasks, first, last, busy s")
    for g, v in sorted(spans.items(), key=lambda kv: min(a for a, _ in kv[1])):
        line(g, v)
    workers = sorted({w for _, w in by_worker})
    print(f"-- {title}: the groups per worker")
    for (g, w), v in sorted(by_worker.items(), key=lambda kv: (min(a for a, _ in spans[kv[0][0]]), workers.index(kv[0][1]))):
        line(f"{g} @{workers.index(w)}", v)


def stages(client, since: float, until: float = float("inf")) -> None:
    """Where the tasks of the sort between ``since`` and ``until`` spent their time, from the events their
    stopwatches sent (:func:`dsort.collections.remote.report_stages`): seconds per stage, summed over the
    tasks, and the tasks that said each fact (``tier=shared``, say)."""
    from dsort.collections.remote import STAGES

    total, facts = {}, {}
    for when, event in client.get_events(STAGES):
        if since <= when <= until:
            for stage, sec in event.items():
                if isinstance(sec, float):
                    key = (event["task"], stage)
                    total[key] = total.get(key, 0.0) + sec
                elif stage != "task":
                    key = (event["task"], f"{stage}={sec}")
                    facts[key] = facts.get(key, 0) + 1
    print("-- stages of its tasks: task, stage, seconds summed over the tasks")
    for (task, stage), sec in total.items():
        print(f"   {task:8s} {stage:20s} {sec:8.3f}", flush=True)
    for (task, fact), count in facts.items():
        print(f"   {task:8s} {fact:20s} {count:8d} tasks", flush=True)
