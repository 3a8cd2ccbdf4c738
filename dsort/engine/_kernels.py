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

import functools
import types
from dataclasses import dataclass


from . import _tuning  # noqa: F401  (the plans' tunings: P._tuning)
from ._tuning import Tuning
from ._launch import (  # the launch box: its names are the plans' too
    CHECK_CTAS_PER_SM,
    CHECK_ITEMS,
    CHECK_THREADS,
    ROWS_CHECK_CTAS_PER_SM,
    BYTES16,
    CHECK_SOURCES,
    FLOATS,
    GATHER_WORDS,
    KEY_BYTES,
    Kernel,
    MERGE4_SOURCES,
    Mode,
    Module,
    Order,
    POSITION_BYTES,
    QUERY_THREADS,
    ROWS_SOURCES,
    ROW_WORDS,
    SEARCH_SOURCES,
    SORT_SOURCES,
    Target,
    VALSORT_CTAS_PER_SM,
    VALUE_TYPES,
    C_TYPES,
    INT64,
    NO_VALUE,
    cbool,
    blocksort_smem,
    ctype_of,
    fitted,
    kernel_dir,
    merge_smem,
    tunings,
)


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
    o, v = order.spelling, VALUE_TYPES.get(value_bytes, NO_VALUE)
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
        names |= {"blocksort_int64": blocksort(INT64), "merge_runs_int64": merge_runs(INT64)}
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
        d = cbool(desc)
        tables["merge_path"][desc] = f"dsort::k_rows_merge_path<{d}>"
        tables["check"][desc] = f"dsort::k_rows_check<{d}>"
        for right in (False, True):
            tables["searchsorted"][desc, right] = f"dsort::k_rows_searchsorted<{d}, {cbool(right)}>"
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
        (c, d): f"dsort::k_pair_order<{c}, {cbool(d)}>"
        for c in sorted(set(C_TYPES.values()))
        for d in (False, True)
    }
    rows = {d: f"dsort::k_pair_order_rows<{cbool(d)}>" for d in (False, True)}
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
    for key in sorted(set(C_TYPES.values())) + [BYTES16]:
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


__all__ = [  # the launch box's names, handed on: the drivers and tests read them as P.*
    "CHECK_CTAS_PER_SM",
    "CHECK_ITEMS",
    "CHECK_THREADS",
    "ROWS_CHECK_CTAS_PER_SM",
    "BYTES16",
    "CHECK_SOURCES",
    "FLOATS",
    "GATHER_WORDS",
    "KEY_BYTES",
    "Kernel",
    "MERGE4_SOURCES",
    "Mode",
    "Module",
    "Order",
    "POSITION_BYTES",
    "QUERY_THREADS",
    "ROWS_SOURCES",
    "ROW_WORDS",
    "SEARCH_SOURCES",
    "SORT_SOURCES",
    "Target",
    "VALSORT_CTAS_PER_SM",
    "VALUE_TYPES",
    "blocksort_smem",
    "ctype_of",
    "fitted",
    "kernel_dir",
    "merge_smem",
    "tunings",
]
