"""The same data at different partition counts, and on more workers: does dsort's cost follow the
data, not the partitioning?

    python benchmarks/bench_scale.py [--n 10240000] [--parts 16,512,4096] [--workers 2] [--threads 1]
                                     [--kinds array,frame] [--repeat 3] [--json out.json]
    python benchmarks/bench_scale.py --weak --workers 1,2,4,8 --n 2560000    # data per worker fixed
    python benchmarks/bench_scale.py --gpu [--workers 1] ...                  # LocalCUDACluster

For each worker count (a ``LocalCluster`` of that many single-process workers; ``--gpu``: a
``LocalCUDACluster``, one worker per GPU, CuPy chunks for arrays and ``device="gpu"`` for frames) and
each partition count, the same ``--n`` random int64 keys (frames: the key and an int64 payload),
persisted first, are sorted by:

* ``array``: ``dsort.sort(x)`` (``auto``, the default) and each explicit strategy (``multiway``,
  ``tree``, ``external``); the peer is dask's own ``sort_values`` of the keys as a one-column frame.
* ``frame``: ``df.dsort.sort_values("k")`` (``auto``), ``strategy="memory"`` and ``"external"``;
  the peer is dask's ``df.sort_values("k")``.
* ``files`` (with ``--weak``): ``dsort.service.sort_files`` of ``--n`` records per worker through the
  cluster (``dsort sort --scheduler``).
* ``floor``: a copy of every chunk (``map_blocks``): what any one-task-per-chunk step costs there.

Each case runs ``--repeat`` times (after one warm-up, alternating order); the median counts. Where
the time goes, from the task stream of one run: ``build`` (making the lazy collection), ``wall``
(persist until done), ``tasks`` (how many ran), ``busy`` (their compute seconds summed) and
``outside`` = wall - busy / threads (the scheduler, transfers and waits). Every output is checked
(count, key sum, order inside and across partitions) on the workers. The table comes last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import numpy as np
from _common import print_table, write_json

HERE = os.path.dirname(os.path.abspath(__file__))


def _keys(n, seed=0):
    return np.random.default_rng(seed).integers(-(1 << 62), 1 << 62, n)


def _summary(k):
    """(rows, key sum mod 2^64, sorted inside, first, last) of a sorted chunk's keys."""
    k = np.asarray(k.get() if hasattr(k, "get") else k)
    if not len(k):
        return 0, 0, True, None, None
    return len(k), int(k.view(np.uint64).sum(dtype=np.uint64)), bool((k[1:] >= k[:-1]).all()), int(k[0]), int(k[-1])


def _frame_keys(part):
    return part["k"].to_numpy()


def check(parts, expected):
    """Every output chunk sorted, chunk ends in order, the count and key sum kept (on the workers)."""
    import dask

    got = dask.compute(*[dask.delayed(_summary)(p) for p in parts])
    ends = [(g[3], g[4]) for g in got if g[0]]
    rows, total = sum(g[0] for g in got), sum(g[1] for g in got) % (1 << 64)
    ok = all(g[2] for g in got) and all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))
    assert (rows, total) == expected and ok, ("wrong output", rows, total, expected, ok)


def _expected(keys):
    return len(keys), int(keys.view(np.uint64).sum(dtype=np.uint64))


def timed(client, build, data, threads):
    """Build the lazy result of ``data``, persist it, wait: the figures of one run and the persisted result."""
    from dask.utils import key_split
    from distributed import get_task_stream, wait

    t = time.perf_counter()
    lazy = build(data)
    built = time.perf_counter() - t
    with get_task_stream(client=client) as ts:
        t = time.perf_counter()
        out = client.persist(lazy)
        wait(out)
        wall = time.perf_counter() - t
    busy, tasks, groups = 0.0, 0, {}
    for r in ts.data:
        for ss in r.get("startstops", ()):
            if ss.get("action") == "compute":
                d = ss["stop"] - ss["start"]
                busy += d
                tasks += 1
                g = key_split(r["key"])
                groups[g] = groups.get(g, 0.0) + d
    return (
        {"build": built, "wall": wall, "total": built + wall, "tasks": tasks, "busy": busy, "outside": max(0.0, wall - busy / threads)},
        out,
        groups,
    )


def forget(client, keys) -> None:
    """Wait until the scheduler has forgotten ``keys`` (of a result just dropped): a case whose
    graph has the same keys (``auto`` is one of the explicit strategies) must not find it there."""
    keys = {str(k) for k in keys}
    for _ in range(200):
        left = client.run_on_scheduler(lambda dask_scheduler, keys=keys: sum(str(k) in keys for k in dask_scheduler.tasks))
        if not left:
            return
        time.sleep(0.05)


def cases_for(kind, gpu, peer):
    """``{case: function(persisted input) -> lazy result}`` of one kind."""
    import dsort
    import dsort.dataframe as D

    if kind == "array":
        out = {"auto": lambda x: dsort.sort(x)}
        for s in ("multiway", "tree", "external"):
            out[s] = lambda x, s=s: dsort.sort(x, strategy=s)
        if peer and not gpu:
            import dask.dataframe as dd

            out["dask"] = lambda x: dd.from_dask_array(x).to_frame("k").sort_values("k")["k"]
        out["floor"] = lambda x: x.map_blocks(lambda b: b.copy())
        return out
    device = "gpu" if gpu else None
    out = {
        "auto": lambda df: D.sort_values(df, "k", device=device),
        "memory": lambda df: D.sort_values(df, "k", strategy="memory", device=device),
        "external": lambda df: D.sort_values(df, "k", strategy="external", device=device),
    }
    if peer:
        out["dask"] = lambda df: df.sort_values("k")
    out["floor"] = lambda df: df.map_partitions(lambda p: p.copy())
    return out


def make_input(client, kind, keys, parts, gpu):
    """The keys as a persisted dask array of ``parts`` chunks (CuPy with ``gpu``), or a frame
    of ``parts`` partitions with an int64 payload."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd
    from distributed import wait

    n = len(keys)
    if kind == "array":
        x = da.from_array(keys, chunks=-(-n // parts))
        if gpu:
            import cupy

            x = x.map_blocks(cupy.asarray)
        out = x.persist()
    else:
        pdf = pd.DataFrame({"k": keys, "v": np.arange(n, dtype=np.int64)})
        out = dd.from_pandas(pdf, npartitions=parts, sort=False).persist()
    wait(out)
    return out


def output_parts(kind, case, out):
    import dask

    if kind == "array" and case != "dask":
        return out.to_delayed().ravel().tolist()
    if kind == "array":  # a dask series
        return [dask.delayed(np.asarray)(p) for p in out.to_delayed()]
    return [dask.delayed(_frame_keys)(p) for p in out.to_delayed()]


def run_files(client, records, repeat, gpu):
    """``sort_files`` of ``records`` Sort Benchmark records through ``client`` (its CPU workers
    unless ``gpu``): median seconds."""
    from dsort.io import gen
    from dsort.service import sort_files

    times = []
    with tempfile.TemporaryDirectory(dir=os.environ.get("DSORT_BENCH_DIR")) as d:
        src = os.path.join(d, "in.bin")
        gen.records(records, src)
        for i in range(repeat + 1):
            dst = os.path.join(d, f"out{i}.bin")
            t = time.perf_counter()
            report = sort_files(src, dst, client=client, cpu=not gpu)
            if i:
                times.append(time.perf_counter() - t)
            assert report.records == records
            os.remove(dst)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=float, default=10_240_000, help="keys (with --weak: per worker)")
    ap.add_argument("--parts", default="16,512,4096", help="partition counts (with --weak: per worker)")
    ap.add_argument("--workers", default="2", help="worker counts, comma-separated")
    ap.add_argument("--threads", type=int, default=1, help="threads per worker")
    ap.add_argument("--kinds", default="array,frame")
    ap.add_argument("--cases", default="", help="only these cases (e.g. auto,dask)")
    ap.add_argument("--weak", action="store_true", help="data and partitions per worker fixed; adds the file sort")
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--no-peer", action="store_true", help="skip dask's own sort")
    ap.add_argument("--peer-max-parts", type=int, default=1 << 30, help="skip dask's sort above this many partitions")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    from dask.core import flatten
    from distributed import Client, LocalCluster

    import dsort  # noqa: F401 (the accessor)

    kinds = a.kinds.split(",") + (["files"] if a.weak else [])
    only = set(a.cases.split(",")) - {""}
    rows = []
    for workers in [int(w) for w in a.workers.split(",")]:
        n = int(a.n) * (workers if a.weak else 1)
        keys = _keys(n)
        if a.gpu:
            from dask_cuda import LocalCUDACluster

            cluster = LocalCUDACluster(n_workers=workers, threads_per_worker=a.threads)
        else:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=a.threads, processes=True, dashboard_address=None)
        threads = workers * a.threads
        with cluster, Client(cluster) as client:
            if "files" in kinds:
                sec = run_files(client, n, a.repeat, a.gpu)
                rows.append({"workers": workers, "kind": "files", "parts": "-", "case": "sort_files", "rows": n, "median s": f"{sec:.2f}"})
                print(rows[-1], flush=True)
            for kind in [k for k in kinds if k != "files"]:
                for p in [int(x) for x in a.parts.split(",")]:
                    parts = p * (workers if a.weak else 1)
                    x = make_input(client, kind, keys, parts, a.gpu)
                    cases = cases_for(kind, a.gpu, not a.no_peer and parts <= a.peer_max_parts)
                    cases = {c: f for c, f in cases.items() if not only or c in only}
                    figures = {c: [] for c in cases}
                    where = {}
                    for i in range(a.repeat + 1):
                        for c in list(cases)[:: 1 if i % 2 else -1]:
                            fig, out, groups = timed(client, cases[c], x, threads)
                            if i == 0 and c != "floor":
                                check(output_parts(kind, c, out), _expected(keys))
                            if i:
                                figures[c].append(fig)
                                where[c] = groups
                            made = list(flatten(out.__dask_keys__()))
                            del out
                            forget(client, made)
                    best = min((statistics.median(f["total"] for f in figures[c]), c) for c in cases if c not in ("dask", "floor"))
                    for c in cases:
                        med = {k: statistics.median(f[k] for f in figures[c]) for k in figures[c][0]}
                        row = {
                            "workers": workers,
                            "kind": kind,
                            "parts": parts,
                            "case": c,
                            "rows": n,
                            "median s": f"{med['total']:.2f}",
                            "build": f"{med['build']:.2f}",
                            "outside": f"{med['outside']:.2f}",
                            "tasks": int(med["tasks"]),
                            "busy": f"{med['busy']:.2f}",
                        }
                        if "dask" in cases and c != "dask":
                            row["vs dask"] = f"{statistics.median(f['total'] for f in figures['dask']) / med['total']:.2f}x"
                        if c not in ("dask", "floor"):
                            row["vs best"] = f"{med['total'] / best[0]:.2f}x"
                        row["top groups"] = ", ".join(f"{g} {s:.2f}" for g, s in sorted(where[c].items(), key=lambda kv: -kv[1])[:3])
                        rows.append(row)
                        print(rows[-1], flush=True)
                    del x
    write_json(a.json, rows, n=int(a.n), weak=a.weak, gpu=a.gpu, repeat=a.repeat, threads=a.threads)
    print_table(rows, ["workers", "kind", "parts", "case", "rows", "median s", "vs best", "vs dask", "build", "outside", "tasks", "busy"])


if __name__ == "__main__":
    main()
