"""Copies between host memory and the GPUs while many threads of many processes copy at once.

    python benchmarks/bench_concurrent_transfer.py [--procs 8] [--threads 4] [--mib 32] [--iters 6] [--json out.json]

A dask GPU cluster of several worker processes per GPU, several threads each, copies partitions in
and out all at once. This starts ``--procs`` processes (spread over the GPUs, each seeing every
GPU, its own first), each with ``--threads`` threads that copy arrays of ``--mib`` MiB ``--iters``
times, all starting together, for each way of copying (aggregate GiB/s):

* ``pinned in place``: the array page-locked where it is (cudaHostRegister), copied, unlocked;
* ``staging``: through reused page-locked buffers of :mod:`dsort.engine.device` (piece by piece);
* ``pageable``: CuPy's plain copy from or into pageable memory (out only);
* ``dsort``: :func:`dsort.engine.device.from_host` / :func:`~dsort.engine.device.to_host`, which
  pick one of the first two (in place only where no other thread of the process copies).

Copies out go into new host memory each time (a result's memory). The table comes last.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from _common import print_table, write_json

WAYS = [("out", w) for w in ("pinned in place", "staging", "pageable", "dsort")]
WAYS += [("in", w) for w in ("pinned in place", "staging", "dsort")]


def _child(direction, way, threads, mib, iters, start_file):
    import threading

    import cupy
    import numpy as np

    from dsort.engine import device as dev

    def pinned_out(x):
        out = np.empty(x.shape, x.dtype)
        dev._touch(out)
        with dev._pinned(out, read_only=False) as span:
            dev._copy_pieces(out.ctypes.data, x.data.ptr, x.nbytes, span, cupy.cuda.runtime.memcpyDeviceToHost)
        return out

    def staged_out(x):
        out = np.empty(x.shape, x.dtype)
        flat = out.reshape(-1).view(np.uint8)
        dev.download(x, lambda buf, off: np.copyto(flat[off : off + len(buf)], buf), 0)
        return out

    def pageable_out(x):
        out = np.empty(x.shape, x.dtype)
        x.get(out=out)
        return out

    def pinned_in(a):
        out = cupy.empty(a.shape, a.dtype)
        with dev._pinned(a, read_only=not a.flags.writeable) as span:
            dev._copy_pieces(out.data.ptr, a.ctypes.data, a.nbytes, span, cupy.cuda.runtime.memcpyHostToDevice)
        return out

    def staged_in(a):
        flat = a.reshape(-1).view(np.uint8)
        return dev.upload(a.nbytes, lambda buf, off: np.copyto(buf, flat[off : off + len(buf)]), 0)

    fn = {
        ("out", "pinned in place"): pinned_out,
        ("out", "staging"): staged_out,
        ("out", "pageable"): pageable_out,
        ("out", "dsort"): dev.to_host,
        ("in", "pinned in place"): pinned_in,
        ("in", "staging"): staged_in,
        ("in", "dsort"): dev.from_host,
    }[direction, way]
    n = mib << 17  # int64 elements
    sources = [cupy.arange(n, dtype=cupy.int64) if direction == "out" else np.arange(n, dtype=np.int64) for _ in range(threads)]
    fn(sources[0])  # CUDA context, kernels, staging buffers made before the clock
    cupy.cuda.Device().synchronize()
    while not os.path.exists(start_file):
        time.sleep(0.001)

    def work(i):
        with cupy.cuda.Stream(non_blocking=True):
            for _ in range(iters):
                fn(sources[i])

    t = time.perf_counter()
    ts = [threading.Thread(target=work, args=(i,)) for i in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    print(time.perf_counter() - t, flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--procs", type=int, default=8)
    p.add_argument("--threads", type=int, default=4)
    p.add_argument("--mib", type=int, default=32)
    p.add_argument("--iters", type=int, default=6)
    p.add_argument("--json")
    a = p.parse_args()
    import cupy

    gpus = cupy.cuda.runtime.getDeviceCount()
    rows = []
    for direction, way in WAYS:
        start = tempfile.mktemp(prefix="dsort-transfer-")
        procs = []
        for k in range(a.procs):
            g = k % gpus
            env = dict(os.environ, CUDA_VISIBLE_DEVICES=",".join(str((g + j) % gpus) for j in range(gpus)))
            args = [sys.executable, __file__, "--child", direction, way, str(a.threads), str(a.mib), str(a.iters), start]
            procs.append(subprocess.Popen(args, env=env, stdout=subprocess.PIPE))
        time.sleep(8)  # every process ready (its context made, its first copy done)
        open(start, "w").close()
        walls = [float(q.communicate()[0].decode().split()[-1]) for q in procs]
        os.unlink(start)
        gib = a.procs * a.threads * a.iters * a.mib / 1024
        rows.append({"direction": direction, "way": way, "wall s": f"{max(walls):.3f}", "GiB/s": f"{gib / max(walls):.1f}"})
        print(rows[-1], flush=True)
    write_json(a.json, rows, procs=a.procs, threads=a.threads, mib=a.mib, iters=a.iters, gpus=gpus)
    print_table(rows, ["direction", "way", "wall s", "GiB/s"])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        d, w, t, m, i, f = sys.argv[2:8]
        _child(d, w, int(t), int(m), int(i), f)
    else:
        main()
