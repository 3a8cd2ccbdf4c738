"""The CPU record checksum (valsort's sum of per-record CRC-32s): how fast, and does it scale with
threads?

    python benchmarks/bench_checksum.py [--records 4e6] [--width 100] [--threads 1,2,4,8,16] [--json out.json]

For each thread count, ``--records`` random records of ``--width`` bytes are split into as many
equal pieces and ``dsort.core.valsort.crc32_rows`` runs on each piece in its own thread (the sort
checksums its blocks that way). Peers in the same run: ``zlib.crc32`` over the whole buffer in one
call (a single stream at memory speed: what "memory speed" means here) and a Python loop of
``zlib.crc32`` per record (what a user would write). Every result is checked against the loop.
The table comes last; GB/s per thread is the figure to read.
"""

from __future__ import annotations

import argparse
import os
import zlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from _common import paired_times, print_table, write_json

from dsort.core import valsort
from dsort.engine import crc


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=float, default=4e6)
    p.add_argument("--width", type=int, default=100)
    p.add_argument("--threads", default=",".join(str(t) for t in (1, 2, 4, 8, 16, 32) if t <= (os.cpu_count() or 1)))
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    n, w = int(args.records), args.width
    rows = np.random.default_rng(0).integers(0, 256, (n, w), dtype=np.uint8)
    step = max(1, n // 20000)
    expected = np.array([zlib.crc32(r) for r in rows[::step]], np.uint32)
    crc.warm()  # compiled (or loaded from the cache) before timing
    gb = rows.nbytes / 1e9
    out = []
    (whole,) = paired_times([lambda: zlib.crc32(rows)], repeat=args.repeat)
    loop_rows = rows[: min(n, 200000)]
    (loop,) = paired_times([lambda: [zlib.crc32(r) for r in loop_rows]], repeat=1)
    out.append(
        {
            "method": "zlib.crc32, whole buffer (one stream)",
            "threads": 1,
            "GB/s": round(gb / whole, 2),
            "GB/s per thread": round(gb / whole, 2),
        }
    )
    loop_gbs = loop_rows.nbytes / 1e9 / loop
    out.append(
        {"method": "zlib.crc32 per record, Python loop", "threads": 1, "GB/s": round(loop_gbs, 2), "GB/s per thread": round(loop_gbs, 2)}
    )
    for t in [int(x) for x in args.threads.split(",")]:
        pieces = np.array_split(rows, t)
        with ThreadPoolExecutor(t) as pool:
            got = list(pool.map(valsort.crc32_rows, pieces))
            assert (np.concatenate(got)[::step] == expected).all(), "wrong checksums"
            (dt,) = paired_times([lambda pool=pool, pieces=pieces: list(pool.map(valsort.crc32_rows, pieces))], repeat=args.repeat)
        out.append(
            {
                "method": "dsort.core.valsort.crc32_rows",
                "threads": t,
                "GB/s": round(gb / dt, 2),
                "GB/s per thread": round(gb / dt / t, 2),
                "vs one stream of zlib": f"{whole / dt:.2f}x",
            }
        )
        print(out[-1], flush=True)
    write_json(args.json, out, records=n, width=w)
    print(f"\n{n:,} records of {w} bytes ({gb:.2f} GB), {os.cpu_count()} CPUs")
    print_table(out, ["method", "threads", "GB/s", "GB/s per thread", "vs one stream of zlib"])


if __name__ == "__main__":
    main()
