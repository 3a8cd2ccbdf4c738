"""The sorting service end to end: records on local disk → ``dsort sort`` → records on disk.

CPU (default): records ``--ratio`` (4) times the workers' total memory limit, on an embedded
LocalCluster; workers spill to ``--local-directory``. Records sizes, limits, wall time, throughput,
per-phase times and the peak RSS of every worker (sampled every 0.2 s).

    python benchmarks/bench_service.py --n-workers 2 --memory-limit 250MB

GPU (``--gpu``, on the device machine): 10^8 records (10 GB) on a LocalCUDACluster whose total
``--device-memory-limit`` is a third of the data (``--ratio 3``), against a NumPy-only
single-process sort of the same records in the same run (read, ``np.argsort`` of the keys as one
array, gather, write).

    python benchmarks/bench_service.py --gpu --records 1e8

The markdown table is printed last; ``--json PATH`` writes the rows too.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402

import numpy as np  # noqa: E402
from dask.utils import format_bytes, parse_bytes  # noqa: E402


def _worker_memory():
    import psutil

    rss = psutil.Process().memory_info().rss
    device = None
    try:
        import cupy

        free, total = cupy.cuda.runtime.memGetInfo()
        device = total - free
    except Exception:
        pass
    return rss, device


class Sampler(threading.Thread):
    """Peak RSS (and used device memory) of every worker, sampled while the sort runs."""

    def __init__(self, client, interval=0.2):
        super().__init__(daemon=True)
        self.client, self.interval = client, interval
        self.peak_rss, self.peak_device = {}, {}
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            try:
                for w, (rss, dev) in self.client.run(_worker_memory).items():
                    self.peak_rss[w] = max(self.peak_rss.get(w, 0), rss)
                    if dev is not None:
                        self.peak_device[w] = max(self.peak_device.get(w, 0), dev)
            except Exception:
                pass
            self.done.wait(self.interval)

    def stop(self):
        self.done.set()
        self.join()


def run_dsort(args, src: Path, dst: Path):
    from dsort.cli import sort_files
    from dsort.cluster import connect, format_phases

    sort_args = argparse.Namespace(input=str(src), output=str(dst), format="records", record_size=100, key_size=10, by=None,
                                   descending=False, overwrite=True, chunk_size=args.chunk_size)
    kw = dict(n_workers=args.n_workers, threads_per_worker=args.threads_per_worker, memory_limit=args.memory_limit,
              device_memory_limit=args.device_memory_limit, local_directory=args.local_directory, dashboard_address=":0")
    with connect(None, **kw) as session:
        sampler = Sampler(session.client)
        sampler.start()
        try:
            fig = sort_files(sort_args, session)
        finally:
            sampler.stop()
        limit = session.memory_limit
        row = {
            "engine": f"dsort, {session.kind}",
            "records": f"{fig['records']:,}",
            "data": format_bytes(fig["bytes"]),
            "workers": session.workers,
            "threads": session.threads,
            "memory limit / worker": format_bytes(limit) if limit else "none",
            "data / total limit": f"{fig['bytes'] / (limit * session.workers):.1f}x" if limit else "",
            "wall s": f"{fig['wall']:.1f}",
            "GB/s": f"{fig['bytes'] / fig['wall'] / 1e9:.3f}",
            "peak RSS / worker": ", ".join(format_bytes(v) for v in sorted(sampler.peak_rss.values())),
            "phases": format_phases(fig["phases"]),
        }
        if session.gpu:
            dev = session.device_memory_limit
            row["device memory limit / worker"] = format_bytes(dev) if dev else "none"
            row["data / total device limit"] = f"{fig['bytes'] / (dev * session.workers):.1f}x" if dev else ""
            row["peak device memory / worker"] = ", ".join(format_bytes(v) for v in sorted(sampler.peak_device.values()))
    return row


def run_numpy(src: Path, dst: Path):
    """The baseline: one process, the whole array in memory, NumPy's stable argsort of the keys."""
    import psutil

    t0 = time.perf_counter()
    rec = np.fromfile(src, np.uint8).reshape(-1, 100)
    t1 = time.perf_counter()
    order = np.argsort(np.ascontiguousarray(rec[:, :10]).view("S10").ravel(), kind="stable")
    t2 = time.perf_counter()
    out = rec[order]
    t3 = time.perf_counter()
    out.tofile(dst)
    t4 = time.perf_counter()
    return {
        "engine": "NumPy, 1 process",
        "records": f"{len(rec):,}",
        "data": format_bytes(rec.nbytes),
        "workers": 1,
        "threads": 1,
        "wall s": f"{t4 - t0:.1f}",
        "GB/s": f"{rec.nbytes / (t4 - t0) / 1e9:.3f}",
        "peak RSS / worker": format_bytes(psutil.Process().memory_info().rss),
        "phases": f"read {t1 - t0:.2f} s, argsort {t2 - t1:.2f} s, gather {t3 - t2:.2f} s, write {t4 - t3:.2f} s",
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gpu", action="store_true", help="the device machine's run: LocalCUDACluster, 1e8 records, NumPy baseline")
    p.add_argument("--records", type=float, help="records (default: --ratio times the total memory limit; 1e8 with --gpu)")
    p.add_argument("--ratio", type=float, help="data / total (device) memory limit (default 4, 3 with --gpu)")
    p.add_argument("--n-workers", type=int, default=None)
    p.add_argument("--threads-per-worker", type=int, default=None)
    p.add_argument("--memory-limit", default=None, help="per worker (default 250MB; auto with --gpu)")
    p.add_argument("--device-memory-limit", default=None, help="per worker (default: data / ratio / GPUs)")
    p.add_argument("--chunk-size", default=None, help="bytes per input chunk (default: dsort's)")
    p.add_argument("--dir", default=None, help="where the records go (default: a temporary directory)")
    p.add_argument("--local-directory", default=None, help="spill directory (default: inside --dir)")
    p.add_argument("--no-baseline", action="store_true", help="skip the NumPy single-process sort")
    p.add_argument("--json", default=None)
    args = p.parse_args(argv)
    args.chunk_size = parse_bytes(args.chunk_size) if args.chunk_size else None

    from dsort import gen

    work = Path(tempfile.mkdtemp(prefix="dsort-bench-", dir=args.dir))
    args.local_directory = args.local_directory or str(work / "spill")
    try:
        if args.gpu:
            import cupy

            gpus = cupy.cuda.runtime.getDeviceCount()
            n = int(args.records or 1e8)
            ratio = args.ratio or 3
            args.n_workers = args.n_workers or gpus
            args.memory_limit = args.memory_limit or "auto"
            args.device_memory_limit = args.device_memory_limit or int(n * 100 / ratio / args.n_workers)
        else:
            args.memory_limit = args.memory_limit or "250MB"
            args.n_workers = args.n_workers or 2
            args.threads_per_worker = args.threads_per_worker or 1
            ratio = args.ratio or 4
            n = int(args.records or ratio * parse_bytes(args.memory_limit) * args.n_workers / 100)
        src, dst = work / "in.bin", work / "out.bin"
        t = time.perf_counter()
        gen.records(n, src)
        print(f"generated {n:,} records ({format_bytes(n * 100)}) in {time.perf_counter() - t:.1f} s")
        rows = [run_dsort(args, src, dst)]
        if args.gpu and not args.no_baseline:
            rows.append(run_numpy(src, work / "numpy.bin"))
            same = os.path.getsize(dst) == os.path.getsize(work / "numpy.bin") and _same_file(dst, work / "numpy.bin")
            print(f"dsort's and NumPy's outputs are {'identical' if same else 'DIFFERENT'}")
        write_json(args.json, rows, benchmark="bench_service", gpu=args.gpu)
        columns = list(dict.fromkeys(k for r in rows for k in r))
        print()
        print_table(rows, columns)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _same_file(a, b, block=1 << 26):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(block), fb.read(block)
            if x != y:
                return False
            if not x:
                return True


if __name__ == "__main__":
    main()
