"""Dask frames read from Parquet, sorted by dsort and by dask, column type by column type (issue 44).

One Parquet file of ``--rows`` rows in ``--parts`` row groups: an int64 id, a float64 ``fare`` (the
key), an int32, a string, a list of int64 (0-4 values, some null), a struct of an int and a float,
and a decimal(12, 2). ``dd.read_parquet(..., split_row_groups=True)`` gives one partition a row
group; ``LocalCluster(--workers x --threads)``. Each case reads the columns it names and sorts by
``fare``: ``dsort.dataframe.sort_values`` against dask's ``sort_values`` in alternation (fresh task
names every round), persisted and waited for; medians of ``--repeat`` rounds after a checked
warm-up (row count, key order, the id column's sum).

    python benchmarks/bench_parquet_frames.py --rows 3e6 --parts 12 --workers 2 --threads 1 --json out.json

The markdown table is printed last (dsort's time, dask's, dsort faster by; and each case against
the numbers-only case's dsort time).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import print_table, timeline, write_json  # noqa: E402

CASES = {
    "numbers": ["id", "fare", "n"],
    "numbers + string": ["id", "fare", "n", "s"],
    "numbers + list": ["id", "fare", "n", "l"],
    "numbers + struct": ["id", "fare", "n", "st"],
    "numbers + decimal": ["id", "fare", "n", "dec"],
    "every column": ["id", "fare", "n", "s", "l", "st", "dec"],
}


def _decimals(units, typ):
    """A decimal column of ``typ`` whose unscaled values are the non-negative int64 ``units``: its
    128-bit little-endian words written at once, not value by value."""
    import numpy as np
    import pyarrow as pa

    words = np.zeros((len(units), 2), np.int64)
    words[:, 0] = units
    return pa.Array.from_buffers(typ, len(units), [None, pa.py_buffer(words.tobytes())])


def make(path: str, rows: int, parts: int, seed: int = 0) -> None:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, 5, rows)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    valid = rng.random(rows) > 0.05
    values = pa.array(rng.integers(0, 1000, int(offsets[-1])))
    lists = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, mask=pa.array(~valid))
    cents = rng.integers(0, 10**9, rows)
    table = pa.table(
        {
            "id": pa.array(np.arange(rows)),
            "fare": pa.array(rng.random(rows) * 100),
            "n": pa.array(rng.integers(0, 1000, rows).astype(np.int32)),
            "s": pa.array(rng.choice(np.array(["alpha", "beta", "gamma", "delta", "epsilon"]), rows)),
            "l": lists,
            "st": pa.StructArray.from_arrays([pa.array(rng.integers(0, 9, rows)), pa.array(rng.random(rows))], names=["a", "b"]),
            "dec": _decimals(cents, pa.decimal128(12, 2)),
        }
    )
    pq.write_table(table, path, row_group_size=-(-rows // parts))


def _same(part):
    return part


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=float, default=3e5)
    p.add_argument("--parts", type=int, default=12)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--cases", default=",".join(CASES), help="comma separated, of: " + ", ".join(CASES))
    p.add_argument("--timeline", action="store_true", help="print each sort's task groups in its last round (where the time went)")
    p.add_argument("--json", default=None)
    a = p.parse_args()

    import dask.dataframe as dd
    from distributed import Client, LocalCluster, get_task_stream, wait

    from dsort.dataframe import sort_values

    rows = int(a.rows)
    where = tempfile.mkdtemp(prefix="dsort-bench-parquet-")
    path = os.path.join(where, "t.parquet")
    t = time.perf_counter()
    make(path, rows, a.parts)
    mib = os.path.getsize(path) / 2**20
    print(f"made {rows:,} rows in {a.parts} row groups ({mib:.1f} MiB) in {time.perf_counter() - t:.1f} s", flush=True)
    out_rows = []
    with LocalCluster(n_workers=a.workers, threads_per_worker=a.threads, dashboard_address=":0") as cluster, Client(cluster):
        for case in [c for c in a.cases.split(",") if c]:
            frame = dd.read_parquet(path, columns=CASES[case], split_row_groups=True)
            expected = int(frame["id"].sum().compute())
            times = {"dsort": [], "dask": []}
            for i in range(a.repeat + 1):
                for who in ("dsort", "dask"):
                    fresh = frame.map_partitions(_same, token=f"bench-{who}-{i}-{time.time_ns()}")
                    with get_task_stream() as stream:
                        t = time.perf_counter()
                        res = (sort_values(fresh, "fare") if who == "dsort" else fresh.sort_values("fare")).persist()
                        wait(res)
                        dt = time.perf_counter() - t
                    if a.timeline and i == a.repeat:
                        timeline(f"{case}, {who}, {dt:.2f} s", stream.data)
                    if i == 0:  # the warm-up round, checked
                        got = res.compute()
                        assert len(got) == rows and got["fare"].is_monotonic_increasing and int(got["id"].sum()) == expected, (case, who)
                    else:
                        times[who].append(dt)
                    del res
            ours, theirs = statistics.median(times["dsort"]), statistics.median(times["dask"])
            out_rows.append({"case": case, "dsort s": ours, "dask s": theirs, "dsort faster by": f"{theirs / ours:.2f}x"})
            print(out_rows[-1], flush=True)
    base = next((r["dsort s"] for r in out_rows if r["case"] == "numbers"), None)
    for r in out_rows:
        r["vs numbers only"] = f"{r['dsort s'] / base:.2f}x" if base else "-"
        r["dsort s"], r["dask s"] = f"{r['dsort s']:.2f}", f"{r['dask s']:.2f}"
    write_json(a.json, out_rows, rows_=rows, parts=a.parts, workers=a.workers, threads=a.threads, repeat=a.repeat)
    print_table(out_rows, ["case", "dsort s", "dask s", "dsort faster by", "vs numbers only"])


if __name__ == "__main__":
    main()
