"""A dask array bigger than the memory the sort may use, sorted and written with ``da.store``.

Each case runs in its own process (so peak resident memory is its own): ``n`` random int64 made
chunk by chunk by ``da.random`` (never whole in memory), sorted by dsort, and stored into a
memory-mapped ``.npy`` file by ``da.store``; the output is checked. Cases:

* ``external``: ``strategy="external"`` (runs in the run store: ``--memory-limit`` bytes of host
  memory, the rest on disk under ``--dir``);
* ``multiway``: the in-memory graph (every sorted chunk held by dask until the merges are done);
* ``numpy``: the peer on one machine: ``np.sort`` of the whole array in memory, then written.

``--frame``: a dask dataframe instead (int64 key, float64, 8-character string; about 32 bytes a
row in memory), sorted by the key and written with ``to_parquet``: cases ``external``
(``dsort.dataframe.sort_values(strategy="external")``), ``auto`` (dsort's in-memory dataframe
sort) and ``dask`` (``ddf.sort_values``, the peer).

``--gpu``: CuPy chunks (``da.random`` on the host, each chunk moved to the GPU), sorted on the GPU.

    python benchmarks/bench_external.py --n 1e8 --chunk 4e6 --memory-limit 0 --json out.json

The markdown table is printed last; ``--json PATH`` writes the rows too.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def one_frame(case: str, n: int, chunk: int, memory_limit, directory: str, threads: int) -> dict:
    """A dask dataframe case in this process: ``n`` rows (int64 key, float64, an 8-character
    string) made per partition, sorted by the key and written with ``to_parquet``."""
    import shutil

    import dask
    import dask.dataframe as dd
    import numpy as np
    import pandas as pd

    sys.path.insert(0, str(ROOT))
    from dsort.dataframe import sort_values

    def part(i):
        rng = np.random.default_rng(i)
        m = min(chunk, n - i * chunk)
        letters = rng.integers(97, 123, (m, 8), dtype=np.uint8).view("S8").reshape(-1).astype(str)
        return pd.DataFrame({"k": rng.integers(0, 1 << 62, m), "v": rng.random(m), "s": letters})

    parts = -(-n // chunk)
    meta = part(0).iloc[:0]
    df = dd.from_delayed([dask.delayed(part)(i) for i in range(parts)], meta=meta, verify_meta=False)
    path = os.path.join(directory, f"{case}.parquet")
    t = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=threads):
        if case == "dask":
            out = df.sort_values("k")
        else:
            out = sort_values(
                df, "k", strategy="external" if case == "external" else "auto", local_directory=directory, memory_limit=memory_limit
            )
        out.to_parquet(path, write_index=False, name_function=lambda i: f"part-{i:06d}.parquet")  # names in order
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    keys = pd.read_parquet(path, columns=["k"])["k"].to_numpy()
    ok = bool(len(keys) == n and np.all(keys[1:] >= keys[:-1]))
    shutil.rmtree(path)
    left = sorted(os.listdir(directory))
    return {"wall": wall, "sorted": ok, "left behind": left, "peak": peak}


def one(case: str, n: int, chunk: int, memory_limit, directory: str, threads: int, gpu: bool) -> dict:
    """One case in this process: seconds, and the output checked."""
    import dask
    import dask.array as da
    import numpy as np

    sys.path.insert(0, str(ROOT))
    import dsort

    path = os.path.join(directory, f"{case}.npy")
    np.lib.format.open_memmap(path, mode="w+", dtype=np.int64, shape=(n,)).flush()  # header + size
    out = _FileTarget(path)
    x = da.random.default_rng(7).integers(0, 1 << 62, n, chunks=chunk)
    if gpu and case != "numpy":
        import cupy

        x = x.map_blocks(cupy.asarray)
    t = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=threads):
        if case == "numpy":
            out[0:n] = np.sort(x.compute())
        else:
            s = dsort.sort(x, strategy=case, memory_limit=memory_limit, local_directory=directory)
            if gpu:
                s = s.map_blocks(cupy.asnumpy)  # noqa: F821 (imported above for the GPU cases)
            da.store(s, out, lock=False)
        os.fsync(out.fd)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    got = np.load(path, mmap_mode="r")
    ok = bool(np.all(got[1:] >= got[:-1]))
    left = sorted(p for p in os.listdir(directory) if not p.endswith(".npy"))
    os.unlink(path)
    return {"wall": wall, "sorted": ok, "left behind": left, "peak": peak}


class _FileTarget:
    """A ``da.store`` target writing each chunk at its offset of a ``.npy`` file (``pwrite``: the
    output's pages are not mapped into the process, so its resident size is the sort's own)."""

    def __init__(self, path):
        import numpy as np

        with open(path, "rb") as f:
            np.lib.format.read_magic(f)
            np.lib.format.read_array_header_1_0(f)
            self.start = f.tell()
        self.fd = os.open(path, os.O_WRONLY)

    def __setitem__(self, key, value):
        import numpy as np

        first = key[0].start if isinstance(key, tuple) else key.start
        data, done = memoryview(np.ascontiguousarray(value).view(np.uint8)).cast("B"), 0
        while done < len(data):  # one write call moves at most 2 GiB
            done += os.pwrite(self.fd, data[done:], self.start + (first or 0) * 8 + done)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=float, default=2e7)
    p.add_argument("--chunk", type=float, default=1e6)
    p.add_argument("--memory-limit", default="0", help="the external case's run store in memory (0: all runs on disk)")
    p.add_argument("--cases", default="external,multiway,numpy")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--dir", default=None, help="where the runs and outputs go (default: a temporary directory)")
    p.add_argument("--gpu", action="store_true")
    p.add_argument(
        "--frame",
        action="store_true",
        help="a dask dataframe written with to_parquet; cases external, auto (dsort's in-memory dataframe sort) and dask (ddf.sort_values)",
    )
    p.add_argument("--json")
    p.add_argument("--one", help=argparse.SUPPRESS)
    a = p.parse_args()
    n, chunk = int(a.n), int(a.chunk)
    limit = int(a.memory_limit) if a.memory_limit.isdigit() else a.memory_limit
    if a.one:
        if a.frame:
            print(json.dumps(one_frame(a.one, n, chunk, limit, a.dir, a.threads)))
        else:
            print(json.dumps(one(a.one, n, chunk, limit, a.dir, a.threads, a.gpu)))
        return
    directory = a.dir or tempfile.mkdtemp(prefix="dsort-bench-external-")
    os.makedirs(directory, exist_ok=True)
    rows = []
    for case in a.cases.split(","):
        cmd = (
            [
                sys.executable,
                __file__,
                "--one",
                case,
                "--n",
                str(n),
                "--chunk",
                str(chunk),
                "--memory-limit",
                a.memory_limit,
                "--threads",
                str(a.threads),
                "--dir",
                directory,
            ]
            + (["--gpu"] if a.gpu else [])
            + (["--frame"] if a.frame else [])
        )
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            print(r.stderr[-3000:], file=sys.stderr)
            rows.append({"case": case, "wall s": "failed"})
            continue
        res = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append(
            {
                "case": case,
                "wall s": f"{res['wall']:.2f}",
                "peak RSS MiB": res["peak"] // 1024,
                "data MiB": n * (32 if a.frame else 8) >> 20,
                "sorted": res["sorted"],
                "left behind": len(res["left behind"]),
            }
        )
        print(rows[-1], flush=True)
    write_json(a.json, rows, n=n, chunk=chunk, memory_limit=a.memory_limit, threads=a.threads, gpu=a.gpu)
    print_table(rows, ["case", "wall s", "peak RSS MiB", "data MiB", "sorted", "left behind"])


if __name__ == "__main__":
    main()
