"""The launch box of dsort's kernels (as moderngpu's ``launch_box.hxx``): where the CUDA sources
are, the key and value types they take, a kernel's launch shape (:class:`Kernel`: its module,
threads, tile and shared memory), the device a plan is for (:class:`Target`), and the tuning
fitted to it (:func:`fitted`). Pure Python, no device. :mod:`._kernels` names every kernel with
these.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import _tuning
from ._tuning import Tuning


def kernel_dir() -> Path:
    """Where the CUDA sources are: inside the installed package, or ``kernels/`` of a source
    tree."""
    here = Path(__file__).resolve().parent.parent  # dsort/
    for candidate in (here / "kernels", here.parent / "kernels"):
        if (candidate / "README.md").is_file():
            return candidate
    raise FileNotFoundError(
        f"dsort's CUDA sources are missing: looked in {here / 'kernels'} and "
        f"{here.parent / 'kernels'}"
    )


SORT_SOURCES = ("kernel_mergesort.cu", "kernel_merge.cu")
MERGE4_SOURCES = ("kernel_merge4.cu",)
SEARCH_SOURCES = ("kernel_search.cu",)
ROWS_SOURCES = ("kernel_rows.cu",)
CHECK_SOURCES = ("kernel_check.cu",)

QUERY_THREADS = 256  # CTA of the one-thread-per-query kernels (searches, partitions, byte rows)
# CTA of k_check_sorted, and the keys each thread reads per tile
CHECK_THREADS, CHECK_ITEMS = 256, 8
# The sortedness checks run persistent grids (their CTAs stop once the answer is known): this many
# CTAs per SM keep the memory system busy.
CHECK_CTAS_PER_SM, ROWS_CHECK_CTAS_PER_SM = 8, 16
VALSORT_CTAS_PER_SM = 8  # the output checks' persistent grids (kernel_check.cu)
POSITION_BYTES = 4  # a key's position in its tile (an int), kept beside it by the blocksort

# Key types: NumPy's kind and itemsize -> the C type the kernels compare.
C_TYPES = {
    "b1": "unsigned char",
    "i1": "signed char",
    "u1": "unsigned char",
    "i2": "short",
    "u2": "unsigned short",
    "i4": "int",
    "u4": "unsigned int",
    "f4": "float",
    "i8": "long long",
    "u8": "unsigned long long",
    "f8": "double",
}
BYTES16 = "dsort::Bytes16"  # up to 16 bytes of a byte key, big-endian (cta_order.cuh)
KEY_BYTES = {c: int(code[1:]) for code, c in C_TYPES.items()} | {BYTES16: 16}
FLOATS = ("float", "double")
# byte keys packed into one word of this many bytes
ROW_WORDS = {8: "unsigned long long", 16: BYTES16}
# values ride along as unsigned words of their size
VALUE_TYPES = {4: "unsigned int", 8: "unsigned long long"}
# rows move as the widest that divides them
GATHER_WORDS = {1: "unsigned char", 2: "unsigned short", **VALUE_TYPES}
INT64 = "long long"  # what argsort's last write turns 4-byte positions into
NO_VALUE = "dsort::NoValue"


def ctype_of(dtype) -> str:
    """The C type the kernels compare keys of NumPy ``dtype`` as (its own size)."""
    dtype = np.dtype(dtype)
    return C_TYPES[f"{dtype.kind}{dtype.itemsize}"]


def cbool(flag: bool) -> str:
    return "true" if flag else "false"


class Mode(enum.Enum):
    """How values travel with the keys: ``ValueMode`` of ``kernels/cta_merge.cuh``, spelled by its
    enumerators (so their numbers have one home, the header)."""

    KEYS = "dsort::kNoValues"  # keys only
    CARRY = "dsort::kCarry"  # values read from memory and moved with their keys
    IOTA = "dsort::kIota"  # values are the keys' source positions, generated, never read


@dataclass(frozen=True)
class Order:
    """A key order: the key's C type, the direction, and where NaN goes (floats only: the flag is
    False for every other type, which has no NaN)."""

    key: str
    descending: bool = False
    na_first: bool = False

    def __post_init__(self):
        object.__setattr__(self, "descending", bool(self.descending))
        object.__setattr__(self, "na_first", bool(self.na_first) and self.key in FLOATS)

    @property
    def spelling(self) -> str:
        """The comparator as a template argument (``Order`` of ``cta_order.cuh``)."""
        return f"dsort::Order<{self.key}, {cbool(self.descending)}, {cbool(self.na_first)}>"

    @property
    def key_bytes(self) -> int:
        return KEY_BYTES[self.key]


@dataclass(frozen=True)
class Target:
    """The device a plan is for."""

    arch: int  # compute capability, major * 10 + minor (90 for sm_90)
    smem_limit: int  # the most dynamic shared memory one CTA may opt into, bytes


@dataclass(frozen=True)
class Module:
    """One compile unit: the sources it includes and the instantiations asked of NVRTC."""

    sources: tuple[str, ...]
    names: tuple[str, ...]


@dataclass(frozen=True)
class Kernel:
    """One instantiation and its launch shape."""

    module: Module
    name: str
    threads: int  # per CTA
    tile: int  # items per CTA: count items take ceil(count / tile) CTAs
    smem: int = 0  # dynamic shared memory per CTA, bytes
    # > 0: a persistent grid (grid-stride loop) of at most this many CTAs per SM
    ctas_per_sm: int = 0

    def grid(self, count: int, sms: int = 0) -> int:
        """CTAs for ``count`` items (``sms``: the device's SM count, for persistent grids)."""
        tiles = -(-count // self.tile)
        return max(1, min(tiles, sms * self.ctas_per_sm)) if self.ctas_per_sm else tiles


def _align16(nbytes: int) -> int:
    return (nbytes + 15) & ~15


# Shared memory, laid out as the CTA functions carve it (kernels/cta_blocksort.cuh, cta_merge.cuh):
# the tile's keys from offset 0, then, at the next 16-byte boundary, what rides with them.
def blocksort_smem(key_bytes: int, mode: Mode, tile: int) -> int:
    """cta_blocksort: the keys, then each key's position in the tile (values are gathered after)."""
    return _align16(tile * key_bytes) + (tile * POSITION_BYTES if mode is not Mode.KEYS else 0)


def merge_smem(key_bytes: int, value_bytes: int, mode: Mode, tile: int) -> int:
    """merge_tile: the keys, then their values (carried or generated)."""
    return _align16(tile * key_bytes) + (tile * value_bytes if mode is not Mode.KEYS else 0)


@functools.cache
def fitted(target: Target, key_bytes: int, value_bytes: int) -> Tuning:
    """The target's tuning (:func:`._tuning.select`), its NT halved until the tiles' shared
    memory fits the target: the merge's first (the blocksort's follows it down, as its tile must
    stay a multiple of the merge tile), then the blocksort's."""
    t = _tuning.select(target.arch, key_bytes, value_bytes)
    nt_b, nt_m, vt = t.nt_blocksort, t.nt_merge, t.vt
    mode = Mode.CARRY if value_bytes else Mode.KEYS
    while merge_smem(key_bytes, value_bytes, mode, nt_m * vt) > target.smem_limit and nt_m > 32:
        nt_m //= 2
        nt_b = min(nt_b, nt_m)
    while blocksort_smem(key_bytes, mode, nt_b * vt) > target.smem_limit and nt_b > nt_m:
        nt_b //= 2
    return Tuning(nt_b, nt_m, vt, t.ways)


def tunings(target: Target) -> dict[tuple[int, int], Tuning]:
    """The fitted tuning of every (key bytes, value bytes) the sort kernels take, on ``target``."""
    return {(kb, vb): fitted(target, kb, vb) for kb in (4, 8, 16) for vb in (0, *VALUE_TYPES)}
