"""Sort a dask dataframe by two columns on a LocalCUDACluster (one worker per GPU), like pandas'
stable ``sort_values``: :func:`dsort.dataframe.sort_values`. Without a GPU it runs on a
LocalCluster of CPU workers and says so. Start from it:

    python deploy/dataframe_sort.py [N]
"""

import sys
import time

import dask.dataframe as dd
import numpy as np
import pandas as pd
from distributed import Client

from dsort.cluster import local_cuda_cluster
from dsort.dataframe import sort_values


def main(n: int = 2_000_000) -> None:
    rng = np.random.default_rng(0)
    pdf = pd.DataFrame(
        {"city": rng.choice(["Oslo", "Lima", "Pune", "Kyiv"], n), "temp": rng.normal(15, 10, n).round(1), "id": np.arange(n)}
    )
    df = dd.from_pandas(pdf, npartitions=8)
    with local_cuda_cluster() as cluster, Client(cluster):
        t = time.perf_counter()
        out = sort_values(df, ["city", "temp"], ascending=[True, False]).compute()
        print(f"sorted {n:,} rows in {df.npartitions} partitions by city, then temp descending, in {time.perf_counter() - t:.2f} s")
        print(out.head(3).to_string())
    expected = pdf.sort_values(["city", "temp"], ascending=[True, False], kind="stable")
    if not np.array_equal(out["id"].to_numpy(), expected["id"].to_numpy()):  # the same rows in the same order
        sys.exit("FAILED: differs from pandas' stable sort")
    print("OK: equals pandas' stable sort")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 2_000_000)
