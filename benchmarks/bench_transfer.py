"""Worker-to-worker transfer of one chunk, the cost behind a multi-GPU sort's exchange.

    python benchmarks/bench_transfer.py [--protocols tcp,ucx] [--mib 1024] [--repeat 3] [--json out.json]

For each protocol, a ``LocalCUDACluster`` of 2 workers (one per GPU) is started; a chunk of
``--mib`` MiB is made on worker 0 (a CuPy array on its GPU, then a NumPy array in its host memory)
and worker 1 fetches it (a task there that depends on it; the time from submit to its result).
Peer in the same run: a device-to-device copy of the same bytes on one GPU, and a host-to-device
copy (pageable), the yardsticks of what the exchange could cost. The table comes last.
"""

from __future__ import annotations

import argparse
import statistics
import time

from _common import print_table, write_json


def _make(nbytes, on_gpu, seed):
    import numpy as np

    x = np.random.default_rng(seed).integers(0, 2**62, nbytes // 8, dtype=np.int64)
    if on_gpu:
        import cupy

        return cupy.asarray(x)
    return x


def _touch(x):
    """A task on the receiving worker: the array's length (the transfer happened before it ran)."""
    return int(len(x))


def fetch_times(client, nbytes, on_gpu, repeat):
    a, b = list(client.scheduler_info()["workers"])[:2]
    times = []
    for i in range(repeat + 1):
        src = client.submit(_make, nbytes, on_gpu, i, workers=[a], pure=False)
        client.submit(_touch, src, workers=[a], pure=False).result()  # made, and still on worker 0
        t = time.perf_counter()
        n = client.submit(_touch, src, workers=[b], allow_other_workers=False, pure=False).result()
        dt = time.perf_counter() - t
        assert n == nbytes // 8
        if i:  # the first transfer also makes the connection and any IPC mapping
            times.append(dt)
        del src
    return statistics.median(times)


def local_copies(nbytes, repeat):
    import cupy
    import numpy as np

    d = cupy.empty(nbytes // 8, np.int64)
    h = np.ones(nbytes // 8, np.int64)
    out = {}
    for name, fn in (("device-to-device copy (1 GPU)", lambda: d.copy()), ("host-to-device copy, pageable", lambda: cupy.asarray(h))):
        ts = []
        for _ in range(repeat + 1):
            cupy.cuda.Device().synchronize()
            t = time.perf_counter()
            fn()
            cupy.cuda.Device().synchronize()
            ts.append(time.perf_counter() - t)
        out[name] = statistics.median(ts[1:])
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--protocols", default="tcp,ucx")
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--json")
    args = p.parse_args(argv)
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from dsort.cluster import ucx_options

    nbytes = args.mib << 20
    rows = []
    for name, dt in local_copies(nbytes, args.repeat).items():
        rows.append({"what": name, "protocol": "", "MiB": args.mib, "s": round(dt, 4), "GB/s": round(nbytes / dt / 1e9, 1)})
        print(rows[-1], flush=True)
    for protocol in args.protocols.split(","):
        try:
            extra = ucx_options(protocol, "8GB")
            with LocalCUDACluster(CUDA_VISIBLE_DEVICES=[0, 1], dashboard_address=":0", **extra) as cluster, Client(cluster) as client:
                if protocol == "ucx":
                    import ucxx  # noqa: F401

                    transports = client.run(lambda: __import__("ucxx").get_active_transports())
                    print("UCX transports:", transports, flush=True)
                for on_gpu, what in ((True, "CuPy chunk, GPU 0 -> GPU 1"), (False, "NumPy chunk, worker 0 -> worker 1")):
                    dt = fetch_times(client, nbytes, on_gpu, args.repeat)
                    rows.append(
                        {"what": what, "protocol": protocol, "MiB": args.mib, "s": round(dt, 4), "GB/s": round(nbytes / dt / 1e9, 2)}
                    )
                    print(rows[-1], flush=True)
        except Exception as err:  # report and go on to the next protocol
            rows.append({"what": "failed", "protocol": protocol, "s": f"{type(err).__name__}: {err}"[:120]})
            print(rows[-1], flush=True)
    write_json(args.json, rows, benchmark="transfer")
    print()
    print_table(rows, ["what", "protocol", "MiB", "s", "GB/s"])


if __name__ == "__main__":
    main()
