"""CuPy engine against CuPy's own sort on one GPU (issue 3's targets), all at 2^log2n keys.

    python benchmarks/bench_gpu_sort.py [--log2n 28] [--repeat 10] [--json out.json] [--sweep]

Every case: fresh random data per run (made outside the timed region), warm-up first, CUDA-event
timings, median of --repeat runs, and the peer timed in the same run on the same inputs.
Ratios are throughput ratios (peer time / dsort time: above 1 means dsort is faster).
--sweep first times other tunings (NT of blocksort, NT of merge, VT) of 4- and 8-byte keys.
"""

from __future__ import annotations

import argparse
import statistics

import cupy
import numpy as np
from _common import print_table, write_json

from dsort.engine import _cuda, _kernels, _tuning
from dsort.engine import cupy_engine as e


def gpu_time(fn, setup, repeat, warmup=2):
    """Median milliseconds of fn(*setup()) by CUDA events; setup runs outside the timed region."""
    times = []
    for i in range(warmup + repeat):
        args = setup()
        cupy.cuda.Device().synchronize()
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        fn(*args)
        end.record()
        end.synchronize()
        if i >= warmup:
            times.append(cupy.cuda.get_elapsed_time(start, end))
        del args
    return statistics.median(times)


def random_keys(n, dtype):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return cupy.random.standard_normal(n, dtype=dtype) * 1e3
    bits = cupy.random.randint(0, 2**31, n, dtype=cupy.int64)
    if dtype.itemsize == 8:
        bits = (bits << 33) ^ cupy.random.randint(0, 2**31, n, dtype=cupy.int64)
    else:
        bits = bits * 2 + (cupy.random.random(n) < 0.5)
    return bits.astype(dtype)


def phases(fn, args):
    """Per-phase milliseconds of one engine call (blocksort, each merge pass)."""
    with _cuda.traced() as out:
        fn(*args)
    return out


def pass_note(ph, nbytes):
    """The note of a traced sort: its blocksort, its passes (median, the cuts' share of it) and the
    passes' bandwidth for ``nbytes`` read and written once each a pass."""
    passes = [ms for label, ms in ph if label.startswith("pass")]
    if not passes:
        return ""
    cuts = [ms for label, ms in ph if label.startswith("cuts")]
    med = statistics.median(passes)
    return (
        f"blocksort {ph[0][1]:.2f} ms + {len(passes)} passes x {med:.2f} ms (cuts {statistics.median(cuts):.3f}) "
        f"({2 * nbytes / (med * 1e-3) / 1e12:.2f} TB/s)"
    )


SWEEP = {
    4: [(512, 256, 17), (512, 256, 21), (512, 256, 23), (512, 256, 25), (256, 256, 25)],
    8: [(512, 256, 17), (512, 256, 21)],
}


def _set_policy(table, entries):
    """Change this device's policy table and forget the plans built from it."""
    table.update(entries)
    _kernels.fitted.cache_clear()
    _kernels.sort_plan.cache_clear()
    _kernels.merge4_plan.cache_clear()


def sweep(n, repeat):
    """Time sort (and argsort for 4-byte keys) under each tuning of SWEEP, as this device's
    policy; prints a table."""
    table = _tuning.POLICIES[_tuning.policy_arch(_cuda.target().arch)]
    saved = dict(table)
    rows = []
    for key_bytes, variants in SWEEP.items():
        dtype = "uint32" if key_bytes == 4 else "int64"
        setup = lambda dtype=dtype: (random_keys(n, dtype),)  # noqa: E731
        for v in variants:
            _set_policy(table, {(kb, vb): _tuning.Tuning(*v) for kb, vb in saved if kb == key_bytes})
            t = gpu_time(e.sort, setup, repeat, warmup=1)
            ta = gpu_time(e.argsort, setup, repeat, warmup=1) if key_bytes == 4 else float("nan")
            ph = [p for p in phases(e.sort, setup()) if p[0] != "check"]
            passes = [ms for label, ms in ph if label.startswith("pass")]
            rows.append(
                {
                    "dtype": dtype,
                    "NT blocksort, NT merge, VT": str(v),
                    "sort ms": f"{t:.2f}",
                    "argsort ms": f"{ta:.2f}",
                    "blocksort ms": f"{ph[0][1]:.2f}",
                    "passes": len(passes),
                    "pass ms (median)": f"{statistics.median(passes):.3f}" if passes else "",
                }
            )
            print(rows[-1], flush=True)
    _set_policy(table, saved)
    print_table(rows, list(rows[0]))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log2n", type=int, default=28)
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--json")
    p.add_argument("--sweep", action="store_true", help="time other tunings first")
    p.add_argument("--ways", type=int, default=0, help="runs merged by each global pass, 2 or 4 (default: the tuning's)")
    args = p.parse_args(argv)
    if args.ways:  # every tuning of this device's table merges that many runs a pass
        from dataclasses import replace

        table = _tuning.POLICIES[_tuning.policy_arch(_cuda.target().arch)]
        _set_policy(table, {k: replace(t, ways=args.ways) for k, t in table.items()})
    n = 1 << args.log2n
    r = args.repeat
    rows, notes = [], {}
    dev = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
    sweep_rows = sweep(n, max(5, r // 2)) if args.sweep else []

    def row(case, dtype, ours, peer, peer_name, target, extra=""):
        ratio = peer / ours
        rows.append(
            {
                "case": case,
                "dtype": dtype,
                "n": f"2^{args.log2n}",
                "dsort ms": f"{ours:.3f}",
                "peer": peer_name,
                "peer ms": f"{peer:.3f}",
                "ratio": f"{ratio:.2f}x",
                "target": target,
                "met": "yes" if ratio >= float(target.rstrip("x").lstrip(">=")) else "no",
                "note": extra,
            }
        )
        print(rows[-1], flush=True)

    # Device copy bandwidth (bytes read + written), the yardstick of the merge.
    src = random_keys(n, "uint32")
    dst = cupy.empty_like(src)
    t_copy = gpu_time(lambda: cupy.copyto(dst, src), lambda: (), r)
    copy_bw = 2 * src.nbytes / (t_copy * 1e-3)
    src = dst = None  # free the device memory before the sorts below
    notes["copy_TBps"] = copy_bw / 1e12

    # 1. merge of two sorted uint32 halves.
    def halves():
        x = random_keys(n, "uint32")
        return cupy.sort(x[: n // 2]), cupy.sort(x[n // 2 :])

    t = gpu_time(lambda a, b: e.merge(a, b), halves, r)
    t_peer = gpu_time(lambda a, b: cupy.sort(cupy.concatenate([a, b])), halves, r)
    bw = 2 * n * 4 / (t * 1e-3)  # bytes read + written per second
    ph = [phases(lambda a, b: e.merge(a, b), halves()) for _ in range(3)][-1]  # the last of 3 traced calls: warm
    merge_ms = sum(ms for label, ms in ph if label == "merge")
    notes["merge_phases_ms"] = dict(ph)
    row(
        "merge 2 sorted halves",
        "uint32",
        t,
        t_peer,
        "cupy.sort(concat)",
        ">=5x",
        f"{bw / 1e12:.2f} TB/s = {100 * bw / copy_bw:.0f}% of copy {copy_bw / 1e12:.2f} TB/s (target 70%); phases "
        + ", ".join(f"{label} {ms:.3f}" for label, ms in ph)
        + f" ms: the merge kernel alone {100 * 2 * n * 4 / (merge_ms * 1e-3) / copy_bw:.0f}% of copy",
    )

    # 2. mergesort, keys only.
    for dtype in ("uint32", "int64", "float64"):
        setup = lambda dtype=dtype: (random_keys(n, dtype),)  # noqa: E731
        t = gpu_time(e.sort, setup, r)
        t_peer = gpu_time(cupy.sort, setup, r)
        ph = [p for p in phases(e.sort, setup()) if p[0] != "check"]
        row("sort keys", dtype, t, t_peer, "cupy.sort", ">=0.5x", pass_note(ph, n * np.dtype(dtype).itemsize))

    # 3. argsort (pairs: keys + uint32 positions).
    setup = lambda: (random_keys(n, "uint32"),)  # noqa: E731
    t = gpu_time(e.argsort, setup, r)
    t_peer = gpu_time(cupy.argsort, setup, r)
    ph = [p for p in phases(e.argsort, setup()) if p[0] != "check"]
    row("argsort (pairs)", "uint32", t, t_peer, "cupy.argsort", ">=0.5x", pass_note(ph, n * 8))

    # 4. already sorted input.
    setup = lambda: (cupy.sort(random_keys(n, "uint32")),)  # noqa: E731
    t = gpu_time(e.sort, setup, r)
    t_peer = gpu_time(cupy.sort, setup, r)
    ph = phases(e.sort, setup())
    row(
        "sort of sorted input",
        "uint32",
        t,
        t_peer,
        "cupy.sort",
        ">=5x",
        f"check+copy kernel {ph[0][1]:.2f} ms ({2 * n * 4 / (ph[0][1] * 1e-3) / 1e12:.2f} TB/s)",
    )

    # 5. 10-byte keys, int64 positions; the peer gets the key as two uint64 columns (bytes 0-7
    #    big-endian, bytes 8-9), made outside its timed region.
    def ten_bytes():
        words = cupy.random.randint(0, 2**31, 3 * n, dtype=cupy.int64).astype(cupy.uint32) * 2
        rows_ = cupy.ascontiguousarray(words.view(cupy.uint8).reshape(n, 12)[:, :10])
        del words
        hi = cupy.zeros(n, dtype=cupy.uint64)
        for c in range(8):
            hi = (hi << 8) | rows_[:, c].astype(cupy.uint64)
        lo = (rows_[:, 8].astype(cupy.uint64) << 8) | rows_[:, 9].astype(cupy.uint64)
        return rows_, cupy.stack([lo, hi])

    t = gpu_time(lambda rows_, cols: e.argsort(rows_), ten_bytes, r)
    try:
        t_peer = gpu_time(lambda rows_, cols: cupy.lexsort(cols), ten_bytes, max(3, r // 3), warmup=1)
    except Exception as exc:  # report, don't lose the table
        print(f"cupy.lexsort failed: {exc!r}")
        t_peer = float("nan")
    row("argsort 10-byte keys", "rows10", t, t_peer, "cupy.lexsort(2 uint64 cols)", ">=1x")

    tune = {f"{k}+{v}": (t.nt_blocksort, t.nt_merge, t.vt) for (k, v), t in _kernels.tunings(_cuda.target()).items()}
    write_json(args.json, rows, benchmark="gpu_sort", device=dev, cupy=cupy.__version__, tuning=tune, sweep=sweep_rows, **notes)
    print(f"\ndevice: {dev}; cupy {cupy.__version__}; copy {copy_bw / 1e12:.2f} TB/s; tuning (NT blocksort, NT merge, VT): {tune}")
    print_table(rows, list(rows[0]))


if __name__ == "__main__":
    main()
