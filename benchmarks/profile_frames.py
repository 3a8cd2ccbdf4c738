"""Where a dataframe sort's host time goes: one dsort ``sort_values`` run on dask's synchronous
scheduler (one thread, every task in turn) under cProfile, the functions that took longest
printed last (own time and with callees). ``--cudf``: the partitions are cudf frames on the GPU
(dask-cudf); else pandas frames sorted with ``device="gpu"`` (``--cpu``: on the CPU).

    python benchmarks/profile_frames.py --cudf --rows 2**26 --parts 512 --top 40

The frame is made and persisted first, then sorted once to warm up (kernels, imports), then
sorted again under the profiler, checked (count, key sum, order) and timed.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    import dask
    import dask.dataframe as dd

    from bench_dataframe import _check, _make, _summary, fresh
    from dsort.dataframe import sort_values

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=lambda x: int(float(eval(x, {}))), default=1 << 22)
    p.add_argument("--parts", type=int, default=64)
    p.add_argument("--cudf", action="store_true")
    p.add_argument("--cpu", action="store_true", help="pandas frames sorted on the CPU (not device='gpu')")
    p.add_argument("--top", type=int, default=30)
    a = p.parse_args()
    n, parts = a.rows, a.parts
    sizes = [n // parts + (i < n % parts) for i in range(parts)]
    with dask.config.set(scheduler="sync"):
        df = dd.from_map(_make, list(range(parts)), sizes, meta=_make(0, 0), enforce_metadata=False)
        if a.cudf:
            df = df.to_backend("cudf")
        df = df.persist()
        got = dask.compute(*[dask.delayed(_summary)(q) for q in df.to_delayed()])
        expected = (sum(g[0] for g in got), sum(g[1] for g in got) % (1 << 64))
        device = None if a.cpu or a.cudf else "gpu"
        _check(sort_values(fresh(df, 0), "k", device=device).persist(), expected)  # warm up
        prof = cProfile.Profile()
        t = time.perf_counter()
        prof.enable()
        out = sort_values(fresh(df, 1), "k", device=device).persist()
        prof.disable()
        dt = time.perf_counter() - t
        _check(out, expected)
    kind = "cudf frames" if a.cudf else ("pandas frames, CPU" if a.cpu else "pandas frames, device='gpu'")
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(a.top)
        print(f"-- by {key}")
        print("\n".join(line for line in s.getvalue().splitlines() if line.strip()))
    print("| case | rows | partitions | seconds (synchronous, profiled) |\n| --- | --- | --- | --- |")
    print(f"| {kind} | {n} | {parts} | {dt:.2f} |")


if __name__ == "__main__":
    main()
