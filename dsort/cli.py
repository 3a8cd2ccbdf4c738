"""The ``dsort`` command line (``python -m dsort`` too)."""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _demo(args) -> int:
    """Sort random keys with the engine and check the result against NumPy's stable sort."""
    from dsort import engine

    rng = np.random.default_rng(args.seed)
    x = rng.integers(-(2**62), 2**62, args.n)
    e = engine.get(x)
    t = time.perf_counter()
    s = e.sort(x)
    dt = time.perf_counter() - t
    ok = np.array_equal(s, np.sort(x, kind="stable"))
    print(f"sorted {args.n:,} int64 keys ({x.nbytes / 1e6:.1f} MB) with the {e.name} engine in {dt:.3f} s "
          f"({x.nbytes / dt / 1e9:.2f} GB/s); order {'verified' if ok else 'WRONG'}")
    return 0 if ok else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="dsort", description="GPU-accelerated, out-of-core sorting on Dask")
    sub = p.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="sort random data and verify it")
    d.add_argument("-n", type=int, default=10_000_000, help="number of keys (default 10,000,000)")
    d.add_argument("--seed", type=int, default=None)
    d.set_defaults(func=_demo)
    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
