"""Distributed sort of N int64 keys with dsort, per phase, against one-device sort and dask.dataframe.

    python benchmarks/bench_distributed.py [--log2n 30] [--workers 1,2] [--chunks-per-worker 4]
                                           [--df-log2n 26] [--json out.json]       # GPU machine
    python benchmarks/bench_distributed.py --cpu [--log2n 22]                      # CPU, for testing

GPU mode (a ``LocalCUDACluster``, one worker per GPU, for each count in ``--workers``):

* ``gpu``: keys held as CuPy chunks on the GPUs (persisted first), sorted result left there.
* ``host``: keys held as NumPy chunks in the workers' host memory (persisted first); each chunk
  goes to its worker's GPU, is sorted, and the result comes back to host memory.

CPU mode (``--cpu``): a ``LocalCluster`` of ``--workers`` single-threaded processes, NumPy chunks.

Each configuration runs both strategies twice: once as the whole lazy graph (``total``, the
figure that counts), once phase by phase with a barrier after each (``local sort``, then per merge
round ``splitters`` and ``merge``), which splits the time. Baselines, in the same run: ``cupy.sort``
on one GPU (``numpy.sort`` in CPU mode) of the same keys, and ``dask.dataframe`` ``sort_values``
of an int64 key + int64 value frame (2^df-log2n rows, persisted first) on a ``LocalCluster`` using
the machine's CPUs. Throughput is keys per second; the table comes last.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from _common import print_table, write_json

import dsort


def _phase_keys(dsk):
    """Task keys of the dsort phases: local sorts, and per merge round its splitter and merge keys."""
    sorts, rounds = [], {}
    for k in dsk:
        if not isinstance(k, tuple) or not isinstance(k[0], str):
            continue
        name = k[0]
        if name.startswith("dsort-sort-"):
            sorts.append(k)
        elif name.startswith("dsort-splitters-"):
            rounds.setdefault(k[1], ([], []))[0].append(k)
        elif name.startswith("dsort-merge-"):
            rounds.setdefault(k[1], ([], []))[1].append(k)
    return sorts, [rounds[r] for r in sorted(rounds)]


def _flat(keys):
    out = []
    for k in keys:
        out.extend(_flat(k) if isinstance(k, list) else [k])
    return out


def run_phased(client, result):
    """Compute ``result``'s graph with a barrier after each phase; returns seconds per phase."""
    from distributed import wait

    dsk = dict(result.__dask_graph__())
    sorts, rounds = _phase_keys(dsk)
    held = {}

    def step(keys):
        t = time.perf_counter()
        futures = client.get({**dsk, **held}, keys, sync=False)
        wait(futures)
        held.update(zip(keys, futures))
        return time.perf_counter() - t

    times = {"local sort": step(sorts), "splitters": 0.0, "merge": 0.0}
    for splitters, merges in rounds:
        times["splitters"] += step(splitters) if splitters else 0.0
        times["merge"] += step(merges)
    times["merge"] += step(_flat(result.__dask_keys__()))  # output chunks (and any copy back)
    held.clear()
    return times


def run_total(client, result):
    """Persist the whole lazy graph; returns (seconds, persisted result)."""
    from distributed import wait

    t = time.perf_counter()
    out = client.persist(result)
    wait(out)
    return time.perf_counter() - t, out


def check_sorted(client, out, n):
    """Every chunk sorted and chunk ends in order, checked on the workers (only ends travel)."""
    import dask

    def ends(block):
        from dsort import engine

        e = engine.get(block)
        if not len(block):
            return (True, None, None, 0)
        return (bool(e.is_sorted(block)), e.to_numpy(block[:1])[0], e.to_numpy(block[-1:])[0], len(block))

    parts = client.compute([dask.delayed(ends)(b) for b in out.to_delayed().ravel()], sync=True)
    parts = [p for p in parts if p[3]]
    ok = all(p[0] for p in parts) and all(a[2] <= b[1] for a, b in zip(parts, parts[1:]))
    assert ok and sum(p[3] for p in parts) == n, "dsort result is not sorted"


def make_keys(n, chunk, seed=0):
    import dask.array as da

    return da.random.default_rng(seed).integers(-(2**62), 2**62, n, chunks=chunk, dtype=np.int64)


def bench_dsort(client, x, n, label, workers, strategies, to_device=None, to_host=None):
    """Rows for both strategies on keys ``x`` (persisted); optional device hops around the sort."""
    rows = []
    for strategy in strategies:
        y = x.map_blocks(to_device[0], meta=to_device[1]) if to_device else x
        result = dsort.sort(y, strategy=strategy)
        if to_host:
            result = result.map_blocks(to_host, meta=np.empty(0, np.int64))
        # Warm-up on a small slice: imports, CUDA contexts and kernel compiles stay out of the timings.
        m = min(n, 1 << 16)
        client.compute(dsort.sort(y[:m].rechunk(-(-m // len(x.chunks[0]))), strategy=strategy), sync=True)
        total, out = run_total(client, result)
        check_sorted(client, out, n)
        del out
        phases = run_phased(client, result)
        rows.append(
            {
                "data": label,
                "workers": workers,
                "strategy": strategy,
                "P": len(x.chunks[0]),
                "N": f"2^{int(np.log2(n))}",
                "total s": round(total, 3),
                "local sort s": round(phases["local sort"], 3),
                "splitters s": round(phases["splitters"], 3),
                "merge s": round(phases["merge"], 3),
                "splitters %": round(100 * phases["splitters"] / sum(phases.values()), 1),
                "Mkeys/s": round(n / total / 1e6, 1),
            }
        )
        print(rows[-1], flush=True)
    return rows


def gpu_cluster(n_gpus):
    """One worker per GPU: dask_cuda's LocalCUDACluster, or the same spec by hand without it."""
    try:
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n_gpus)), dashboard_address=":0")
    except ImportError:
        from distributed import Nanny, Scheduler, SpecCluster

        workers = {i: {"cls": Nanny, "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(i)}}} for i in range(n_gpus)}
        return SpecCluster(workers=workers, scheduler={"cls": Scheduler, "options": {"dashboard_address": ":0"}})


def baseline_one_device(n, cpu):
    """``cupy.sort`` on one GPU (``numpy.sort`` on CPU) of 2^log2n keys, in this process."""
    rng = np.random.default_rng(0)
    keys = rng.integers(-(2**62), 2**62, n, dtype=np.int64)
    if cpu:
        t = time.perf_counter()
        np.sort(keys, kind="stable")
        dt = time.perf_counter() - t
        return {"data": "host", "workers": 1, "strategy": "numpy.sort (1 core)", "N": f"2^{int(np.log2(n))}", "total s": round(dt, 3), "Mkeys/s": round(n / dt / 1e6, 1)}
    import cupy

    d = cupy.asarray(keys)
    del keys
    cupy.sort(d[: 1 << 20])
    cupy.cuda.Device().synchronize()
    try:
        t = time.perf_counter()
        cupy.sort(d)
        cupy.cuda.Device().synchronize()
        dt = time.perf_counter() - t
        return {"data": "gpu", "workers": 1, "strategy": "cupy.sort (1 GPU)", "N": f"2^{int(np.log2(n))}", "total s": round(dt, 3), "Mkeys/s": round(n / dt / 1e6, 1)}
    except cupy.cuda.memory.OutOfMemoryError:
        return {"data": "gpu", "workers": 1, "strategy": "cupy.sort (1 GPU)", "total s": "out of memory"}
    finally:
        del d
        cupy.get_default_memory_pool().free_all_blocks()


def baseline_dataframe(n, n_workers, threads):
    """dask.dataframe sort_values of an int64 key + int64 value frame, persisted first."""
    import dask.dataframe as dd
    import pandas as pd
    from distributed import Client, LocalCluster, wait

    parts = max(n_workers * threads, 8)
    size = -(-n // parts)

    def part(i):
        rng = np.random.default_rng(i)
        m = max(0, min(size, n - i * size))
        return pd.DataFrame({"key": rng.integers(-(2**62), 2**62, m, dtype=np.int64), "value": np.arange(i * size, i * size + m, dtype=np.int64)})

    with LocalCluster(n_workers=n_workers, threads_per_worker=threads, dashboard_address=":0") as cluster, Client(cluster) as client:
        df = dd.from_map(part, range(parts)).persist()
        wait(df)
        warm = pd.DataFrame({"key": np.arange(1000, dtype=np.int64)[::-1], "value": np.int64(0)})
        dd.from_pandas(warm, npartitions=parts).sort_values("key").compute()  # imports on the workers
        t = time.perf_counter()
        out = df.sort_values("key").persist()
        wait(out)
        dt = time.perf_counter() - t
    return {"data": "host", "workers": f"{n_workers}x{threads} CPU", "strategy": "dask.dataframe sort_values", "P": parts, "N": f"2^{int(np.log2(n))}", "total s": round(dt, 3), "Mkeys/s": round(n / dt / 1e6, 1)}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpu", action="store_true", help="LocalCluster of CPU workers with NumPy chunks")
    p.add_argument("--log2n", type=int, help="keys: 2^log2n (default 30 on GPUs, 22 with --cpu)")
    p.add_argument("--workers", default=None, help="worker counts, comma separated (default: 1,2 GPUs; 2 CPU workers)")
    p.add_argument("--chunks-per-worker", type=int, default=4)
    p.add_argument("--strategies", default="multiway,tree")
    p.add_argument("--df-log2n", type=int, help="rows of the dask.dataframe baseline (default min(log2n, 26))")
    p.add_argument("--df-workers", default=None, help="dask.dataframe cluster as WORKERSxTHREADS (default: CPU count / 4 x 4)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    log2n = args.log2n or (22 if args.cpu else 30)
    n = 1 << log2n
    counts = [int(w) for w in (args.workers or ("2" if args.cpu else "1,2")).split(",")]
    strategies = args.strategies.split(",")
    from distributed import Client, LocalCluster, wait

    rows = [baseline_one_device(n, args.cpu)]
    print(rows[-1], flush=True)
    for workers in counts:
        p_chunks = workers * args.chunks_per_worker
        chunk = -(-n // p_chunks)
        if args.cpu:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0")
        else:
            cluster = gpu_cluster(workers)
        with cluster, Client(cluster) as client:
            x = make_keys(n, chunk).persist()
            wait(x)
            if args.cpu:
                rows += bench_dsort(client, x, n, "host", workers, strategies)
            else:
                import cupy

                meta = cupy.empty(0, np.int64)
                xg = x.map_blocks(cupy.asarray, meta=meta).persist()
                wait(xg)
                rows += bench_dsort(client, xg, n, "gpu", workers, strategies)
                del xg
                rows += bench_dsort(client, x, n, "host", workers, strategies, to_device=(cupy.asarray, meta), to_host=cupy.asnumpy)
            del x
    cores = os.cpu_count() or 2
    if args.df_workers:
        dfw, dft = (int(v) for v in args.df_workers.split("x"))
    else:
        dft = min(4, cores)
        dfw = max(1, cores // dft)
    df_n = 1 << (args.df_log2n or min(log2n, 26))
    try:
        rows.append(baseline_dataframe(df_n, dfw, dft))
    except Exception as err:  # the baseline is context, not the subject: report, don't abort
        rows.append({"strategy": "dask.dataframe sort_values", "total s": f"failed: {type(err).__name__}: {err}"[:80]})
    print(rows[-1], flush=True)
    ref = next((r["Mkeys/s"] for r in rows if r.get("strategy") == "dask.dataframe sort_values" and "Mkeys/s" in r), None)
    one = {(r["data"], r["strategy"]): r["Mkeys/s"] for r in rows if r.get("workers") == 1 and "Mkeys/s" in r}
    for r in rows:
        if "Mkeys/s" not in r:
            continue
        if ref:
            r["vs sort_values"] = f"{r['Mkeys/s'] / ref:.1f}x"
        base = one.get((r.get("data"), r.get("strategy")))
        if base and isinstance(r.get("workers"), int) and r["workers"] > 1:
            r["vs 1 worker"] = f"{r['Mkeys/s'] / base:.2f}x"
    write_json(args.json, rows, benchmark="distributed", mode="cpu" if args.cpu else "gpu", log2n=log2n)
    columns = ["data", "workers", "strategy", "P", "N", "total s", "local sort s", "splitters s", "merge s", "splitters %", "Mkeys/s", "vs 1 worker", "vs sort_values"]
    print()
    print_table(rows, columns)


if __name__ == "__main__":
    main()
