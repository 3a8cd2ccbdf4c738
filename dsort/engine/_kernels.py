"""The kernel plan: every kernel dsort launches, described once (pure Python, no device).

One frozen :class:`SortPlan` per (key order, value bytes, value mode) names the kernels of a
mergesort and of a standalone merge and carries their tiles and dynamic shared memory; one
:class:`SearchPlan` per key order and the one :class:`RowsPlan` name the search and byte-row
kernels. As in moderngpu's ``launch_box``, every size is derived here, once, from the launch
parameters (:mod:`._tuning`) and the types; as in CUB, each kernel is named once. The drivers launch
``plan.blocksort``, ``plan.merge_runs``, ... and never spell a template name or compute a size, and
:func:`modules` (what ``compile_all`` builds ahead of time) is read off the same plans, so what is
compiled is what is launched.

A :class:`Target` (compute capability, shared memory one CTA may have) stands for the device a
plan is for; ``dsort.engine._cuda.target()`` gives the current device's.
"""

from __future__ import annotations

import enum
import functools
import types
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
_C_OF = {
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
KEY_BYTES = {c: int(code[1:]) for code, c in _C_OF.items()} | {BYTES16: 16}
FLOATS = ("float", "double")
# byte keys packed into one word of this many bytes
ROW_WORDS = {8: "unsigned long long", 16: BYTES16}
# values ride along as unsigned words of their size
VALUE_TYPES = {4: "unsigned int", 8: "unsigned long long"}
# rows move as the widest that divides them
GATHER_WORDS = {1: "unsigned char", 2: "unsigned short", **VALUE_TYPES}
_INT64 = "long long"  # what argsort's last write turns 4-byte positions into
_NO_VALUE = "dsort::NoValue"


def ctype_of(dtype) -> str:
    """The C type the kernels compare keys of NumPy ``dtype`` as (its own size)."""
    dtype = np.dtype(dtype)
    return _C_OF[f"{dtype.kind}{dtype.itemsize}"]


def _cbool(flag: bool) -> str:
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
        return f"dsort::Order<{self.key}, {_cbool(self.descending)}, {_cbool(self.na_first)}>"

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


# ---------------------------------------------------------------------------------------------
# Searches over global memory: one plan per key order.


@dataclass(frozen=True)
class SearchPlan:
    order: Order
    partition_runs: Kernel  # Merge Path splits of one mergesort pass, at every merge tile
    merge_path: Kernel  # co-ranks of given diagonals, or of every merge tile of a standalone merge
    searchsorted_left: Kernel
    searchsorted_right: Kernel
    check_sorted: Kernel  # sorted / strictly reverse-sorted flags, fused with a copy (persistent)

    def searchsorted(self, right: bool) -> Kernel:
        return self.searchsorted_right if right else self.searchsorted_left

    def kernels(self) -> tuple[Kernel, ...]:
        return (
            self.partition_runs,
            self.merge_path,
            self.searchsorted_left,
            self.searchsorted_right,
            self.check_sorted,
        )


def _per_query(module: Module, name: str) -> Kernel:
    return Kernel(module, name, QUERY_THREADS, QUERY_THREADS)


@functools.cache
def search_plan(order: Order) -> SearchPlan:
    o = order.spelling
    names = {
        "partition_runs": f"dsort::k_partition_runs<{o}>",
        "merge_path": f"dsort::k_merge_path<{o}>",
        "searchsorted_left": f"dsort::k_searchsorted<{o}, false>",
        "searchsorted_right": f"dsort::k_searchsorted<{o}, true>",
        "check_sorted": f"dsort::k_check_sorted<{o}, {CHECK_THREADS}, {CHECK_ITEMS}>",
    }
    module = Module(SEARCH_SOURCES, tuple(names.values()))
    check = Kernel(
        module,
        names.pop("check_sorted"),
        CHECK_THREADS,
        CHECK_THREADS * CHECK_ITEMS,
        ctas_per_sm=CHECK_CTAS_PER_SM,
    )
    return SearchPlan(
        order,
        check_sorted=check,
        **{role: _per_query(module, name) for role, name in names.items()},
    )


# ---------------------------------------------------------------------------------------------
# Mergesort and merge: one plan per (key order, value bytes, mode).


@dataclass(frozen=True)
class SortPlan:
    """The kernels that sort keys of one order (blocksort, then passes of partition + merge_runs)
    or merge two sorted arrays of them (merge_path + merge_pair), with values of ``value_bytes``
    moved as ``mode`` says. In IOTA mode the passes carry the positions the blocksort generated,
    and with 4-byte positions the ``*_int64`` kernels are the same ones writing their positions
    as int64 (argsort's last write)."""

    order: Order
    value_bytes: int  # 0 in KEYS mode
    mode: Mode
    tuning: Tuning  # as fitted to the target
    blocksort: Kernel  # one CTA per tile of tuning.tile_sort keys
    partition: Kernel  # the search plan's partition_runs
    merge_runs: Kernel  # one global pass, one CTA per tile of tuning.tile_merge output keys
    merge_path: Kernel  # the search plan's merge_path
    merge_pair: Kernel  # the standalone merge, tiles as merge_runs
    blocksort_int64: Kernel | None = None
    merge_runs_int64: Kernel | None = None

    def kernels(self) -> tuple[Kernel, ...]:
        ks = (self.blocksort, self.partition, self.merge_runs, self.merge_path, self.merge_pair)
        return ks + tuple(k for k in (self.blocksort_int64, self.merge_runs_int64) if k is not None)


def _check_sort_types(order: Order, value_bytes: int, mode: Mode) -> None:
    if order.key_bytes < 4:
        raise ValueError(
            f"the sort kernels take keys of 4, 8 or 16 bytes, not {order.key} (widen it)"
        )
    if (mode is Mode.KEYS) != (value_bytes == 0) or (
        value_bytes and value_bytes not in VALUE_TYPES
    ):
        raise ValueError(f"no sort kernels for {value_bytes}-byte values in mode {mode.name}")


@functools.cache
def _sort_names(order: Order, value_bytes: int, mode: Mode, t: Tuning) -> dict[str, str]:
    """The instantiations of one sort plan, by role."""
    o, v = order.spelling, VALUE_TYPES.get(value_bytes, _NO_VALUE)
    # the passes move what the blocksort wrote
    runs = Mode.KEYS if mode is Mode.KEYS else Mode.CARRY

    def blocksort(vo=v):
        return f"dsort::k_blocksort<{o}, {t.nt_blocksort}, {t.vt}, {mode.value}, {v}, {vo}>"

    def merge_runs(vo=v):
        return f"dsort::k_merge_runs<{o}, {t.nt_merge}, {t.vt}, {runs.value}, {v}, {vo}>"

    names = {
        "blocksort": blocksort(),
        "merge_runs": merge_runs(),
        "merge_pair": f"dsort::k_merge_pair<{o}, {t.nt_merge}, {t.vt}, {mode.value}, {v}>",
    }
    if mode is Mode.IOTA and value_bytes == 4:
        names |= {"blocksort_int64": blocksort(_INT64), "merge_runs_int64": merge_runs(_INT64)}
    return names


def _modes(value_bytes: int) -> tuple[Mode, ...]:
    return (Mode.CARRY, Mode.IOTA) if value_bytes else (Mode.KEYS,)


@functools.cache
def _sort_module(order: Order, value_bytes: int, t: Tuning) -> Module:
    """The sort kernels of one key order and value size, every mode, compile together (a sort
    with values and an argsort share the build)."""
    names = (
        n for mode in _modes(value_bytes) for n in _sort_names(order, value_bytes, mode, t).values()
    )
    return Module(SORT_SOURCES, tuple(dict.fromkeys(names)))


@functools.cache
def sort_plan(order: Order, value_bytes: int, mode: Mode, target: Target) -> SortPlan:
    """The plan of keys of ``order`` with ``value_bytes`` values (0, 4 or 8) moved as ``mode``."""
    _check_sort_types(order, value_bytes, mode)
    t = fitted(target, order.key_bytes, value_bytes)
    names = _sort_names(order, value_bytes, mode, t)
    module = _sort_module(order, value_bytes, t)
    bs_smem = blocksort_smem(order.key_bytes, mode, t.tile_sort)
    mg_smem = merge_smem(order.key_bytes, value_bytes, mode, t.tile_merge)
    kernels = {
        role: Kernel(module, name, t.nt_blocksort, t.tile_sort, bs_smem)
        if role.startswith("blocksort")
        else Kernel(module, name, t.nt_merge, t.tile_merge, mg_smem)
        for role, name in names.items()
    }
    search = search_plan(order)
    return SortPlan(
        order,
        value_bytes,
        mode,
        t,
        partition=search.partition_runs,
        merge_path=search.merge_path,
        **kernels,
    )


@dataclass(frozen=True)
class Merge4Plan:
    """The 4-way passes of a sort plan (``Tuning.ways`` 4): their partition and merge kernels, of
    the sort plan's tiles and shared memory, in a module of their own (among :func:`modules` where a
    tuning takes them; else built when a sort first asks for them)."""

    partition: Kernel  # k_partition_runs4: four co-ranks at every merge tile
    merge_runs: Kernel  # k_merge4_runs: one 4-way pass
    merge_runs_int64: Kernel | None = None  # the same writing int64 positions (argsort's last pass)

    def kernels(self) -> tuple[Kernel, ...]:
        return (self.partition, self.merge_runs) + (
            (self.merge_runs_int64,) if self.merge_runs_int64 else ()
        )


@functools.cache
def merge4_plan(order: Order, value_bytes: int, mode: Mode, target: Target) -> Merge4Plan:
    """The 4-way passes of :func:`sort_plan` ``(order, value_bytes, mode, target)``."""
    plan = sort_plan(order, value_bytes, mode, target)
    t = plan.tuning

    # the 4-way counterparts of the sort plan's merge_runs kernels, those of every mode of the value
    # size in one module as in the sort module; the cuts, of the order alone, in one module per
    # order
    def four(md: Mode) -> dict[str, str]:
        names = _sort_names(order, value_bytes, md, t).items()
        return {
            r: n.replace("dsort::k_merge_runs<", "dsort::k_merge4_runs<", 1)
            for r, n in names
            if r.startswith("merge_runs")
        }

    module = Module(
        MERGE4_SOURCES,
        tuple(dict.fromkeys(n for md in _modes(value_bytes) for n in four(md).values())),
    )
    kernels = {
        role: Kernel(module, name, t.nt_merge, t.tile_merge, plan.merge_runs.smem)
        for role, name in four(mode).items()
    }
    cut = f"dsort::k_partition_runs4<{order.spelling}>"
    kernels["partition"] = _per_query(Module(MERGE4_SOURCES, (cut,)), cut)
    return Merge4Plan(**kernels)


# ---------------------------------------------------------------------------------------------
# Byte rows: packing into words and back, and searches over rows in place (any width).


@dataclass(frozen=True, eq=False)
class RowsPlan:
    module: Module
    pack: types.MappingProxyType  # (word bytes, permutation bytes) -> k_pack_rows
    gather: types.MappingProxyType  # (word bytes, position bytes) -> k_gather_rows
    unpack: types.MappingProxyType  # word bytes -> k_unpack_rows
    merge_path: types.MappingProxyType  # descending -> k_rows_merge_path
    check: types.MappingProxyType  # descending -> k_rows_check (persistent)
    searchsorted: types.MappingProxyType  # (descending, right) -> k_rows_searchsorted
    iota: Kernel  # int64 positions start + i * step

    def kernels(self) -> tuple[Kernel, ...]:
        tables = (
            self.pack,
            self.gather,
            self.unpack,
            self.merge_path,
            self.check,
            self.searchsorted,
        )
        return tuple(k for table in tables for k in table.values()) + (self.iota,)


@functools.cache
def rows_plan() -> RowsPlan:
    tables = {
        "pack": {},
        "gather": {},
        "unpack": {},
        "merge_path": {},
        "check": {},
        "searchsorted": {},
    }
    for word, ktype in ROW_WORDS.items():
        for perm, ptype in VALUE_TYPES.items():
            tables["pack"][word, perm] = f"dsort::k_pack_rows<{ktype}, {ptype}>"
        tables["unpack"][word] = f"dsort::k_unpack_rows<{ktype}>"
    for word, wtype in GATHER_WORDS.items():
        for pos, ptype in VALUE_TYPES.items():
            tables["gather"][word, pos] = f"dsort::k_gather_rows<{wtype}, {ptype}>"
    for desc in (False, True):
        d = _cbool(desc)
        tables["merge_path"][desc] = f"dsort::k_rows_merge_path<{d}>"
        tables["check"][desc] = f"dsort::k_rows_check<{d}>"
        for right in (False, True):
            tables["searchsorted"][desc, right] = (
                f"dsort::k_rows_searchsorted<{d}, {_cbool(right)}>"
            )
    iota = "dsort::k_iota"
    module = Module(
        ROWS_SOURCES, tuple(n for table in tables.values() for n in table.values()) + (iota,)
    )

    def kernel(role, name):
        if role == "check":
            return Kernel(
                module, name, QUERY_THREADS, QUERY_THREADS, ctas_per_sm=ROWS_CHECK_CTAS_PER_SM
            )
        return _per_query(module, name)

    return RowsPlan(
        module,
        **{
            role: types.MappingProxyType({key: kernel(role, name) for key, name in table.items()})
            for role, table in tables.items()
        },
        iota=_per_query(module, iota),
    )


# ---------------------------------------------------------------------------------------------
# The output checks (valsort's): record checksums and the order of consecutive keys.


@dataclass(frozen=True, eq=False)
class CheckPlan:
    module: Module
    crc32_sum: Kernel  # sum of the rows' CRC-32s
    pair_order: types.MappingProxyType  # (C type, descending) -> k_pair_order
    pair_order_rows: types.MappingProxyType  # descending -> k_pair_order_rows

    def kernels(self) -> tuple[Kernel, ...]:
        return (self.crc32_sum, *self.pair_order.values(), *self.pair_order_rows.values())


@functools.cache
def check_plan() -> CheckPlan:
    crc = "dsort::k_crc32_sum"
    pairs = {
        (c, d): f"dsort::k_pair_order<{c}, {_cbool(d)}>"
        for c in sorted(set(_C_OF.values()))
        for d in (False, True)
    }
    rows = {d: f"dsort::k_pair_order_rows<{_cbool(d)}>" for d in (False, True)}
    module = Module(CHECK_SOURCES, (crc, *pairs.values(), *rows.values()))

    def kernel(name):
        return Kernel(module, name, QUERY_THREADS, QUERY_THREADS, ctas_per_sm=VALSORT_CTAS_PER_SM)

    return CheckPlan(
        module,
        kernel(crc),
        types.MappingProxyType({k: kernel(n) for k, n in pairs.items()}),
        types.MappingProxyType({k: kernel(n) for k, n in rows.items()}),
    )


# ---------------------------------------------------------------------------------------------
# Everything the engine can launch.


def orders() -> list[Order]:
    """Every key order the kernels are instantiated for."""
    out = []
    for key in sorted(set(_C_OF.values())) + [BYTES16]:
        for descending in (False, True):
            for na_first in (False, True) if key in FLOATS else (False,):
                out.append(Order(key, descending, na_first))
    return out


def plans(target: Target) -> list:
    """Every plan of the engine on ``target``: the rows and check plans, then per key order its
    search plan and (keys of 4 bytes or more) its sort plans, each followed by its 4-way passes
    where its tuning takes them."""
    out: list = [rows_plan(), check_plan()]
    for order in orders():
        out.append(search_plan(order))
        if order.key_bytes >= 4:
            for vb in (0, *VALUE_TYPES):
                for mode in _modes(vb):
                    out.append(sort_plan(order, vb, mode, target))
                    if out[-1].tuning.ways == 4:
                        out.append(merge4_plan(order, vb, mode, target))
    return out


def modules(target: Target) -> list[Module]:
    """The compile units of every kernel of :func:`plans`, each once."""
    return list(dict.fromkeys(k.module for plan in plans(target) for k in plan.kernels()))
