"""What reading another process's GPU run costs: CUDA IPC opens, copies and closes.

    python benchmarks/bench_ipc.py [--sizes 16,128,1024] [--count 16] [--slice 16] [--threads 8] [--json out.json]

An owner process (GPU 0) makes ``--count`` allocations of each size in MiB (as ``engine.ipc.share``
does: one ``cudaMalloc`` each) and hands their handles over; this process reads them from the last
GPU it sees (GPU 0 too where there is one: another process on the same GPU), as a merge reads
its slices of other workers' runs: ``1/--slice`` of each allocation copied to a buffer here.

Ways of reading, each timed per allocation (median, ms):

* ``first read here``: the process's first read of another process's allocation, after it enabled
  peer access to the owner's GPU (``--hold`` GiB held by both processes meanwhile).
* ``open-copy-close``: ``dsort.engine.ipc.opened`` as main uses it: open, copy, synchronize, close.
* ``... anchor held``: the same while one other allocation of that owner stays open here (does the
  mapping of peer access outlive the last close?).
* ``... 8 threads``: ``--threads`` threads doing it at once on distinct allocations (a worker's
  merges), the wall time over the count.
* ``cached``: every allocation opened once beforehand, then only copies (the lower bound).
* ``mapped here``: opened in the reader's own GPU's context (CUDA enables peer access for the
  mapping), copied by a plain device copy; first, before this process touches the owner's GPU.
  The opens alone too: one by one, and by ``--threads`` threads at once (do they overlap?).

The table comes last.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from _common import print_table, write_json

MiB = 1 << 20


def _owner(device, sizes, count, hold, conn):
    import cupy

    cupy.cuda.Device(device).use()
    keep, handles = [], {}
    if hold:
        keep.append(cupy.empty(hold << 30, cupy.uint8))  # what a worker holds besides its runs (input chunks, a pool)
    for size in sizes:
        hs = []
        for i in range(count + 1):  # one more: the anchor
            mem = cupy.cuda.memory.Memory(size * MiB)
            cupy.ndarray((size * MiB,), cupy.uint8, cupy.cuda.MemoryPointer(mem, 0)).fill(i % 251)
            keep.append(mem)
            hs.append(bytes(cupy.cuda.runtime.ipcGetMemHandle(mem.ptr)))
        handles[size] = hs
    cupy.cuda.runtime.deviceSynchronize()
    conn.send(handles)
    conn.recv()  # until the reader is done


def _read(handle, size, part, dst, src_device, out):
    """open, copy ``part`` bytes into ``out`` on GPU ``dst``, synchronize, close: seconds of each."""
    import cupy

    rt = cupy.cuda.runtime
    t0 = time.perf_counter()
    with cupy.cuda.Device(src_device):
        ptr = rt.ipcOpenMemHandle(handle)
    t1 = time.perf_counter()
    _copy(ptr, part, dst, src_device, out)
    t2 = time.perf_counter()
    with cupy.cuda.Device(src_device):
        rt.ipcCloseMemHandle(ptr)
    t3 = time.perf_counter()
    return t1 - t0, t2 - t1, t3 - t2


def _copy(ptr, part, dst, src_device, out):
    import cupy

    with cupy.cuda.Device(dst):
        s = cupy.cuda.get_current_stream()
        cupy.cuda.runtime.memcpyPeerAsync(out.data.ptr, dst, ptr, src_device, part, s.ptr)
        s.synchronize()


def measure_here(handles, size, count, slice_, dst, threads=1):
    """Rows of reads that map the owner's allocations into the reader's own GPU's context (opened
    there, peer access enabled lazily by the open), copied by a plain device copy: no context on the
    owner's GPU in this process. Run before anything here touches the owner's GPU."""
    import cupy

    rt = cupy.cuda.runtime
    part = size * MiB // slice_
    rows = []
    with cupy.cuda.Device(dst):
        out = cupy.empty(part, cupy.uint8)
        s = cupy.cuda.get_current_stream()

        def read(h):
            t0 = time.perf_counter()
            ptr = rt.ipcOpenMemHandle(h)
            t1 = time.perf_counter()
            rt.memcpyAsync(out.data.ptr, ptr, part, rt.memcpyDefault, s.ptr)
            s.synchronize()
            t2 = time.perf_counter()
            rt.ipcCloseMemHandle(ptr)
            return t1 - t0, t2 - t1, time.perf_counter() - t2

        first = read(handles[size][count])
        got = [read(h) for h in handles[size][:count]]
        # every allocation opened by `threads` threads at once (a merge's runs of several GPUs):
        # do the opens overlap, or does the driver take them one at a time?
        n = max(1, min(threads, count))

        def open_some(i):
            with cupy.cuda.Device(dst):
                return [rt.ipcOpenMemHandle(h) for h in handles[size][i:count:n]]

        t = time.perf_counter()
        with ThreadPoolExecutor(n) as pool:
            ptrs = [p for some in pool.map(open_some, range(n)) for p in some]
        at_once = (time.perf_counter() - t) / count
        for p in ptrs:
            rt.ipcCloseMemHandle(p)
        t = time.perf_counter()
        ptrs = [rt.ipcOpenMemHandle(h) for h in handles[size][:count]]
        one_by_one = (time.perf_counter() - t) / count
        times = []
        for p in ptrs:
            t = time.perf_counter()
            rt.memcpyAsync(out.data.ptr, p, part, rt.memcpyDefault, s.ptr)
            s.synchronize()
            times.append(time.perf_counter() - t)
        for p in ptrs:
            rt.ipcCloseMemHandle(p)
    for way, (per, opens, closes) in (
        ("mapped here: first read", (sum(first), first[0], first[2])),
        ("mapped here: open-copy-close", _medians(got)),
    ):
        rows.append(
            {
                "MiB": size,
                "read MiB": round(part / MiB, 2),
                "way": way,
                "ms per allocation": round(per * 1e3, 3),
                "open ms": round(opens * 1e3, 3),
                "close ms": round(closes * 1e3, 3),
                "GB/s": round(part / per / 1e9, 2),
            }
        )
    for way, per in (
        ("mapped here: opened one by one (wall / count)", one_by_one),
        (f"mapped here: opened by {n} threads at once (wall / count)", at_once),
    ):
        rows.append({"MiB": size, "read MiB": round(part / MiB, 2), "way": way, "open ms": round(per * 1e3, 3)})
    per = statistics.median(times)
    rows.append(
        {
            "MiB": size,
            "read MiB": round(part / MiB, 2),
            "way": "mapped here: cached",
            "ms per allocation": round(per * 1e3, 3),
            "GB/s": round(part / per / 1e9, 2),
        }
    )
    return rows


def _medians(got):
    return statistics.median(sum(g) for g in got), statistics.median(g[0] for g in got), statistics.median(g[2] for g in got)


def measure(handles, size, count, slice_, threads, dst, src_device):
    import cupy

    from dsort.engine.device import peer_access

    part = size * MiB // slice_
    t = time.perf_counter()
    peer_access(dst, src_device)
    enable = time.perf_counter() - t
    with cupy.cuda.Device(dst):
        first_out = cupy.empty(part, cupy.uint8)
    first = _read(handles[size][count], size, part, dst, src_device, first_out)  # the anchor's, never read before
    with cupy.cuda.Device(dst):
        outs = [cupy.empty(part, cupy.uint8) for _ in range(max(threads, 1))]
    hs = handles[size][:count]
    anchor = handles[size][count]
    rows = []

    def row(way, per, opens=None, closes=None):
        r = {"MiB": size, "read MiB": round(part / MiB, 2), "way": way, "ms per allocation": round(per * 1e3, 3)}
        if opens is not None:
            r["open ms"] = round(opens * 1e3, 3)
            r["close ms"] = round(closes * 1e3, 3)
        r["GB/s"] = round(part / per / 1e9, 2)
        rows.append(r)

    row(f"first read here (peer access enabled first: {enable * 1e3:.1f} ms)", sum(first), first[0], first[2])
    for _ in range(2):  # the first round warms up (peer access, the first mapping)
        got = [_read(h, size, part, dst, src_device, outs[0]) for h in hs]
    row("open-copy-close", *_medians(got))

    with cupy.cuda.Device(src_device):
        held = cupy.cuda.runtime.ipcOpenMemHandle(anchor)
    got = [_read(h, size, part, dst, src_device, outs[0]) for h in hs]
    row("open-copy-close, anchor held", *_medians(got))

    lock = threading.Lock()  # engine.ipc opens and closes under one lock a process

    def locked_read(h, out):
        t = time.perf_counter()
        with lock:
            with cupy.cuda.Device(src_device):
                ptr = cupy.cuda.runtime.ipcOpenMemHandle(h)
        _copy(ptr, part, dst, src_device, out)
        with lock:
            with cupy.cuda.Device(src_device):
                cupy.cuda.runtime.ipcCloseMemHandle(ptr)
        return time.perf_counter() - t

    if threads > 1:
        t = time.perf_counter()
        ts = [threading.Thread(target=lambda i=i: [locked_read(h, outs[i]) for h in hs[i::threads]]) for i in range(threads)]
        for x in ts:
            x.start()
        for x in ts:
            x.join()
        row(f"open-copy-close, {threads} threads (wall / count)", (time.perf_counter() - t) / len(hs))
    with cupy.cuda.Device(src_device):
        cupy.cuda.runtime.ipcCloseMemHandle(held)

    t = time.perf_counter()
    with cupy.cuda.Device(src_device):
        ptrs = [cupy.cuda.runtime.ipcOpenMemHandle(h) for h in hs]
    opening = (time.perf_counter() - t) / len(hs)
    times = []
    for p in ptrs:
        t = time.perf_counter()
        _copy(p, part, dst, src_device, outs[0])
        times.append(time.perf_counter() - t)
    row(f"cached (opened once: {opening * 1e3:.3f} ms each)", statistics.median(times))
    with cupy.cuda.Device(src_device):
        for p in ptrs:
            cupy.cuda.runtime.ipcCloseMemHandle(p)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="16,128,1024", help="allocation sizes, MiB")
    ap.add_argument("--count", type=int, default=16)
    ap.add_argument("--slice", type=int, default=16, help="each read copies 1/SLICE of an allocation")
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--hold", type=int, default=0, help="GiB the owner (and this reader) hold besides (input chunks, say)")
    ap.add_argument("--json")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    import cupy

    n = cupy.cuda.runtime.getDeviceCount()
    held = []
    if a.hold:
        for d in {0, n - 1}:
            with cupy.cuda.Device(d):
                held.append(cupy.empty(a.hold << 30, cupy.uint8))
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    p = ctx.Process(target=_owner, args=(0, sizes, a.count, a.hold, there))
    p.start()
    handles = here.recv()
    rows = []
    try:
        if n > 1 and not a.hold:  # nothing here has touched GPU 0 yet
            for size in sizes:
                rows += [{"reader GPU": n - 1, **r} for r in measure_here(handles, size, a.count, a.slice, n - 1, a.threads)]
        for dst in sorted({n - 1, 0}, reverse=True):
            for size in sizes:
                for r in measure(handles, size, a.count, a.slice, a.threads, dst, 0):
                    rows.append({"reader GPU": dst, **r})
    finally:
        here.send("done")
        p.join()
    write_json(a.json, rows, gpus=n)
    print_table(rows, ["reader GPU", "MiB", "read MiB", "way", "ms per allocation", "open ms", "close ms", "GB/s"])


if __name__ == "__main__":
    main()
