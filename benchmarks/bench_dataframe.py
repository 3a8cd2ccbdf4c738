"""dsort's dataframe sorts against dask's own ``ddf.sort_values``, as issue 11 measures them.

A persisted frame of ``--rows`` rows (int64 key, float64, an 8-character string) in ``--parts``
partitions on a ``LocalCluster(n_workers=2, threads_per_worker=1)``; each case sorts it and
persists the result (timed: build + persist + wait), by an int64 key, a string key and two keys.
Cases: ``external`` (dsort, runs on disk), ``memory`` (dsort's in-memory sort) and ``dask``
(``ddf.sort_values``). Medians of ``--repeat`` runs, in alternation; every result is checked
against pandas' stable sort of the same frame.

    python benchmarks/bench_dataframe.py --rows 4e6 --parts 8 --json out.json

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
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import print_table, write_json  # noqa: E402


def main() -> None:
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd
    from distributed import Client, LocalCluster, wait

    from dsort.dataframe import sort_values

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=float, default=4e6)
    p.add_argument("--parts", type=int, default=8)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    n = int(a.rows)
    rng = np.random.default_rng(0)
    letters = rng.integers(97, 123, (n, 8), dtype=np.uint8).view("S8").reshape(-1).astype(str)
    pdf = pd.DataFrame({"k": rng.integers(0, 1 << 62, n), "v": rng.random(n), "s": letters})
    rows = []
    with tempfile.TemporaryDirectory() as runs, LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=":0") as cluster:
        with Client(cluster):
            df = dd.from_pandas(pdf, npartitions=a.parts, sort=False).persist()
            wait(df)
            for by in (["k"], ["s"], ["s", "k"]):
                cases = {
                    "external": lambda by=by: sort_values(df, by, strategy="external", local_directory=runs),
                    "memory": lambda by=by: sort_values(df, by, strategy="memory"),
                    "dask": lambda by=by: df.sort_values(by if len(by) > 1 else by[0]),
                }
                times = {c: [] for c in cases}
                for i in range(a.repeat + 1):  # the first round warms the workers up
                    for c in list(cases)[:: 1 if i % 2 else -1]:
                        t = time.perf_counter()
                        out = cases[c]().persist()
                        wait(out)
                        dt = time.perf_counter() - t
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


if __name__ == "__main__":
    main()
