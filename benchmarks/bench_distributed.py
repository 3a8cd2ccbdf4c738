"""Distributed sort of N int64 keys with dsort, per phase, against one-device sort and dask.dataframe.

    python benchmarks/bench_distributed.py [--log2n 30] [--workers 1,2] [--chunks-per-worker 4]
                                           [--df-log2n 26] [--json out.json]       # GPU machine
    python benchmarks/bench_distributed.py --cpu [--log2n 22]                      # CPU, for testing
    python benchmarks/bench_distributed.py --log2n 30 --workers 1,2,4 --weak --data gpu --df-log2n 0

GPU mode (a ``LocalCUDACluster``, one worker per GPU, for each count in ``--workers``):

* ``gpu``: keys held as CuPy chunks on the GPUs (persisted first), sorted result left there.
* ``host``: keys held as NumPy chunks in the workers' host memory (persisted first), sorted with
  ``dsort.sort(x, device="gpu")``: each chunk goes to its worker's GPU once, runs are sorted and
  merged there, and the output chunks come back to host memory as NumPy arrays.

``--weak``: each count of workers sorts 2^log2n keys per worker (weak scaling; "vs 1 worker" is
then keys per second per worker against one). ``--data`` picks ``gpu``, ``host`` or both.
``--floor`` adds, for host data, every chunk copied to its worker's GPU and back into new host memory
through dsort's own transfers, one task a chunk: the floor of any GPU sort of keys in host memory on
those workers, measured on the same cluster ("of floor" = floor / sort).

CPU mode (``--cpu``): a ``LocalCluster`` of ``--workers`` single-threaded processes, NumPy chunks.

Each configuration runs each strategy ``--repeat`` times as the whole lazy graph and reports the
median run (``total``); the task stream of that run splits it along the critical path: ``local sort`` until the last local sort ends,
``splitters`` from there (per merge round: from the end of the round's input) to the end of the
round's splitter task, ``merge`` the rest (merges and the copies back to host memory). Baselines, in the same run: ``cupy.sort``
on one GPU (``numpy.sort`` in CPU mode) of the same keys, and ``dask.dataframe`` ``sort_values``
of an int64 key + int64 value frame (2^df-log2n rows, persisted first) on a ``LocalCluster`` using
the machine's CPUs. Throughput is keys per second; the table comes last.
"""

from __future__ import annotations

import argparse
import ast
import os
import time

import numpy as np
from _common import print_table, stages, timeline, write_json
from dask.utils import key_split

import dsort


def _level(key):
    """The merge round of a dsort task key: ``(name, level, ...)``; 0 for a multiway merge."""
    if isinstance(key, str) and key.startswith("("):  # a stringified tuple key; a plain name (an external sort's cuts) is level 0
        key = ast.literal_eval(key)
    return int(key[1]) if isinstance(key, tuple) and len(key) > 2 else 0


def phase_split(records, t0, t1):
    """Seconds of the critical path in each phase, from one run's task stream: ``local sort`` until
    the last local sort ends; ``splitters``, per merge round, from the end of the round's input
    (the local sorts, or the previous round's merges) to its splitter task's end; ``merge`` the rest."""
    ends = {}
    for r in records:
        for ss in r.get("startstops", ()):
            if ss.get("action") == "compute":
                k = (key_split(r["key"]), _level(r["key"]) if key_split(r["key"]) != "dsort-sort" else 0)
                ends[k] = max(ends.get(k, 0.0), ss["stop"])
    sort_end = ends.get(("dsort-sort", 0), t0)
    local = max(0.0, sort_end - t0)
    splitters, prev = 0.0, sort_end
    for level in sorted(lv for name, lv in ends if name == "dsort-splitters"):
        splitters += max(0.0, ends[("dsort-splitters", level)] - prev)
        prev = max(prev, ends.get(("dsort-merge", level), prev))
    return {"local sort": local, "splitters": splitters, "merge": max(0.0, (t1 - t0) - local - splitters)}


def run_total(client, result):
    """Persist the whole lazy graph; returns (seconds, per-phase seconds, persisted result)."""
    from distributed import get_task_stream, wait

    with get_task_stream(client=client) as ts:
        t0, c0 = time.time(), time.perf_counter()
        out = client.persist(result)
        wait(out)
        total = time.perf_counter() - c0
    return total, phase_split(ts.data, t0, t0 + total), out, ts.data


def gpu_free(client) -> str:
    """Each worker's GPU memory free (GiB, CUDA's count: CuPy's pool holds its free blocks), in worker order."""

    def free():
        try:
            import cupy

            return round(cupy.cuda.runtime.memGetInfo()[0] / 2**30, 1)
        except Exception:  # no GPU on this worker
            return None

    got = client.run(free)
    return " ".join(str(got[w]) for w in sorted(got))


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


def bench_dsort(client, x, n, label, workers, strategies, device=None, protocol="tcp", repeat=3, show=False):
    """Rows for both strategies on keys ``x`` (persisted), sorted with ``dsort.sort(device=...)``:
    the median of ``repeat`` runs (the first one's result checked); with ``show``, each worker's
    free GPU memory after each run, and the first, median and slowest runs' task groups
    (:func:`timeline`)."""
    rows = []
    for strategy in strategies:
        result = dsort.sort(x, strategy=strategy, device=device)
        # Warm-up on every chunk's few keys, where each lies: every worker's imports, CUDA context and
        # kernel loads stay out of the timings (a slice of the first chunk warmed its worker alone).
        client.compute(dsort.sort(x[:: max(1, n >> 16)], strategy=strategy, device=device), sync=True)
        runs = []
        for i in range(repeat):
            since = time.time()
            total, phases, out, stream = run_total(client, result)
            if i == 0:
                check_sorted(client, out, n)
            del out
            runs.append((total, phases, stream, since, time.time()))
            if show:  # what each worker's GPU has left after each run (runs or results kept would show here)
                print(f"-- run {i}: {total:.3f} s; GPU memory free per worker (GiB): {gpu_free(client)}", flush=True)
        ordered = sorted(runs, key=lambda r: r[0])
        median = ordered[len(runs) // 2]
        total, phases = median[:2]
        shown = [("first", runs[0]), ("median", median)] + ([("slowest", ordered[-1])] if ordered[-1] is not median else [])
        for which, r in shown if show else ():
            timeline(f"{label} on {workers} workers, {strategy}, {which} run, {r[0]:.3f} s", r[2])
            stages(client, r[3], r[4])
        rows.append(
            {
                "data": label,
                "workers": workers,
                "strategy": strategy,
                "protocol": protocol,
                "P": len(x.chunks[0]),
                "N": f"2^{int(np.log2(n))}",
                "runs": repeat,
                "total s": round(total, 3),
                "every run s": " ".join(f"{r[0]:.3f}" for r in runs),
                "local sort s": round(phases["local sort"], 3),
                "splitters s": round(phases["splitters"], 3),
                "merge s": round(phases["merge"], 3),
                "splitters %": round(100 * phases["splitters"] / sum(phases.values()), 1),
                "Mkeys/s": round(n / total / 1e6, 1),
            }
        )
        print(rows[-1], flush=True)
    return rows


def bench_floor(client, x, n, workers, repeat):
    """Every host chunk to its worker's GPU and back into new host memory, through dsort's own
    transfers (``engine.device``), as one task a chunk: what any GPU sort of host-resident keys on
    these workers pays at least (the median of ``repeat`` runs, each a persist of the whole graph)."""

    def there_and_back(block):
        from dsort.engine import device

        d = device.from_host(block)
        out = device.to_host(d)
        del d
        return out

    y = x.map_blocks(there_and_back, dtype=x.dtype)
    client.compute(y[: min(n, 1 << 16)], sync=True)  # CUDA contexts and pools made outside the timings
    times = sorted(run_total(client, y)[0] for _ in range(repeat))
    t = times[len(times) // 2]
    return {
        "data": "host",
        "workers": workers,
        "strategy": "floor",
        "P": len(x.chunks[0]),
        "N": f"2^{int(np.log2(n))}",
        "runs": repeat,
        "total s": round(t, 3),
        "every run s": " ".join(f"{v:.3f}" for v in times),
        "Mkeys/s": round(n / t / 1e6, 1),
    }


def gpu_cluster(n_gpus, protocol="tcp", rmm_pool_size=None):
    """One worker per GPU: dask_cuda's LocalCUDACluster (over ``protocol``, with dsort's UCX
    settings), or the same spec by hand without it (TCP)."""
    try:
        from dask_cuda import LocalCUDACluster

        from dsort.cluster import ucx_options

        extra = ucx_options(protocol, rmm_pool_size)
        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=list(range(n_gpus)), dashboard_address=":0", **extra)
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
        return {
            "data": "host",
            "workers": 1,
            "strategy": "numpy.sort (1 core)",
            "N": f"2^{int(np.log2(n))}",
            "total s": round(dt, 3),
            "Mkeys/s": round(n / dt / 1e6, 1),
        }
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
        return {
            "data": "gpu",
            "workers": 1,
            "strategy": "cupy.sort (1 GPU)",
            "N": f"2^{int(np.log2(n))}",
            "total s": round(dt, 3),
            "Mkeys/s": round(n / dt / 1e6, 1),
        }
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
        return pd.DataFrame(
            {"key": rng.integers(-(2**62), 2**62, m, dtype=np.int64), "value": np.arange(i * size, i * size + m, dtype=np.int64)}
        )

    with LocalCluster(n_workers=n_workers, threads_per_worker=threads, dashboard_address=":0") as cluster, Client(cluster):
        df = dd.from_map(part, range(parts)).persist()
        wait(df)
        warm = pd.DataFrame({"key": np.arange(1000, dtype=np.int64)[::-1], "value": np.int64(0)})
        dd.from_pandas(warm, npartitions=parts).sort_values("key").compute()  # imports on the workers
        t = time.perf_counter()
        out = df.sort_values("key").persist()
        wait(out)
        dt = time.perf_counter() - t
    return {
        "data": "host",
        "workers": f"{n_workers}x{threads} CPU",
        "strategy": "dask.dataframe sort_values",
        "P": parts,
        "N": f"2^{int(np.log2(n))}",
        "total s": round(dt, 3),
        "Mkeys/s": round(n / dt / 1e6, 1),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cpu", action="store_true", help="LocalCluster of CPU workers with NumPy chunks")
    p.add_argument("--log2n", type=int, help="keys: 2^log2n (default 30 on GPUs, 22 with --cpu)")
    p.add_argument("--workers", default=None, help="worker counts, comma separated (default: 1,2 GPUs; 2 CPU workers)")
    p.add_argument("--chunks-per-worker", type=int, default=4)
    p.add_argument("--strategies", default="multiway,tree")
    p.add_argument("--protocol", default="tcp", choices=("tcp", "ucx"), help="GPU mode: transport between workers")
    p.add_argument("--rmm-pool-size", default=None, help="GPU mode with ucx: RMM pool per worker (default: dsort's)")
    p.add_argument("--df-log2n", type=int, help="rows of the dask.dataframe baseline (default min(log2n, 26))")
    p.add_argument("--df-workers", default=None, help="dask.dataframe cluster as WORKERSxTHREADS (default: CPU count / 4 x 4)")
    p.add_argument("--repeat", type=int, default=3, help="runs of each configuration (the median is reported)")
    p.add_argument("--weak", action="store_true", help="weak scaling: 2^log2n keys per worker (each count sorts count x 2^log2n)")
    p.add_argument("--data", default="gpu,host", help="GPU mode: gpu (CuPy chunks), host (NumPy chunks, device='gpu'), or both")
    p.add_argument(
        "--floor",
        action="store_true",
        help="GPU mode, host data: also every chunk copied to its worker's GPU and back to new host memory "
        "(dsort's own transfers), the floor of any GPU sort of host-resident keys on those workers",
    )
    p.add_argument("--timeline", action="store_true", help="print the median run's task groups (where the time went)")
    p.add_argument("--json")
    args = p.parse_args(argv)
    log2n = args.log2n or (22 if args.cpu else 30)
    data = set(args.data.split(","))
    counts = [int(w) for w in (args.workers or ("2" if args.cpu else "1,2")).split(",")]
    strategies = args.strategies.split(",")
    from distributed import Client, LocalCluster, wait

    rows = [baseline_one_device(1 << log2n, args.cpu)]
    print(rows[-1], flush=True)
    for workers in counts:
        n = (1 << log2n) * (workers if args.weak else 1)
        p_chunks = workers * args.chunks_per_worker
        chunk = -(-n // p_chunks)
        if args.cpu:
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, dashboard_address=":0")
        else:
            cluster = gpu_cluster(workers, args.protocol, args.rmm_pool_size)
        with cluster, Client(cluster) as client:
            x = make_keys(n, chunk).persist()
            wait(x)
            placed = {}
            for holders in client.who_has(x).values():
                for w in holders:
                    placed[w] = placed.get(w, 0) + 1
            print(f"{workers} worker(s): input chunks per worker {sorted(placed.values())}", flush=True)
            how = {"repeat": args.repeat, "show": args.timeline}
            if args.cpu:
                rows += bench_dsort(client, x, n, "host", workers, strategies, **how)
            else:
                import cupy

                if "gpu" in data:
                    meta = cupy.empty(0, np.int64)
                    xg = x.map_blocks(cupy.asarray, meta=meta).persist()
                    wait(xg)
                    rows += bench_dsort(client, xg, n, "gpu", workers, strategies, protocol=args.protocol, **how)
                    del xg
                if "host" in data:
                    rows += bench_dsort(client, x, n, "host", workers, strategies, device="gpu", protocol=args.protocol, **how)
                if "host" in data and args.floor:
                    rows.append(bench_floor(client, x, n, workers, args.repeat))
                    print(rows[-1], flush=True)
            del x
    cores = os.cpu_count() or 2
    if args.df_workers:
        dfw, dft = (int(v) for v in args.df_workers.split("x"))
    else:
        dft = min(4, cores)
        dfw = max(1, cores // dft)
    if args.df_log2n != 0:  # 0: no dask.dataframe baseline
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
        if base and isinstance(r.get("workers"), int) and r["workers"] > 1:  # weak scaling: keys per second per worker
            r["vs 1 worker"] = f"{r['Mkeys/s'] / base / (r['workers'] if args.weak else 1):.2f}x"
    for r in rows:  # host data: the sort against its floor on the same workers
        fl = next((f["total s"] for f in rows if f.get("strategy") == "floor" and f.get("workers") == r.get("workers")), None)
        if fl and r.get("data") == "host" and r.get("strategy") != "floor" and isinstance(r.get("total s"), float):
            r["of floor"] = f"{fl / r['total s']:.2f}"
    write_json(
        args.json, rows, benchmark="distributed", mode="cpu" if args.cpu else "gpu", log2n=log2n, protocol=args.protocol, weak=args.weak
    )
    columns = [
        "data",
        "workers",
        "strategy",
        "protocol",
        "P",
        "N",
        "runs",
        "total s",
        "every run s",
        "local sort s",
        "splitters s",
        "merge s",
        "splitters %",
        "Mkeys/s",
        "vs 1 worker",
        "of floor",
        "vs sort_values",
    ]
    print()
    print_table(rows, columns)


if __name__ == "__main__":
    main()
