"""The client side of tests/test_hosts.py, run on the scheduler's stand-in host: sorts arrays and
frames on a cluster whose workers share nothing with it or with each other, compares each result
with NumPy's or pandas' stable sort, and prints one line a case (``CASE ok`` or ``CASE WRONG
...``). The last case asks the test to kill a whole worker host while the merges run: it prints
``KILL`` and waits for a line on its standard input before it goes on.

    python tests/hosts_client.py tcp://10.0.0.1:8786
"""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pandas as pd


def main(address: str) -> int:
    import dask
    import dask.array as da
    import dask.dataframe as dd
    from distributed import Client, wait

    import dsort
    from dsort.dataframe import set_index, sort_values

    # runs of any size: the small inputs here make several runs on each host, read across them
    dask.config.set({"dsort.scale.min-run": 1, "dsort.scale.gpu-min-run": 1})
    client = Client(address, timeout=30)
    client.wait_for_workers(2, timeout=60)
    rng = np.random.default_rng(42)
    failed = 0

    def report(case, ok, why=""):
        nonlocal failed
        failed += not ok
        print(f"{case} {'ok' if ok else 'WRONG ' + why}", flush=True)

    # arrays, in memory and external (runs on each worker's own disk, slices asked of it)
    keys = np.concatenate([rng.integers(-50, 50, 30_000), [0] * 500, rng.standard_normal(9_500)]).astype(np.float64)
    keys[::997] = np.nan
    x = da.from_array(keys, chunks=4_000).persist()
    wait(x)
    for strategy in ("multiway", "external"):
        got = dsort.sort(x, strategy=strategy).compute()
        report(f"array-{strategy}", np.array_equal(got, np.sort(keys, kind="stable"), equal_nan=True))

    # frames, in memory and external, and set_index
    n = 60_000
    df = pd.DataFrame({"k": rng.integers(0, 700, n), "v": np.arange(n), "s": rng.integers(0, 10**6, n).astype(str).astype(object)})
    ddf = dd.from_pandas(df, npartitions=12, sort=False).persist()
    wait(ddf)
    base = ddf.compute()
    for strategy in ("memory", "external"):
        got = sort_values(ddf, "k", strategy=strategy).compute()
        ok = got.equals(base.sort_values("k", kind="stable"))
        report(f"frame-{strategy}", ok, "" if ok else f"{len(got)} rows")
    got = set_index(ddf, "k").compute()
    ok = got.equals(base.set_index("k").sort_index(kind="stable"))
    report("set_index", ok)

    # a whole host lost while the merges of an external frame sort run
    n = 600_000
    big = pd.DataFrame({"k": rng.integers(0, 5_000, n), "v": np.arange(n)})
    bddf = dd.from_pandas(big, npartitions=24, sort=False).persist()
    wait(bddf)
    bbase = bddf.compute()
    done = {}

    def sort():
        try:
            done["got"] = sort_values(bddf, "k", strategy="external", npartitions=24).compute()
        except Exception as e:  # noqa: BLE001 (reported below)
            done["error"] = e

    job = threading.Thread(target=sort)
    job.start()
    killed, deadline = False, time.time() + 60
    while job.is_alive() and time.time() < deadline:
        if any("dsort-merge" in str(k) for keys in client.processing().values() for k in keys):
            print("KILL", flush=True)
            sys.stdin.readline()  # the test has killed the host's processes
            killed = True
            break
        time.sleep(0.005)
    job.join(240)
    if not killed:
        report("host-lost", False, "the sort ended before a host could be lost: make it longer")
    elif job.is_alive():
        report("host-lost", False, "no result 240 s after the host was lost")
    elif "error" in done:
        report("host-lost", False, f"{type(done['error']).__name__}: {done['error']}")
    else:
        report("host-lost", done["got"].equals(bbase.sort_values("k", kind="stable")))
    client.close()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
