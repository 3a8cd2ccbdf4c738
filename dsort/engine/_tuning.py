"""Launch parameters of the mergesort kernels per GPU architecture (CUB's policy selector).

A policy maps (key bytes, value bytes) to a :class:`Tuning`: NT, the threads of the blocksort CTA
and of the merge CTA, and VT, the keys per thread of both. :func:`select` picks the table of the
newest measured architecture not newer than the device (as CUB's ``ChainedPolicy`` does); a device
older than every measured architecture takes the oldest table. Only the H100 (``sm_90``) has been
measured, so every GPU starts from its table for now: the kernel plan
(:func:`dsort.engine._kernels.fitted`) then halves NT until the tiles' shared memory fits the
device, which is what changes on GPUs with less shared memory per CTA than the H100 (``sm_80``: 163
KiB, ``sm_86``/``sm_89``: 99 KiB, ``sm_75``: 64 KiB against 227 KiB). A table measured on another
architecture goes into :data:`POLICIES` under its compute capability.

Why these shapes: VT odd, so the thread-major transposes through shared memory are free of bank
conflicts; the blocksort's NT a multiple of the merge's, so the blocksort tile is a multiple of the
merge tile and a merge tile never straddles two pairs of runs; a larger blocksort tile saves global
passes but costs blocksort time. The measurements that chose them are in BENCHMARKS.md
(``benchmarks/bench_gpu_sort.py --sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    nt_blocksort: int  # threads per CTA of the blocksort
    nt_merge: int  # threads per CTA of the merges (passes and the standalone merge)
    vt: int  # keys per thread, both
    # runs merged by one global pass: 2, or 4 (kernels/kernel_merge4.cu: half the passes)
    ways: int = 2

    @property
    def tile_sort(self) -> int:
        """Keys per CTA of the blocksort: the length of the runs the global passes start from."""
        return self.nt_blocksort * self.vt

    @property
    def tile_merge(self) -> int:
        """Output keys per CTA of a merge."""
        return self.nt_merge * self.vt


def _same_for_every_value(table: dict[int, Tuning]) -> dict[tuple[int, int], Tuning]:
    return {(key, value): t for key, t in table.items() for value in (0, 4, 8)}


# Compute capability (major * 10 + minor) -> {(key bytes, value bytes): Tuning}. Value bytes 0 is a
# keys-only sort; 4 and 8 are carried values or generated positions (argsort).
# sm_90 (H100): 4-byte keys swept keys-only and as argsort pairs, 8-byte keys keys-only; the other
# value sizes take their key size's tuning, unmeasured. 4-way passes everywhere: faster than 2-way
# at every key size, most for the widest rows (BENCHMARKS.md section 8).
_SM90 = _same_for_every_value(
    {4: Tuning(512, 256, 21, 4), 8: Tuning(512, 256, 17, 4), 16: Tuning(256, 128, 17, 4)}
)
POLICIES: dict[int, dict[tuple[int, int], Tuning]] = {90: _SM90}


def policy_arch(arch: int) -> int:
    """The measured architecture whose table a device of compute capability ``arch`` takes."""
    older = [a for a in POLICIES if a <= arch]
    return max(older) if older else min(POLICIES)


def select(arch: int, key_bytes: int, value_bytes: int) -> Tuning:
    """The tuning of (key bytes, value bytes) for a device of compute capability ``arch``
    (e.g. 90 for ``sm_90``), before it is fitted to the device's shared memory."""
    return POLICIES[policy_arch(arch)][(key_bytes, value_bytes)]
