"""What moving a sort's keys between host memory and the GPU costs, piece by piece.

    python benchmarks/bench_host_transfer.py [--gib 2] [--json out.json]

A sort of keys held in host memory on GPU workers copies every key host → device and back into new
host memory. This measures the pieces on the machine at hand: first touch of new host memory (one
process, then two at once, as two workers would), host → device (pageable; page-locked in place with
cudaHostRegister; the registering itself), device → host into new pageable memory, into memory
already touched, and into page-locked memory from CuPy's pinned pool (first use and reuse), and
whether the GPUs can reach each other's memory directly (peer access). The table comes last.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import time

import numpy as np
from _common import print_table, write_json


def _touch(nbytes, q=None):
    t = time.perf_counter()
    a = np.empty(nbytes // 8, np.int64)
    a.fill(1)
    dt = time.perf_counter() - t
    if q is not None:
        q.put(dt)
    return dt


def first_touch(nbytes, procs):
    if procs == 1:
        return _touch(nbytes)
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_touch, args=(nbytes, q)) for _ in range(procs)]
    for p in ps:
        p.start()
    times = [q.get() for _ in ps]
    for p in ps:
        p.join()
    return max(times)


def timed(fn, sync=None):
    t = time.perf_counter()
    out = fn()
    if sync:
        sync()
    return time.perf_counter() - t, out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gib", type=float, default=2)
    p.add_argument("--json")
    args = p.parse_args(argv)
    nbytes = int(args.gib * 2**30) // 8 * 8
    rows = []

    def row(what, dt, n=nbytes, **extra):
        rows.append({"what": what, "GiB": round(n / 2**30, 2), "s": round(dt, 4), "GB/s": round(n / dt / 1e9, 2), **extra})
        print(rows[-1], flush=True)

    row("first touch of new host memory, 1 process", first_touch(nbytes, 1))
    row("first touch of new host memory, 2 processes at once (each)", first_touch(nbytes, 2))
    row("touch again after free, same process", _touch(nbytes))

    import cupy

    sync = cupy.cuda.Device().synchronize
    h = np.random.default_rng(0).integers(0, 2**62, nbytes // 8, dtype=np.int64)
    d = cupy.empty_like(h)
    cupy.asarray(h[:1024])
    row("host -> device, pageable (cupy.asarray)", timed(lambda: cupy.asarray(h), sync)[0])
    rt = cupy.cuda.runtime
    t_reg, _ = timed(lambda: rt.hostRegister(h.ctypes.data, h.nbytes, 0))
    row("cudaHostRegister of the host array", t_reg)
    row("host -> device, registered", timed(lambda: d.set(h), sync)[0])
    t_unreg, _ = timed(lambda: rt.hostUnregister(h.ctypes.data))
    row("cudaHostUnregister", t_unreg)
    row("device -> host, new pageable memory (cupy.asnumpy)", timed(lambda: cupy.asnumpy(d), sync)[0])
    out = np.empty_like(h)
    out.fill(0)
    row("device -> host, touched pageable memory", timed(lambda: d.get(out=out), sync)[0])
    out = None

    def pinned():
        o = cupy.cuda.alloc_pinned_memory(nbytes)
        a = np.frombuffer(o, np.int64, nbytes // 8)
        d.get(out=a)
        return a

    t, a = timed(pinned, sync)
    row("device -> host, pinned pool, first use", t)
    del a
    row("device -> host, pinned pool, reuse", timed(pinned, sync)[0])
    from dsort.engine import device

    row("dsort from_host (page-locked in place)", timed(lambda: device.from_host(h), sync)[0])
    row("dsort to_host (new memory, touched by threads, page-locked)", timed(lambda: device.to_host(d), sync)[0])
    row("dsort to_host again", timed(lambda: device.to_host(d), sync)[0])
    n = cupy.cuda.runtime.getDeviceCount()
    if n > 1:
        peer = cupy.cuda.runtime.deviceCanAccessPeer(0, 1)
        with cupy.cuda.Device(1):
            d1 = cupy.empty_like(d)
        d1.data.copy_from_device(d.data, nbytes)
        sync()
        t, _ = timed(lambda: d1.data.copy_from_device(d.data, nbytes), lambda: (cupy.cuda.Device(1).synchronize(), sync()))
        row(f"device 0 -> device 1 copy (peer access: {bool(peer)})", t)
    write_json(args.json, rows, benchmark="host_transfer")
    print()
    print_table(rows, ["what", "GiB", "s", "GB/s"])


if __name__ == "__main__":
    main()
