"""Small jobs: the whole ``dsort sort`` of small inputs, and tiny dask computes.

Files: Sort Benchmark records in the ASCII layout (so ``LC_ALL=C sort`` takes the same bytes) at
each of ``--sizes``; the whole command timed (process start to exit, median of ``--repeat``) on the
CPU (``--cpu``), on the GPU (``--gpu``, where one is visible) and with the default choice, with
GNU sort in the same run. The crossover is the smallest size at which ``--gpu`` beats ``--cpu``:
``dsort.file-sort.gpu-min-input`` should sit there.

Dask: ``dsort.sort`` of a 1,000-element float64 array in 4 chunks on the synchronous scheduler
(NumPy chunks, and CuPy chunks where a GPU is visible), median of ``--computes`` warm computes,
against the floor of any dask compute of the same graph size (``map_blocks(sort)`` of each
chunk): the difference is dsort's own time per compute. ``--profile DIR`` writes a cProfile of the
warm computes there.

    python benchmarks/bench_small.py --sizes 1e3,1e5,1e6 --repeat 3 --json small.json

The markdown tables are printed last; ``--json PATH`` writes the rows too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402
from bench_files import PY, ROOT, timed  # noqa: E402


def _median_command(cmd, env, repeat, log):
    times, text = [], ""
    for _ in range(repeat):
        dt, _, text = timed(cmd, env, log)
        times.append(dt)
    return statistics.median(times), text


def files(args, gpu: bool):
    work = Path(args.dir) if args.dir else Path(f"/tmp/dsort-bench-small-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LC_ALL="C", PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    from dsort.io import gen

    rows = []
    for n in (int(float(s)) for s in args.sizes.split(",")):
        src, out = work / f"in-{n}.txt", work / "out"
        gen.records(n, src, ascii=True)
        subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
        base = [PY, "-m", "dsort", "sort", src, out, "--overwrite"]
        cmds = {"cpu": base + ["--cpu"], "default": base}
        if gpu:
            cmds["gpu"] = base + ["--gpu"]
        cmds["GNU sort"] = ["sort", "-o", out, src]
        row = {"records": n, "MB": round(src.stat().st_size / 1e6, 3)}
        for name, cmd in cmds.items():
            dt, text = _median_command(cmd, env, args.repeat, args.log)
            row[f"{name} s"] = round(dt, 3)
            if name == "default":
                row["default on"] = "CPU" if "on the CPU" in text else "GPU"
            print({k: row[k] for k in row}, flush=True)
        best = min(row.get("gpu s", float("inf")), row["cpu s"])
        row["dsort best / GNU"] = f"{row['GNU sort s'] / best:.2f}x"
        if gpu:
            row["gpu / cpu"] = f"{row['gpu s'] / row['cpu s']:.2f}"
        rows.append(row)
        src.unlink()
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    crossover = next((r["records"] for r in rows if "gpu s" in r and r["gpu s"] < r["cpu s"]), None)
    return rows, crossover


def computes(args, gpu: bool):
    """Per-compute seconds of dsort.sort and of the map_blocks floor on 1,000 elements, 4 chunks."""
    import cProfile

    import dask
    import dask.array as da
    import numpy as np

    import dsort

    rows = []
    engines = ["numpy"] + (["cupy"] if gpu else [])
    for engine in engines:
        x = da.from_array(np.random.default_rng(0).random(1000), chunks=250)
        sort_chunk = np.sort
        if engine == "cupy":
            import cupy

            x = x.map_blocks(cupy.asarray)
            sort_chunk = cupy.sort
        calls = {
            "dsort.sort": lambda x=x: dsort.sort(x).compute(),
            "floor: map_blocks(sort)": lambda x=x, f=sort_chunk: x.map_blocks(f).compute(),
        }
        with dask.config.set(scheduler="sync"):
            for name, fn in calls.items():
                t = time.perf_counter()
                fn()
                first = time.perf_counter() - t
                times = []
                for _ in range(args.computes):
                    t = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t)
                warm = statistics.median(times)
                rows.append({"chunks": engine, "call": name, "first ms": round(first * 1e3, 1), "warm ms": round(warm * 1e3, 2)})
            if args.profile:
                Path(args.profile).mkdir(parents=True, exist_ok=True)
                prof = cProfile.Profile()
                prof.enable()
                for _ in range(args.computes):
                    calls["dsort.sort"]()
                prof.disable()
                prof.dump_stats(Path(args.profile) / f"compute-{engine}.prof")
        got, floor = rows[-2], rows[-1]
        got["dsort's own ms"] = round(got["warm ms"] - floor["warm ms"], 2)
        print(rows[-2:], flush=True)
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sizes", default="1e3,1e4,1e5,1e6,3e6", help="records per file, comma separated")
    p.add_argument("--repeat", type=int, default=3, help="runs of each command (the median is reported)")
    p.add_argument("--computes", type=int, default=20, help="warm dask computes (the median is reported)")
    p.add_argument("--parts", default="files,computes")
    p.add_argument("--dir", default=None, help="working directory (default: a new one under /tmp)")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--profile", default=None, help="write cProfile stats of the warm computes here")
    p.add_argument("--log", default=None, help="append every command's output here")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from dsort.engine.device import gpu_count

    gpu = gpu_count() > 0
    parts = args.parts.split(",")
    file_rows, crossover = files(args, gpu) if "files" in parts else ([], None)
    compute_rows = computes(args, gpu) if "computes" in parts else []
    write_json(args.json, file_rows + compute_rows, gpu=gpu, crossover_records=crossover, nproc=os.cpu_count())
    if file_rows:
        print()
        print(f"whole `dsort sort` commands, median of {args.repeat}; the GPU first beats the CPU at: {crossover or 'none of these sizes'}")
        cols = ["records", "MB", "cpu s", "gpu s", "default s", "default on", "GNU sort s", "dsort best / GNU", "gpu / cpu"]
        print_table(file_rows, cols)
    if compute_rows:
        print()
        print(f"1,000-element dsort.sort(x).compute() on the synchronous scheduler, 4 chunks, median of {args.computes}")
        print_table(compute_rows, ["chunks", "call", "first ms", "warm ms", "dsort's own ms"])


if __name__ == "__main__":
    main()
