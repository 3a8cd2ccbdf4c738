"""Whole commands on the same file and machine: ``dsort sort`` against GNU sort and DuckDB.

The yardstick a user applies: is ``dsort sort`` faster than ``sort`` on the same file, timed as a
whole command (process start to exit)? Records are Sort Benchmark records in the ASCII layout
(``dsort gen records --ascii``: printable 10-byte keys, 100-byte lines ending in ``\\r\\n``), so
``LC_ALL=C sort`` takes the very same bytes. Input in the page cache (read once before timing).

Cases:

* ``memory``: every tool with its default memory (GNU sort ``-S 50%``);
* ``ooc``: every tool limited to ``--fraction`` (1/4) of the data: dsort ``--memory-limit``
  (CPU) or ``--device-memory-limit`` (GPU), GNU sort ``-S``, DuckDB ``memory_limit``;
* ``tiny`` (not by default): the same with ``--tiny-fraction`` (1/32) of the data, where dsort's
  blocks are so small that their runs are more than one merge pass takes
  (``dsort.file-sort.max-runs``) and it merges them in two passes (its "on ..." line says so).

Also measured in the same run: the disk's sequential write with fsync and read of an uncached file
(``--floor``), and from them the floor of a sort that must write its output (and, out of core,
read and write its runs once more). Every dsort output is checked (order, count, checksum).

    python benchmarks/bench_files.py --records 2e7 --cpu --threads 2 --cases memory,ooc --json out.json

The markdown table is printed last; ``--json PATH`` writes the rows too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import present_peers, print_table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
RUSAGE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
    "print('maxrss', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(r.returncode)"
)


def timed(cmd, env=None, log=None):
    """(seconds, peak RSS of the largest process in bytes, output) of one whole command."""
    t = time.perf_counter()
    p = subprocess.run([PY, "-c", RUSAGE, *map(str, cmd)], capture_output=True, text=True, env=env)
    dt = time.perf_counter() - t
    rss = int(p.stderr.rsplit("maxrss", 1)[1].split()[0]) * 1024 if "maxrss" in p.stderr else 0
    out = p.stdout + p.stderr
    if log:
        with open(log, "a") as f:
            f.write(f"$ {' '.join(map(str, cmd))}\n{out}\n({dt:.2f} s)\n")
    if p.returncode != 0:
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}):\n{out[-3000:]}")
    return dt, rss, out


def disk_floor(d: Path, nbytes: int):
    """Sequential write with fsync, and read of an uncached file, in bytes/s (16 MiB blocks)."""
    path = d / "floor.tmp"
    block = bytes(16 << 20)
    t = time.perf_counter()
    with open(path, "wb") as f:
        left = nbytes
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)
        f.flush()
        os.fsync(f.fileno())
    write = nbytes / (time.perf_counter() - t)
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)  # clean pages: dropped, so the read hits the disk
    t = time.perf_counter()
    while os.read(fd, 16 << 20):
        pass
    read = nbytes / (time.perf_counter() - t)
    os.close(fd)
    path.unlink()
    return write, read


def duckdb_script(src, dst, threads, memory):
    mem = f"SET memory_limit='{memory}';" if memory else ""
    return (
        f'import duckdb; c = duckdb.connect(); c.execute("SET threads={threads}; {mem} SET preserve_insertion_order=false;"); '
        f"c.execute(\"COPY (SELECT line FROM read_csv('{src}', columns={{'line': 'VARCHAR'}}, header=false, delim='\\x01', "
        f"quote='', escape='') ORDER BY substr(line, 1, 10)) TO '{dst}' (HEADER false, QUOTE '', DELIMITER '\\x01')\")"
    )


def run_repeated(cmd, out, env, args):
    """``(median wall s, peak RSS, last output)`` of ``--repeat`` runs of ``cmd`` (RuntimeError if one fails)."""
    times, rss, text = [], 0, ""
    for _ in range(args.repeat):
        if out.exists():
            out.unlink()
        dt, r, text = timed(cmd, env, args.log)
        times.append(dt)
        rss = max(rss, r)
    return statistics.median(times), rss, text


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=float, default=2e6)
    p.add_argument("--dir", default=None, help="working directory (default: a new one under /tmp)")
    p.add_argument("--cases", default="memory,ooc")
    p.add_argument("--fraction", type=float, default=0.25, help="ooc: memory as a fraction of the data")
    p.add_argument("--tiny-fraction", type=float, default=1 / 32, help="tiny: memory as a fraction of the data")
    p.add_argument("--threads", type=int, default=os.cpu_count(), help="threads for every tool")
    p.add_argument("--cpu", action="store_true", help="dsort on the CPU (else on the visible GPUs)")
    p.add_argument("--peers", default="gnu,duckdb")
    p.add_argument("--repeat", type=int, default=1, help="runs of each command (the median is reported)")
    p.add_argument("--dsort-args", default="", help="more options for dsort sort")
    p.add_argument(
        "--duckdb-ooc-threads",
        default="",
        help="out of core: DuckDB's thread counts to try, the fastest counts (default: --threads, then 4 if that fails)",
    )
    p.add_argument("--no-floor", action="store_true")
    p.add_argument("--keep", action="store_true")
    p.add_argument("--log", default=None, help="append every command's output here")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    n = int(args.records)
    work = Path(args.dir) if args.dir else Path(f"/tmp/dsort-bench-files-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    src = work / f"in-{n}.txt"
    env = dict(os.environ, LC_ALL="C", PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if not src.exists():
        from dsort.io import gen

        t = time.perf_counter()
        gen.records(n, src, ascii=True)
        print(f"generated {n:,} records in {time.perf_counter() - t:.1f} s", flush=True)
    size = src.stat().st_size
    subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
    write_bw = read_bw = None
    if not args.no_floor:
        write_bw, read_bw = disk_floor(work, min(size, 4 << 30))
        print(f"disk: write+fsync {write_bw / 1e9:.2f} GB/s, read {read_bw / 1e9:.2f} GB/s", flush=True)
    peers = present_peers(args.peers)
    rows = []
    for case in args.cases.split(","):
        limit = int(size * {"ooc": args.fraction, "tiny": args.tiny_fraction}[case]) if case in ("ooc", "tiny") else None
        cmds = {}
        dsort_cmd = [PY, "-m", "dsort", "sort", src, work / "out.dsort", "--overwrite", "--threads-per-worker", args.threads]
        if args.cpu:
            dsort_cmd += ["--cpu", "--n-workers", 1]
        if limit:
            dsort_cmd += ["--memory-limit", limit] if args.cpu else ["--device-memory-limit", limit]
        dsort_cmd += args.dsort_args.split()
        cmds["dsort"] = (dsort_cmd, work / "out.dsort")
        if "gnu" in peers:
            cmds["GNU sort"] = (
                [
                    "sort",
                    f"--parallel={args.threads}",
                    "-S",
                    f"{limit // 2**20}M" if limit else "50%",
                    "-T",
                    work,
                    "-o",
                    work / "out.gnu",
                    src,
                ],
                work / "out.gnu",
            )
        memory = f"{limit // 2**20}MB" if limit else None
        if "duckdb" in peers:
            cmds["DuckDB"] = ([PY, "-c", duckdb_script(src, work / "out.duck", args.threads, memory)], work / "out.duck")
        results = {}
        for name, (cmd, out) in cmds.items():
            variants = [(cmd, "")]
            if name == "DuckDB" and limit:  # out of core DuckDB runs out of memory at many threads: its best count
                counts = [int(t) for t in args.duckdb_ooc_threads.split(",")] if args.duckdb_ooc_threads else [args.threads, 4]
                variants = [([PY, "-c", duckdb_script(src, out, t, memory)], f"{t} threads") for t in dict.fromkeys(counts)]
            best, tried = None, []
            for vcmd, vnote in variants:
                try:
                    got = run_repeated(vcmd, out, env, args)
                except RuntimeError as e:
                    said = [x for x in str(e).splitlines() if "Error" in x] or str(e).strip().splitlines()
                    tried.append(f"{vnote or 'default'}: failed ({said[-1][:80]})")
                    print(f"{case} {name} {vnote}: {e}", flush=True)
                    continue
                tried.append(f"{vnote}: {got[0]:.2f} s" if vnote else "")
                if best is None or got[0] < best[0]:
                    best = (*got, vnote)
                if name == "DuckDB" and limit and not args.duckdb_ooc_threads:
                    break  # as a user would: more threads only when the first count failed
            if best is None:
                rows.append({"case": case, "tool": name, "wall s": "failed", "note": "; ".join(tried)})
                continue
            results[name], rss, text, note = best
            if len(variants) > 1:
                note = f"best at {note} ({', '.join(t for t in tried if t)})"
            row = {
                "case": case,
                "tool": name,
                "records": n,
                "GB": round(size / 1e9, 2),
                "memory": f"{limit / 2**20:.0f} MiB" if limit else "default",
                "wall s": round(results[name], 2),
                "GB/s": round(size / results[name] / 1e9, 3),
                "peak RSS MiB": round(rss / 2**20),
                "note": note,
            }
            if name == "dsort":
                check = subprocess.run([PY, "-m", "dsort", "check", out], capture_output=True, text=True, env=env)
                ok = check.returncode == 0 and f"Records: {n:,}" in check.stdout
                row["checked"] = "yes" if ok else "FAILED"
                for line in text.splitlines():
                    if line.startswith(("stages", "phases", "runs:", "on ")):
                        row.setdefault("dsort said", []).append(line)
            if write_bw:
                spills = 2 if case == "tiny" else 1 if limit else 0  # runs (and a first pass's pieces) written and read
                floor = size / write_bw + spills * (size / read_bw + size / write_bw)
                row["floor s"] = round(floor, 2)
                row["of floor"] = f"{floor / results[name]:.2f}"
            print(row, flush=True)
            rows.append(row)
        for r in rows:
            if r["case"] == case and "wall s" in r and r["tool"] != "dsort" and "dsort" in results and isinstance(r["wall s"], float):
                r["dsort faster by"] = f"{r['wall s'] / results['dsort']:.2f}x"
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    meta = {"records": n, "bytes": size, "threads": args.threads, "cpu": args.cpu, "write_bw": write_bw, "read_bw": read_bw}
    write_json(args.json, rows, **meta)
    print()
    print(
        f"{n:,} records ({size / 1e9:.2f} GB), {args.threads} threads"
        + (f"; disk write+fsync {write_bw / 1e9:.2f} GB/s, read {read_bw / 1e9:.2f} GB/s" if write_bw else "")
    )
    print_table(
        rows, ["case", "tool", "memory", "wall s", "GB/s", "dsort faster by", "peak RSS MiB", "floor s", "of floor", "checked", "note"]
    )


if __name__ == "__main__":
    main()
