"""Whole commands on the same Parquet file and machine: ``dsort sort --by`` against DuckDB's ORDER BY
and pandas (issue 44).

One Parquet file per table of ``--rows`` rows in row groups of ``--group-rows`` (the columns of
``benchmarks/bench_parquet_frames.py``: an int64 id, a float64 ``fare``, an int32 ``n``, a string,
a list of int64 with nulls, a struct and a decimal(12, 2)). Tables:

* ``numbers``: id, fare, n;
* ``strings``: numbers and the string column;
* ``every``: every column above.

Each table is sorted by ``fare`` (``--by fare``) and by ``n`` then ``fare`` (``--by n,fare``), as
a whole command (process start to exit), input in the page cache:

* dsort: ``python -m dsort sort T OUT --by ...`` (``--cpu``; with ``--gpu`` its keys ordered on
  the GPU; ``--gpu --cpu-too``: both, a row each, on the same file and beside the same peer
  times), its output checked by ``dsort check``;
* DuckDB: ``COPY (SELECT * FROM read_parquet(T) ORDER BY ...) TO OUT (FORMAT parquet)`` with
  ``--threads`` threads;
* pandas: ``read_parquet(T).sort_values(..., kind="stable").to_parquet(OUT)``.

``--memory`` adds the same sorts with every tool limited to a quarter of the table's decoded bytes
in memory (dsort ``--memory-limit``; DuckDB ``memory_limit``, ``preserve_insertion_order=false``,
at the faster of ``--threads`` and one thread; pandas has no limit and is left out); a peer that
fails there (out of memory) is shown as failed.

    python benchmarks/bench_parquet.py --rows 3e6 --threads 2 --repeat 3 --json out.json

The markdown table is printed last: medians of ``--repeat`` runs, and dsort faster by (the peer's
time over dsort's).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from _common import present_peers, print_table, write_json  # noqa: E402

PY = sys.executable
TABLES = {"numbers": ["id", "fare", "n"], "strings": ["id", "fare", "n", "s"], "every": ["id", "fare", "n", "s", "l", "st", "dec"]}
ORDERS = {"fare": ["fare"], "n,fare": ["n", "fare"]}


def make(where: Path, rows: int, group_rows: int, tables) -> dict:
    """``{table: path}``: the tables written from one draw of every column."""
    import pyarrow.parquet as pq

    from bench_parquet_frames import make as make_all

    whole = where / "all.parquet"
    make_all(str(whole), rows, max(1, -(-rows // group_rows)))
    t = pq.read_table(whole)
    paths = {}
    for name in tables:
        paths[name] = where / f"{name}.parquet"
        pq.write_table(t.select(TABLES[name]), paths[name], row_group_size=group_rows)
    whole.unlink()
    return paths


def _decoded_bytes(path) -> int:
    """The table's bytes decoded (the row groups' uncompressed sizes, as the file's footer says)."""
    import pyarrow.parquet as pq

    meta = pq.ParquetFile(path).metadata
    return sum(meta.row_group(g).total_byte_size for g in range(meta.num_row_groups))


def timed(cmd, env=None) -> float:
    t = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[:3]} failed ({p.returncode}):\n{(p.stdout + p.stderr)[-3000:]}")
    return dt


def duckdb_cmd(src, dst, by, threads, memory):
    mem = f"SET memory_limit='{max(int(memory) // 1024, 1)}KiB'; SET preserve_insertion_order=false;" if memory else ""
    order = ", ".join(by)
    return [
        PY,
        "-c",
        f'import duckdb; c = duckdb.connect(); c.execute("SET threads={threads}; {mem}"); '
        f"c.execute(\"COPY (SELECT * FROM read_parquet('{src}') ORDER BY {order}) TO '{dst}' (FORMAT parquet)\")",
    ]


def pandas_cmd(src, dst, by):
    return [
        PY,
        "-c",
        f"import pandas as pd; pd.read_parquet('{src}').sort_values({by!r}, kind='stable').to_parquet('{dst}', index=False)",
    ]


def dsort_cmd(src, dst, by, args, memory, device):
    cmd = [PY, "-m", "dsort", "sort", str(src), str(dst), "--by", ",".join(by), "--threads-per-worker", str(args.threads)]
    cmd += ["--gpu"] if device == "gpu" else ["--cpu"]
    return cmd + (["--memory-limit", str(memory)] if memory else [])


def median_of(cmd, out: Path, repeat: int, env=None) -> float:
    times = []
    for _ in range(repeat):
        if out.is_dir():
            shutil.rmtree(out)
        elif out.exists():
            out.unlink()
        times.append(timed(cmd, env))
    return statistics.median(times)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=float, default=1e6)
    p.add_argument("--group-rows", type=int, default=250_000)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--tables", default=",".join(TABLES))
    p.add_argument("--orders", default=";".join(ORDERS), help="separated by ;, of: " + "; ".join(ORDERS))
    p.add_argument("--peers", default="duckdb,pandas")
    p.add_argument("--memory", action="store_true", help="also at a quarter of the table's bytes in memory")
    p.add_argument("--gpu", action="store_true", help="dsort on the GPU (default --cpu)")
    p.add_argument("--cpu-too", action="store_true", help="with --gpu: dsort --cpu as well, a row each")
    p.add_argument("--dir", default=None, help="where the tables go (default: a temporary directory)")
    p.add_argument("--json", default=None)
    a = p.parse_args(argv)
    peers = present_peers(a.peers)
    devices = ["gpu", "cpu"] if a.gpu and a.cpu_too else ["gpu" if a.gpu else "cpu"]
    where = Path(a.dir or tempfile.mkdtemp(prefix="dsort-bench-parquet-"))
    where.mkdir(parents=True, exist_ok=True)
    rows = int(a.rows)
    t = time.perf_counter()
    paths = make(where, rows, a.group_rows, [x for x in a.tables.split(",") if x])
    print(f"made {rows:,} rows in row groups of {a.group_rows:,} in {time.perf_counter() - t:.1f} s", flush=True)
    env = None
    results = []
    try:
        for table, src in paths.items():
            size = src.stat().st_size
            decoded = _decoded_bytes(src)
            for order in [x for x in a.orders.split(";") if x]:
                by = ORDERS[order]
                for memory in [None] + ([max(decoded // 4, 1 << 20)] if a.memory else []):
                    src.read_bytes()  # in the page cache
                    base = {"table": table, "by": order, "memory": "data/4" if memory else "all", "MiB": f"{size / 2**20:.0f}"}
                    rows_ = [dict(base, device=d) for d in devices]
                    for row in rows_:
                        out = where / "out"
                        row["dsort s"] = median_of(dsort_cmd(src, out, by, a, memory, row["device"]), out, a.repeat, env)
                        check = subprocess.run([PY, "-m", "dsort", "check", str(out)], capture_output=True, text=True, env=env)
                        if check.returncode != 0:
                            raise RuntimeError(f"dsort's output of {table} by {order} fails its check:\n{check.stdout[-2000:]}")
                        shutil.rmtree(out)
                    for peer in peers:
                        if peer == "pandas" and memory:
                            continue
                        dst = where / "peer.parquet"
                        # under a memory limit DuckDB at its best thread count: all of them, else 1 (fewer buffers)
                        counts = dict.fromkeys([a.threads, 1] if memory and peer == "duckdb" else [a.threads])
                        times, why = [], ""
                        for threads in counts:
                            cmd = duckdb_cmd(src, dst, by, threads, memory) if peer == "duckdb" else pandas_cmd(src, dst, by)
                            try:
                                times.append(median_of(cmd, dst, a.repeat))
                            except RuntimeError as e:  # out of memory at a small limit, say: the row says so
                                why = next((x for x in str(e).splitlines() if "Error" in x or "Exception" in x), "failed")
                        for row in rows_:
                            if times:
                                row[f"{peer} s"] = theirs = min(times)
                                row[f"vs {peer}"] = f"{theirs / row['dsort s']:.2f}x"
                            else:
                                row[f"{peer} s"] = "failed: " + why.strip()[:70]
                        dst.unlink(missing_ok=True)
                    for row in rows_:
                        results.append(row)
                        print({k: (f"{v:.2f}" if isinstance(v, float) else v) for k, v in row.items()}, flush=True)
    finally:
        if not a.dir:
            shutil.rmtree(where, ignore_errors=True)
    shown = [{k: (f"{v:.2f}" if isinstance(v, float) else v) for k, v in r.items()} for r in results]
    write_json(a.json, shown, rows_=rows, group_rows=a.group_rows, threads=a.threads, repeat=a.repeat, gpu=a.gpu)
    cols = ["table", "by", "memory", "MiB", "device", "dsort s"] + [c for p_ in peers for c in (f"{p_} s", f"vs {p_}")]
    print_table(shown, cols)


if __name__ == "__main__":
    main()
