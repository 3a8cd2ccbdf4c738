"""The mergesort host driver (MGPU's ``kernel_mergesort``): a CTA blocksort of each tile, then
global passes that double the run length, each a Merge Path partition plus a merge kernel,
ping-ponging between two buffers so that the last pass lands in the output. Kernels, tiles and
shared memory come from the key order's sort plan (:mod:`dsort.engine._kernels`).
"""

from __future__ import annotations

import cupy
import numpy as np

from . import _codes
from . import _cuda as C
from . import _kernels as P
from ._codes import Coded


def index_dtype(n: int):
    """Positions of an array of n keys, as the kernels generate and carry them."""
    return cupy.uint32 if n < 2**32 else cupy.uint64


def mergesort(
    coded: Coded,
    order: P.Order,
    values=None,
    iota: bool = False,
    int64_out: bool = False,
    ways: int | None = None,
):
    """Stable sort of coded keys; values (1-D uint32/uint64) carried, or positions generated
    (iota) in the index dtype for n. int64_out (with iota): positions come back as int64, written
    so by the last pass. ``ways``: runs merged by each global pass, 2 or 4 (default: the tuning's).
    Returns (keys, values or None)."""
    k = coded.data
    n = k.shape[0]
    if iota:
        values = cupy.empty(0, dtype=index_dtype(n))  # only its dtype matters below
    int64_out = int64_out and iota and values.dtype == cupy.uint32
    vbytes = values.dtype.itemsize if values is not None else 0
    mode = P.Mode.KEYS if values is None else P.Mode.IOTA if iota else P.Mode.CARRY
    plan = P.sort_plan(order, vbytes, mode, C.target())
    ways = plan.tuning.ways if ways is None else ways
    if ways not in (2, 4):
        raise ValueError(f"a pass merges 2 or 4 runs, not {ways}")
    four = P.merge4_plan(order, vbytes, mode, C.target()) if ways == 4 else None
    blocks = plan.blocksort.grid(n)
    passes, span = 0, 1
    while span < blocks:  # each pass merges `ways` runs into one
        passes, span = passes + 1, span * ways

    # Ping-pong buffers; the blocksort writes where an even number of passes later lands in keys[0].
    keys = [cupy.empty_like(k), cupy.empty_like(k) if passes else None]
    vals = [None, None]
    if vbytes:
        vals = [cupy.empty(n, values.dtype), cupy.empty(n, values.dtype) if passes else None]
    if int64_out:  # the last write of the values goes to its own int64 buffer
        final = cupy.empty(n, dtype=cupy.int64)
        if passes == 0:
            vals[0] = final
    cur = passes % 2

    bs = plan.blocksort_int64 if int64_out and passes == 0 else plan.blocksort
    vin = values if mode is P.Mode.CARRY else C.NULL
    with C.phase("blocksort"):
        C.launch(bs, blocks, (k, vin, keys[cur], vals[cur] if vbytes else C.NULL, np.int64(n)))

    if passes:
        tiles = plan.merge_runs.grid(n)
        stage = four or plan  # the kernels of each pass: 4-way, or the sort plan's 2-way
        parts = cupy.empty((tiles + 1) * (4 if four else 1), dtype=cupy.int64)
        # a 4-way pass's 2-way co-ranks
        pairs = cupy.empty(tiles + 1, dtype=cupy.int64) if four else None
        run = plan.tuning.tile_sort
        while run < n:
            src, dst = cur, 1 - cur
            last = run * ways >= n
            mr = stage.merge_runs_int64 if int64_out and last else stage.merge_runs
            vout = (final if int64_out and last else vals[dst]) if vbytes else C.NULL
            with C.phase(f"pass run={run}"):
                args = (
                    keys[src],
                    np.int64(n),
                    np.int64(run),
                    np.int64(plan.tuning.tile_merge),
                    np.int64(tiles + 1),
                )
                with C.phase(f"cuts run={run}"):
                    # the co-ranks of (a, b) and (c, e) at every tile, then the 4-way ones from them
                    if four:
                        C.launch(plan.partition, plan.partition.grid(tiles + 1), args + (pairs,))
                        args += (pairs,)
                    C.launch(stage.partition, stage.partition.grid(tiles + 1), args + (parts,))
                args = (
                    keys[src],
                    vals[src] if vbytes else C.NULL,
                    keys[dst],
                    vout,
                    np.int64(n),
                    np.int64(run),
                    parts,
                )
                C.launch(mr, tiles, args)
            cur, run = dst, run * ways
    assert cur == 0
    return keys[0], (final if int64_out else vals[0])


def sorting_permutation(keys, descending: bool, na_first: bool, int64_out: bool = False):
    """Stable sorting permutation (index dtype for n, or int64) and, when cheap, the sorted keys
    (else None)."""
    if _codes.wide_rows(keys):
        rows = keys  # a view of wider records will do: the packing reads each row where it is
        perm = None
        for offset in reversed(range(0, rows.shape[1], 16)):  # least significant slice first
            coded = _codes.pack(rows, offset, min(16, rows.shape[1] - offset), perm)
            _, perm = mergesort(
                coded, coded.order(descending, False), values=perm, iota=perm is None
            )
        return perm, None
    coded = _codes.encode(keys)
    sk, perm = mergesort(coded, coded.order(descending, na_first), iota=True, int64_out=int64_out)
    return perm, coded.decode(sk)
