"""dsort's dataframe sorts against dask's own ``ddf.sort_values``, as issue 11 measures them.

A persisted frame of ``--rows`` rows (int64 key, float64, an 8-character string) in ``--parts``
partitions on a ``LocalCluster(n_workers=2, threads_per_worker=1)``; each case sorts it and
persists the result (timed: build + persist + wait), by an int64 key, a string key and two keys.
Cases: ``external`` (dsort, runs on disk), ``memory`` (dsort's in-memory sort) and ``dask``
(``ddf.sort_values``). Medians of ``--repeat`` runs, in alternation; every result is checked
against pandas' stable sort of the same frame.

    python benchmarks/bench_dataframe.py --rows 4e6 --parts 8 --json out.json

``--gpu``: the issue's GPU case instead: ``--rows`` rows (int64 key, int64 payload) made by the
workers in host memory; dask's ``sort_values`` on a CPU ``LocalCluster`` of ``--cpu-workers`` x
``--cpu-threads`` (and dsort on the same CPU workers), then dsort's ``sort_values(device="gpu")``
on a ``LocalCUDACluster`` (one worker per GPU, ``--gpu-threads`` threads each): keys sorted and
merged on the GPUs, the rows following in host memory. Each output is checked (sorted, no row
lost or added: count and key sum). ``--cudf`` (dask-cudf installed): the same rows as cudf
partitions on the GPUs too, sorted by dask-cudf's ``sort_values`` (its default shuffle and
``shuffle_method="tasks"``) and by dsort where they live; ``--beyond 4``: also a dask-cudf frame
made as it is read, sorted by dsort with its runs in GPU memory and then with ``device_memory_limit``
at a quarter of the frame (the rest of the runs in files); ``--cudf-strings``: the cudf frames
carry the payload as strings too (dsort's general path for cudf frames: keys encoded on the host,
rows gathered by cudf, runs in files).

    python benchmarks/bench_dataframe.py --gpu --rows 2**28 --parts 64 --repeat 2

The markdown table is printed last; ``--json PATH`` writes the rows too.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH: an A/B (scripts/gpu-ab) puts the older package first
from _common import print_table, stages, timeline, write_json  # noqa: E402
from distributed import WorkerPlugin  # noqa: E402


def main() -> None:
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd
    from distributed import Client, LocalCluster, get_task_stream, wait

    from dsort.dataframe import sort_values

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=lambda x: float(eval(x, {})), default=4e6)  # 4e6, 2**28
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    p.add_argument("--by", default="k;s;s,k", help="the sorts, ';' between them (default: k;s;s,k)")
    p.add_argument("--gpu", action="store_true")
    p.add_argument("--cpu-workers", type=int, default=8)
    p.add_argument("--cpu-threads", type=int, default=4)
    p.add_argument("--gpu-threads", type=int, default=8)
    p.add_argument("--cpu-cases", default="dask,dsort", help="the GPU case's CPU peers: dask, dsort, both or none ('')")
    p.add_argument(
        "--gpu-strategies",
        default="auto",
        help="the GPU case's strategies, (auto, memory, external, floor: the input's tasks alone; '': none)",
    )
    p.add_argument("--per-gpu", type=int, default=1, help="worker processes per GPU (more than 1: a LocalCluster of them)")
    p.add_argument("--cudf", action="store_true", help="GPU case: the same rows as dask-cudf frames too (dask-cudf's sorts beside dsort's)")
    p.add_argument("--cudf-cases", default="default,tasks,dsort", help="with --cudf: of default, tasks, dsort, memory")
    p.add_argument("--rmm", choices=["none", "async", "pool"], default="none", help="the GPU workers' RMM allocator (dask-cuda's)")
    p.add_argument("--rmm-pool", default="16GB", help="with --rmm pool: its size")
    p.add_argument(
        "--cudf-strings", action="store_true", help="with --cudf: the cudf frames carry a string column too (dsort's general cudf path)"
    )
    p.add_argument("--beyond", type=float, default=0, help="with --cudf: also a lazily made cudf frame this many times device_memory_limit")
    p.add_argument("--timeline", action="store_true", help="print each case's task phases in its last round (where the time went)")
    a = p.parse_args()
    if a.cudf:
        try:
            import dask_cudf  # noqa: F401
        except ImportError:
            p.error("--cudf needs dask-cudf: pip install 'dsort[cudf]'")
    if a.gpu:
        return gpu_case(a)
    n = int(a.rows)
    rng = np.random.default_rng(0)
    letters = rng.integers(97, 123, (n, 8), dtype=np.uint8).view("S8").reshape(-1).astype(str)
    pdf = pd.DataFrame({"k": rng.integers(0, 1 << 62, n), "v": rng.random(n), "s": letters})
    rows = []
    with tempfile.TemporaryDirectory() as runs, LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        with Client(cluster):
            df = dd.from_pandas(pdf, npartitions=a.parts, sort=False).persist()
            wait(df)
            for by in [b.split(",") for b in a.by.split(";")]:
                cases = {
                    "external": lambda d, by=by: sort_values(d, by, strategy="external", local_directory=runs),
                    "memory": lambda d, by=by: sort_values(d, by, strategy="memory"),
                    "dask": lambda d, by=by: d.sort_values(by if len(by) > 1 else by[0]),
                }
                times = {c: [] for c in cases}
                for i in range(a.repeat + 1):  # the first round warms the workers up
                    for c in list(cases)[:: 1 if i % 2 else -1]:
                        with get_task_stream() as stream:
                            t = time.perf_counter()
                            out = cases[c](fresh(df, i)).persist()
                            wait(out)
                            dt = time.perf_counter() - t
                        if a.timeline and i == a.repeat:
                            timeline(f"{c} by {','.join(by)}, {dt:.2f} s", stream.data)
                        if i:
                            times[c].append(dt)
                        if i == 1:
                            got = out.compute()
                            expected = pdf.sort_values(by, kind="stable")
                            if c == "dask":  # dask's sort is not stable: compare the keys only
                                assert (got[by].to_numpy() == expected[by].to_numpy()).all(), c
                            else:
                                pd.testing.assert_frame_equal(got, expected, check_dtype=False)
                        del out
                med = {c: statistics.median(t) for c, t in times.items()}
                for c in cases:
                    rows.append({"by": ",".join(by), "case": c, "median s": f"{med[c]:.2f}", "vs dask": f"{med['dask'] / med[c]:.2f}x"})
                    print(rows[-1], flush=True)
    write_json(a.json, rows, rows_=n, parts=a.parts, repeat=a.repeat)
    print_table(rows, ["by", "case", "median s", "vs dask"])


def _make(i, rows, seed=0):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng([seed, i])
    return pd.DataFrame({"k": rng.integers(0, 1 << 62, rows), "v": rng.integers(0, 1 << 62, rows)})


def _summary(part):
    """(rows, key sum mod 2^64, sorted inside, first key, last key) of an output partition."""
    import numpy as np

    k = part["k"].to_numpy()
    if not len(k):
        return 0, 0, True, None, None
    return len(k), int(k.view(np.uint64).sum(dtype=np.uint64)), bool((k[1:] >= k[:-1]).all()), int(k[0]), int(k[-1])


def _check(out, expected) -> None:
    import dask

    got = dask.compute(*[dask.delayed(_summary)(p) for p in out.to_delayed()])
    rows = sum(g[0] for g in got)
    total = sum(g[1] for g in got) % (1 << 64)
    ends = [(g[3], g[4]) for g in got if g[0]]
    in_order = all(g[2] for g in got) and all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))
    assert (rows, total) == expected and in_order, ("wrong output", rows, total, expected, in_order)


class _OneGPU(WorkerPlugin):
    """A worker plugin: worker ``i`` (by name) works on GPU ``i mod gpus`` (its device 0, set before
    CUDA starts in that process), so several worker processes share each GPU; it sees the others
    after it, as dask-cuda's workers do (so it can open the runs kept on them)."""

    name = "dsort-bench-one-gpu"

    def __init__(self, gpus):
        self.gpus = gpus

    def setup(self, worker):
        import os

        first = int(worker.name) % self.gpus
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str((first + k) % self.gpus) for k in range(self.gpus))


def _same(part):
    return part


def fresh(df, i):
    """The same frame under new task names: a result of an earlier round still held by the
    scheduler (its release is asynchronous) would otherwise be found instead of computed."""
    return df.map_partitions(_same, token=f"bench-{i}-{time.time_ns()}", enforce_metadata=False)  # unchecked: cudf is slow to check


def _timed(fn, repeat, check, title=None, client=None):
    """Median seconds of ``repeat`` rounds of ``fn(i).persist()`` after a checked warm-up round;
    with ``title``, the last round's task phases are printed (:func:`timeline`), and with
    ``client`` too, its tasks' stages (:func:`stages`)."""
    import statistics

    from distributed import get_task_stream, wait

    times = []
    for i in range(repeat + 1):  # the first round warms the workers up (and is checked)
        with get_task_stream() as stream:
            start = time.time()
            t = time.perf_counter()
            out = fn(i).persist()
            wait(out)
            dt = time.perf_counter() - t
        if i:
            times.append(dt)
        else:
            check(out)
        if title and i == repeat:
            timeline(f"{title}, {dt:.2f} s", stream.data)
            if client is not None:
                stages(client, start)
        del out
    return statistics.median(times)


def _make_gpu(i, rows, seed=0):
    """Partition ``i`` as a cudf frame made on the GPU (int64 key and payload)."""
    import cudf
    import cupy

    rng = cupy.random.RandomState(seed * 1_000_003 + i + 1)
    return cudf.DataFrame({"k": rng.randint(0, 1 << 62, rows, dtype=cupy.int64), "v": rng.randint(0, 1 << 62, rows, dtype=cupy.int64)})


def beyond_case(a, n, parts, sizes, workers, client) -> list:
    """A dask-cudf frame made as it is read (never whole in GPU memory) sorted by dsort twice: its
    runs within the GPU's share, then with ``device_memory_limit`` at 1/``a.beyond`` of the frame's
    bytes (the runs beyond it go to files); both checked (count, key sum, order)."""
    import dask
    import dask.dataframe as dd

    from dsort.dataframe import sort_values

    lazy = dd.from_map(_make_gpu, list(range(parts)), sizes, meta=_make_gpu(0, 0), enforce_metadata=False)
    got = dask.compute(*[dask.delayed(_summary)(p) for p in lazy.to_delayed()])
    expected = (sum(g[0] for g in got), sum(g[1] for g in got) % (1 << 64))
    limit = n * 16 // a.beyond  # the frame's bytes (two int64 columns) over a.beyond
    cases = {
        "dsort, cudf frames made lazily": lambda i: sort_values(fresh(lazy, i), "k"),
        f"dsort, lazy cudf frames, {a.beyond:g}x device_memory_limit": lambda i: sort_values(
            fresh(lazy, i), "k", device_memory_limit=limit
        ),
    }
    rows = []
    for case, fn in cases.items():
        t = _timed(fn, a.repeat, lambda out: _check(out, expected), a.timeline and case, client)
        rows.append({"case": case, "workers": workers, "median s": t})
        print(rows[-1], f"(limit {limit / 2**30:.2f} GiB)" if "limit" in case else "", flush=True)
    return rows


def gpu_case(a) -> None:
    import dask
    import dask.dataframe as dd
    from distributed import Client, LocalCluster, wait

    from dsort.dataframe import sort_values

    n, parts = int(a.rows), a.parts
    sizes = [n // parts + (i < n % parts) for i in range(parts)]
    expected_sum = sum(int(_make(i, m)["k"].to_numpy().view("u8").sum(dtype="u8")) for i, m in enumerate(sizes)) % (1 << 64)
    expected = (n, expected_sum)
    rows = []

    def frame():
        df = dd.from_map(_make, list(range(parts)), sizes, meta=_make(0, 0), enforce_metadata=False).persist()
        wait(df)
        return df

    wanted = [c for c in a.cpu_cases.split(",") if c]
    with dask.config.set({"distributed.worker.memory.target": False, "distributed.worker.memory.spill": False}):
        if wanted:
            with LocalCluster(n_workers=a.cpu_workers, threads_per_worker=a.cpu_threads, dashboard_address=":0", memory_limit=0) as cluster:
                with Client(cluster):
                    df = frame()
                    cpu = {
                        "dask": lambda i: fresh(df, i).sort_values("k"),
                        "dsort (CPU)": lambda i: sort_values(fresh(df, i), "k"),
                    }
                    cpu = {k: v for k, v in cpu.items() if k.split()[0] in wanted}
                    for name, fn in cpu.items():
                        t = _timed(fn, a.repeat, lambda out: _check(out, expected), a.timeline and name)
                        rows.append({"case": name, "workers": f"{a.cpu_workers} x {a.cpu_threads} CPU threads", "median s": t})
                        print(rows[-1], flush=True)
                    del df
        try:
            from dask_cuda import LocalCUDACluster
        except ImportError:
            LocalCUDACluster = None
            print("no dask_cuda here: the GPU case is left out", flush=True)
        if LocalCUDACluster is not None:
            if a.per_gpu > 1:  # several worker processes per GPU (the host work is theirs): each sees one GPU
                import cupy

                gpus = cupy.cuda.runtime.getDeviceCount()
                cluster = LocalCluster(n_workers=gpus * a.per_gpu, threads_per_worker=a.gpu_threads, dashboard_address=":0", memory_limit=0)
            else:
                rmm = {"async": dict(rmm_async=True), "pool": dict(rmm_pool_size=a.rmm_pool)}.get(a.rmm, {})
                cluster = LocalCUDACluster(threads_per_worker=a.gpu_threads, dashboard_address=":0", memory_limit=0, **rmm)
            with cluster, Client(cluster) as client:
                if a.per_gpu > 1:
                    client.register_plugin(_OneGPU(gpus))
                gpus = len({w.get("name") for w in client.scheduler_info()["workers"].values()}) // max(a.per_gpu, 1)
                df = frame()
                workers = f"{gpus} GPUs x {a.per_gpu} processes x {a.gpu_threads} threads" + (f", rmm {a.rmm}" if a.rmm != "none" else "")
                for strategy in [s for s in a.gpu_strategies.split(",") if s]:
                    if strategy == "floor":  # the input's own tasks, which any sort of it runs first (unsorted: not checked)
                        case, check = "floor: the input's tasks alone", lambda out: None
                        fn = lambda i: fresh(df, i)  # noqa: E731
                    else:
                        case, check = (
                            "dsort device='gpu'" + ("" if strategy == "auto" else f" {strategy}"),
                            lambda out: _check(out, expected),
                        )
                        fn = lambda i, s=strategy: sort_values(fresh(df, i), "k", device="gpu", strategy=s)  # noqa: E731
                    t = _timed(fn, a.repeat, check, a.timeline and case, client)
                    rows.append({"case": case, "workers": workers, "median s": t})
                if a.cudf:  # the same rows as cudf partitions on the GPUs: dask-cudf's own sorts, and dsort's
                    gdf = df.to_backend("cudf")
                    if a.cudf_strings:  # the payload as decimal strings too (1 to 19 characters)
                        gdf = gdf.assign(s=gdf["v"].astype(str))
                    gdf = gdf.persist()
                    wait(gdf)
                    kind = ", a string column" if a.cudf_strings else ""
                    cases = {
                        "default": (f"dask-cudf sort_values{kind}", lambda i: fresh(gdf, i).sort_values("k")),
                        "tasks": (f"dask-cudf sort_values tasks{kind}", lambda i: fresh(gdf, i).sort_values("k", shuffle_method="tasks")),
                        "dsort": (f"dsort, cudf frames{kind}", lambda i: sort_values(fresh(gdf, i), "k")),
                        "memory": (f"dsort memory, cudf frames{kind}", lambda i: sort_values(fresh(gdf, i), "k", strategy="memory")),
                    }
                    for case, fn in [cases[c] for c in a.cudf_cases.split(",") if c]:
                        t = _timed(fn, a.repeat, lambda out: _check(out, expected), a.timeline and case, client)
                        rows.append({"case": case, "workers": workers, "median s": t})
                        print(rows[-1], flush=True)
                    del gdf
                if a.cudf and a.beyond:  # issue 28 item 2: cudf partitions made as they are read, runs beyond a GPU limit
                    rows += beyond_case(a, n, parts, sizes, workers, client)
    base = rows[0]["median s"] if rows and rows[0]["case"] == "dask" else None
    peer = min((r["median s"] for r in rows if r["case"].startswith("dask-cudf")), default=None)
    for r in rows:
        r["vs dask"] = f"{base / r['median s']:.2f}x" if base else "-"
        r["vs dask-cudf's best"] = f"{peer / r['median s']:.2f}x" if peer else "-"
        r["median s"] = f"{r['median s']:.2f}"
    write_json(a.json, rows, rows_=n, parts=parts, repeat=a.repeat)
    print_table(rows, ["case", "workers", "median s", "vs dask"] + (["vs dask-cudf's best"] if peer else []))


if __name__ == "__main__":
    main()
