"""The file sort on a box of several GPUs, run again and again: the default against every GPU.

Issue 42's first yardstick: the default ``dsort sort`` on a multi-GPU box never fails, and is never
slower than the best one-GPU run of the same sort. Records in the ASCII layout (``dsort gen records
--ascii``) are sorted as whole commands, each in a process of its own, ``--runs`` times for each
configuration, the configurations taken in turn (so a machine's drift favours none):

* ``default``: no option (the GPUs that :func:`dsort.limits.default_gpus` picks);
* ``1 GPU`` (``--n-workers 1``), and ``N GPUs`` (``--n-workers N``) for each N up to the GPUs visible
  (``--counts``, default ``1,2,4``, those above the GPUs visible left out).

Then ``--one-process`` sorts in one Python process (``sort_files`` called again and again, the
default and every GPU in turn): per-process state (peer access, pools, streams) is made once and
reused. The floor of any such sort on this box, measured in the same call: writing the output's
bytes with fsync to the same disk (the input lies in the page cache; ``--no-floor`` skips it),
"of floor" = floor / median. Every output is checked against the input (count, checksum, order); a failed run is
counted with its error's last line, never hidden. A table comes last; ``--json`` writes the rows.

    python benchmarks/bench_gpus.py --records 3e7 --runs 10 --one-process 3 --json out.json
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
from _common import print_table, write_json  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

ONE_PROCESS = """
import sys, time
from dsort.check import check_path
from dsort.service import sort_files
src, dst, n, rounds, checksum = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5], 16)
configs = [(name, int(w) if w != "default" else None) for name, w in (c.split("=") for c in sys.argv[6:])]
for r in range(rounds):
    for name, workers in configs:
        t = time.perf_counter()
        try:
            sort_files(src, dst, n_workers=workers, overwrite=True, progress=False, stream=open("/dev/null", "w"))
            dt = time.perf_counter() - t
            s = check_path(dst)
            ok = s.sorted and s.records == n and s.checksum == checksum
            print(f"RUN {name} {dt:.3f} {'ok' if ok else 'WRONG'}", flush=True)
        except Exception as e:
            why = (str(e).strip().splitlines() or [""])[-1][:200]
            print(f"RUN {name} {time.perf_counter() - t:.3f} FAILED {type(e).__name__}: {why}", flush=True)
"""


def summary_of(path, env):
    """``(records, checksum hex, sorted)`` of ``dsort check PATH``, from its report."""
    p = subprocess.run([PY, "-m", "dsort", "check", str(path)], capture_output=True, text=True, env=env)
    got = dict(line.split(": ", 1) for line in p.stdout.splitlines() if ": " in line)
    return int(got.get("Records", "-1").replace(",", "")), got.get("Checksum", ""), "SUCCESS" in p.stdout


def last_line(text: str) -> str:
    lines = [x for x in text.strip().splitlines() if x.strip()]
    errors = [x for x in lines if "Error" in x or "error" in x]
    return (errors or lines or ["(no output)"])[-1][:160]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=float, default=3e7)
    p.add_argument("--runs", type=int, default=3, help="whole commands per configuration, each in its own process")
    p.add_argument("--one-process", type=int, default=3, help="rounds of sort_files in one process (0: none)")
    p.add_argument("--counts", default="1,2,4", help="GPU counts to force with --n-workers (those visible)")
    p.add_argument("--dir", default=None, help="working directory (default: a new one under /tmp)")
    p.add_argument("--no-floor", action="store_true", help="skip the disk's write+fsync floor")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)

    from dsort.engine.device import gpu_count

    visible = gpu_count()
    counts = [c for c in (int(x) for x in args.counts.split(",")) if 1 <= c <= visible]
    n = int(args.records)
    work = Path(args.dir) if args.dir else Path(f"/tmp/dsort-bench-gpus-{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    src, dst = work / f"in-{n}.txt", work / "out.txt"
    env = dict(os.environ, PYTHONPATH=f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    if not src.exists():
        from dsort.io import gen

        t = time.perf_counter()
        gen.records(n, src, ascii=True)
        print(f"generated {n:,} records in {time.perf_counter() - t:.1f} s", flush=True)
    subprocess.run(["cat", str(src)], stdout=subprocess.DEVNULL, check=True)  # into the page cache
    records, checksum, _ = summary_of(src, env)
    assert records == n, f"the input holds {records} records, not {n}"
    floor = None
    if not args.no_floor:
        from bench_files import disk_floor

        write_bw, read_bw = disk_floor(work, src.stat().st_size)
        floor = src.stat().st_size / write_bw
        print(f"disk: write+fsync {write_bw / 1e9:.2f} GB/s, read {read_bw / 1e9:.2f} GB/s: floor {floor:.2f} s", flush=True)
    configs = {"default": []} | {f"{c} GPU{'s' if c > 1 else ''}": ["--n-workers", str(c)] for c in counts}
    print(f"{visible} GPU(s) visible; {n:,} records; configurations: {', '.join(configs)}", flush=True)

    times = {name: [] for name in configs}
    failures = {name: [] for name in configs}
    said = {}
    for r in range(args.runs):
        for name, extra in configs.items():
            cmd = [PY, "-m", "dsort", "sort", str(src), str(dst), "--overwrite", *extra]
            t = time.perf_counter()
            run = subprocess.run(cmd, capture_output=True, text=True, env=env)
            dt = time.perf_counter() - t
            if run.returncode != 0:
                failures[name].append(f"exit {run.returncode}: {last_line(run.stdout + run.stderr)}")
                print(f"round {r} {name}: FAILED {failures[name][-1]}", flush=True)
                continue
            got = summary_of(dst, env)
            if got != (n, checksum, True):
                failures[name].append(f"wrong output: {got}")
                print(f"round {r} {name}: WRONG {got}", flush=True)
                continue
            times[name].append(dt)
            said[name] = [x for x in run.stdout.splitlines() if x.startswith(("on ", "stages", "phases"))]
            print(f"round {r} {name}: {dt:.2f} s, checked", flush=True)

    rows = []
    for name in configs:
        rows.append(row("processes", name, times[name], failures[name], args.runs, said.get(name)))
    if args.one_process:
        spec = [f"{name.replace(' ', '_')}={'default' if not extra else extra[1]}" for name, extra in configs.items()]
        cmd = [PY, "-c", ONE_PROCESS, str(src), str(dst), str(n), str(args.one_process), checksum, *spec]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        one = {name: ([], []) for name in configs}
        for line in proc.stdout.splitlines():
            if line.startswith("RUN "):
                _, name, dt, *rest = line.split(" ", 3)
                name = name.replace("_", " ")
                ok = rest and rest[0] == "ok"
                (one[name][0] if ok else one[name][1]).append(float(dt) if ok else " ".join(rest))
                print(f"one process {name}: {dt} s {' '.join(rest)}", flush=True)
        if proc.returncode != 0:
            print(f"the one-process run exited {proc.returncode}: {last_line(proc.stderr)}", flush=True)
        for name in configs:
            t, f = one[name]
            missing = args.one_process - len(t) - len(f)
            f = f + [f"not run (exit {proc.returncode}: {last_line(proc.stderr)})"] * missing
            rows.append(row("one process", name, t, f, args.one_process))
    base = min((r["median s"] for r in rows if r["mode"] == "processes" and r["gpus"] == "1 GPU" and r["median s"]), default=None)
    for r in rows:
        if base and r["median s"]:
            r["vs 1 GPU"] = f"{base / r['median s']:.2f}x"
        if floor and r["median s"]:
            r["of floor"] = f"{floor / r['median s']:.2f}"
    if args.dir:
        dst.unlink(missing_ok=True)
    else:
        shutil.rmtree(work, ignore_errors=True)
    write_json(args.json, rows, benchmark="gpus", records=n, visible=visible, floor_s=floor)
    print()
    print(f"{n:,} records, {visible} GPU(s) visible, {os.cpu_count()} CPUs" + (f", floor {floor:.2f} s" if floor else ""))
    print_table(rows, ["mode", "gpus", "runs", "failed", "median s", "min s", "max s", "vs 1 GPU", "of floor", "first failure"])


def row(mode, name, times, failures, runs, said=None):
    r = {
        "mode": mode,
        "gpus": name,
        "runs": runs,
        "failed": len(failures),
        "median s": round(statistics.median(times), 2) if times else None,
        "min s": round(min(times), 2) if times else None,
        "max s": round(max(times), 2) if times else None,
        "first failure": failures[0] if failures else "",
    }
    if said:
        r["dsort said"] = said
    return r


if __name__ == "__main__":
    main()
