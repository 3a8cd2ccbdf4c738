"""Sort a dask array on a LocalCUDACluster: one worker per GPU, the NumPy chunks sorted on the
workers' GPUs (``device="gpu"``) and handed back as NumPy chunks. Without a GPU it runs on a
LocalCluster of CPU workers and says so. Start from it:

    python deploy/array_sort.py [N]
"""

import importlib.util
import sys
import time

import dask.array as da
from distributed import Client

import dsort
from dsort.cluster import local_cuda_cluster
from dsort.engine.device import has_gpu


def main(n: int = 10_000_000) -> None:
    x = da.random.default_rng(0).integers(0, 1 << 40, n, chunks=max(n // 8, 1))
    # UCX and an RMM pool speed up transfers between GPUs (README); TCP is the default
    pool = dict(rmm_pool_size=0.25, rmm_allocator_external_lib_list=["cupy"]) if importlib.util.find_spec("rmm") else {}
    with local_cuda_cluster(**pool) as cluster, Client(cluster) as client:
        device = "gpu" if all(client.run(has_gpu).values()) else None  # NumPy chunks to the workers' GPUs
        t = time.perf_counter()
        s = dsort.sort(x, device=device).persist()
        keys, values = dsort.sort_by_key(x, x * 2, descending=True, device=device)  # values follow their keys
        ok = ((s[1:] >= s[:-1]).all() & (keys[1:] <= keys[:-1]).all() & (values == keys * 2).all()).compute()
        print(
            f"sorted {n:,} int64 in {len(x.chunks[0])} chunks on {len(client.scheduler_info()['workers'])} workers "
            f"(device={device}) in {time.perf_counter() - t:.2f} s: {s[:3].compute()} ... {s[-3:].compute()}"
        )
        if not ok:
            sys.exit("FAILED: out of order")
        print("OK: in order, ascending and by key descending")


if __name__ == "__main__":
    main(int(float(sys.argv[1])) if len(sys.argv) > 1 else 10_000_000)
