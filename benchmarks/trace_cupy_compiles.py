"""Which CuPy kernels a ``dsort`` command compiles, and which line of dsort asks for each.

Runs ``dsort ARGS`` in this process with CuPy's NVRTC program (``cupy.cuda.compiler.
_NVRTCProgram.compile``, reached only when CuPy's caches miss) wrapped: every compile is timed and
traced to the innermost dsort frame that caused it. Run it with an empty
``CUPY_CACHE_DIR`` to see what a first use on a fresh machine compiles (dsort's own kernels come
from the shipped cubins where ``python -m dsort.engine._aot`` built them).

    CUPY_CACHE_DIR=$(mktemp -d) python benchmarks/trace_cupy_compiles.py sort in.bin out.bin --gpu --overwrite

The table is printed last; ``--json PATH`` (before the dsort arguments) writes the rows too.
"""

from __future__ import annotations

import os
import re
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import print_table, write_json  # noqa: E402


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    json_path = None
    if argv[:1] == ["--json"]:
        json_path, argv = argv[1], argv[2:]
    import cupy.cuda.compiler as compiler

    from dsort.cli import main as dsort_main

    rows = []
    real = compiler._NVRTCProgram.compile  # every NVRTC compile of CuPy's passes here

    def traced(program, *args, **kwargs):
        t = time.perf_counter()
        try:
            return real(program, *args, **kwargs)
        finally:
            source = getattr(program, "src", b"")
            source = source.decode(errors="replace") if isinstance(source, bytes) else str(source)
            names = sorted(set(re.findall(r"__global__\s+void\s+(\w+)", source)))
            frames = [f for f in traceback.extract_stack() if "/dsort/" in f.filename.replace("\\", "/")]
            where = f"{Path(frames[-1].filename).name}:{frames[-1].lineno} {frames[-1].name}" if frames else "?"
            rows.append({"kernels": " ".join(names) or "?", "seconds": round(time.perf_counter() - t, 3), "asked by": where})

    compiler._NVRTCProgram.compile = traced
    cache = Path(os.environ.get("CUPY_CACHE_DIR") or Path.home() / ".cupy" / "kernel_cache")

    def cached():  # CuPy's cache files: the wrapper's own check (a compile it missed still adds one)
        return len([p for p in cache.glob("*") if p.suffix != ".built"]) if cache.is_dir() else 0

    before, t = cached(), time.perf_counter()
    rc = dsort_main(argv)
    wall = time.perf_counter() - t
    added = cached() - before
    write_json(json_path, rows, command=argv, wall=wall, rc=rc, cache_files_added=added)
    print()
    print(
        f"dsort {' '.join(argv)}: exit {rc}, {wall:.2f} s; CuPy compiled {len(rows)} modules in "
        f"{sum(r['seconds'] for r in rows):.2f} s; files added to its cache {cache}: {added}"
    )
    print_table(rows, ["kernels", "seconds", "asked by"])
    return rc


if __name__ == "__main__":
    sys.exit(main())
