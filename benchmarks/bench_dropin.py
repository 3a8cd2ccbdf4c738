"""A dask pipeline with and without dsort under it (``dsort.enabled()``), same workers, same data.

The pipeline a dask user writes before a join: ``left.set_index("id").join(right.set_index("id"))``
(two persisted frames of int64 ids, ``--rows`` and ``--rows / 4`` rows, ``--parts`` partitions),
then ``len()`` of the join; and a frame sort, ``df.sort_values("k")`` persisted, called through dask's
method with the switch on against ``dsort.dataframe.sort_values`` called directly (what the switch
itself costs). Cases are timed in alternation, each round under fresh task names; medians of
``--repeat`` rounds after a warm-up; every round's results checked against the other case's (the
join's length and its value sums; the sort's row count and key order).

    python benchmarks/bench_dropin.py --rows 2e6 --parts 16,512 --workers 2 --threads 1 --json out.json

The markdown table is printed last; ``--json PATH`` writes the rows too.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(Path(__file__).resolve().parent.parent))  # after PYTHONPATH (scripts/gpu-ab)
from _common import print_table, write_json  # noqa: E402


def _same(part):
    return part


PEERS = {"join, dsort.enabled()": "join, dask's set_index", "sort_values, dsort.enabled()": "dsort.dataframe.sort_values"}


def _fresh(df, tag):
    """The same frame under new task names (an earlier round's results are not found instead)."""
    return df.map_partitions(_same, token=f"bench-{tag}-{time.time_ns()}")


def _join(left, right, on, tag):
    """The pipeline: both frames indexed by id, joined; its length and value sums computed."""
    import contextlib

    import dask

    import dsort

    with dsort.enabled() if on else contextlib.nullcontext():
        joined = _fresh(left, tag).set_index("id").join(_fresh(right, tag).set_index("id"), how="inner")
        return dask.compute(joined.shape[0], joined.x.sum(), joined.y.sum())


def _sort(left, through_dask, tag):
    """``left`` sorted by k and persisted: through dask's method with the switch on, or dsort's directly."""
    from distributed import wait

    import dsort
    from dsort.dataframe import sort_values

    if through_dask:
        with dsort.enabled():
            out = _fresh(left, tag).sort_values("k")
    else:
        out = sort_values(_fresh(left, tag), "k")
    out = out.persist()
    wait(out)
    return out


def _frames(n, parts, seed=0):
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    def left(i):
        rng = np.random.default_rng(seed + i)
        m = n // parts + (i < n % parts)
        return pd.DataFrame({"id": rng.integers(0, n // 4, m), "k": rng.integers(-(2**62), 2**62, m), "x": rng.random(m)})

    def right(i):
        m = (n // 4) // parts + (i < (n // 4) % parts)
        start = i * ((n // 4) // parts) + min(i, (n // 4) % parts)
        return pd.DataFrame({"id": np.arange(start, start + m)[::-1], "y": np.arange(m, dtype=np.float64)})

    return dd.from_map(left, range(parts)), dd.from_map(right, range(parts))


def main(argv=None) -> None:
    from distributed import Client, LocalCluster, wait

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=float, default=2e6)
    p.add_argument("--parts", default="16,512", help="partition counts, comma separated")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--threads", type=int, default=1, help="threads per worker")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args(argv)
    n = int(a.rows)
    rows = []
    with LocalCluster(n_workers=a.workers, threads_per_worker=a.threads, dashboard_address=":0") as cluster, Client(cluster):
        for parts in [int(x) for x in a.parts.split(",")]:
            left, right = _frames(n, parts)
            left, right = left.persist(), right.persist()
            wait([left, right])

            cases = {
                "join, dask's set_index": functools.partial(_join, left, right, False),
                "join, dsort.enabled()": functools.partial(_join, left, right, True),
                "sort_values, dsort.enabled()": functools.partial(_sort, left, True),
                "dsort.dataframe.sort_values": functools.partial(_sort, left, False),
            }
            times = {name: [] for name in cases}
            for i in range(a.repeat + 1):
                got = {}
                for name in cases if i % 2 == 0 else list(cases)[::-1]:
                    t = time.perf_counter()
                    got[name] = cases[name](f"{i}-{name}")
                    if i:
                        times[name].append(time.perf_counter() - t)
                j0, j1 = got["join, dask's set_index"], got["join, dsort.enabled()"]
                assert j0[0] == j1[0] and all(abs(x - y) <= 1e-6 * max(1.0, abs(x)) for x, y in zip(j0[1:], j1[1:])), (j0, j1)
                s0, s1 = (got[k].k.compute() for k in ("sort_values, dsort.enabled()", "dsort.dataframe.sort_values"))
                assert len(s0) == n and s0.is_monotonic_increasing and (s0.to_numpy() == s1.to_numpy()).all()
                del got
            med = {name: statistics.median(t) for name, t in times.items()}
            for name, t in med.items():
                peer = PEERS.get(name)
                rows.append(
                    {
                        "partitions": parts,
                        "case": name,
                        "median s": round(t, 3),
                        "vs": f"{med[peer] / t:.2f}x {peer}" if peer else "",
                    }
                )
                print(rows[-1], flush=True)
            del left, right
    write_json(a.json, rows, rows_=n, workers=a.workers, threads=a.threads, repeat=a.repeat)
    print(f"\n{n:,} rows (right: {n // 4:,}), {a.workers} workers x {a.threads} threads, median of {a.repeat}")
    print_table(rows, ["partitions", "case", "median s", "vs"])


if __name__ == "__main__":
    main()
