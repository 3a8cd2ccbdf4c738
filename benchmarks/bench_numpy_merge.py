"""NumPy engine: merge of two sorted halves against NumPy's stable sort of their concatenation.

    python benchmarks/bench_numpy_merge.py [--log2n 24] [--repeat 7] [--json out.json]

Each half holds 2^log2n keys (default 2^24, so 2^25 merged). Fresh random data for every run.
"""

from __future__ import annotations

import argparse

import numpy as np
from _common import paired_times, print_table, write_json

from dsort.engine import numpy_engine as e


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--log2n", type=int, default=24)
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json")
    args = p.parse_args(argv)
    n = 1 << args.log2n
    rng = np.random.default_rng()
    rows = []
    for dtype in ("int64", "float64"):

        def halves(dtype=dtype):
            x = rng.integers(-(2**62), 2**62, 2 * n).astype(dtype)
            return np.sort(x[:n]), np.sort(x[n:])

        def pairs():
            a, b = halves()
            return a, b, np.arange(n), np.arange(n, 2 * n)

        cases = [
            ("keys", lambda a, b: e.merge(a, b), lambda a, b: np.sort(np.concatenate([a, b]), kind="stable"), halves),
            (
                "keys+values",
                lambda a, b, va, vb: e.merge(a, b, va, vb),
                lambda a, b, va, vb: (lambda c, o: (c[o], np.concatenate([va, vb])[o]))(
                    np.concatenate([a, b]), np.argsort(np.concatenate([a, b]), kind="stable")
                ),
                pairs,
            ),
        ]
        for what, ours, peer, setup in cases:
            t_ours, t_peer = paired_times([ours, peer], args.repeat, setup=setup)
            rows.append(
                {
                    "dtype": dtype,
                    "what": what,
                    "n": f"2x2^{args.log2n}",
                    "dsort merge s": f"{t_ours:.3f}",
                    "np.sort(concat) s": f"{t_peer:.3f}",
                    "speedup": f"{t_peer / t_ours:.2f}x",
                }
            )
    write_json(args.json, rows, benchmark="numpy_merge")
    print_table(rows, list(rows[0]))


if __name__ == "__main__":
    main()
