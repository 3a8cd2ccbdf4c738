"""How dsort builds dask tasks (one way), and the names of its phases.

Every task is a task-spec :class:`Task` (:func:`task`) whose arguments may hold references to other
tasks (:func:`ref`) at any depth of lists, tuples and dicts. Graphs that no dask collection wraps
are handed out as ``Delayed`` handles (:func:`each`). This module is the only importer of dask's
private ``dask._task_spec``; ``pyproject.toml`` bounds dask to the versions it was checked with.

A task's name is ``PHASE-TOKEN`` (keys ``(name, i, ...)``), ``PHASE`` one of the constants below:
dask's ``key_split`` of a key gives its phase back, which is how the dashboard groups tasks and how
:mod:`dsort.progress` shows and times the phases.
"""

from __future__ import annotations

from dataclasses import dataclass

from dask._task_spec import Alias, Task, TaskRef, parse_input

# -- phases: task-name prefixes --------------------------------------------------------------------
# Each word must survive key_split: letters only, and no 8-letter word starting with a-f (dask
# takes those for a hex token: "dsort-checksum-input" would split to "dsort").

READ = "dsort-read"  # a block of an input file, or a Parquet row group
CHECKSUM_INPUT = "dsort-input-checksums"  # an input partition's count and checksum
RUN = "dsort-run"  # an input block or chunk sorted and kept as a run (external sorts)
# a lost run made again, asked for by a merge that needed it (external sorts of collections)
REMADE = "dsort-remade"
CUTS = "dsort-cuts"  # the exact cuts of every output range in every run
# a run's handle again, held by the run's worker alone: the merges go beside it
ANCHOR = "dsort-anchor"
GROUP_CUTS = "dsort-group-cuts"  # a first merge pass: the cuts of a group of runs' own ranges
# a first merge pass: a range of a group of runs, kept as a piece of its chain
GROUP_MERGE = "dsort-group-merge"
# a first merge pass: a group's chained run (its pieces), a run of the final pass
CHAIN = "dsort-chain"
# an input partition with object columns, ready to travel to its run (dsort.core.frame_wire)
WIRE = "dsort-wire"
SORT = "dsort-sort"  # an input chunk (or dataframe partition) sorted in memory (a part of a run)
# a sorted dataframe partition's row count, string key widths and regular sample
INFO = "dsort-info"
# the dataframe sort's plan: sizes, common widths, sample spacing, outputs, windows
PLAN = "dsort-plan"
SAMPLE = "dsort-sample"  # a part's regular sample
BOUNDS = "dsort-bounds"  # windows around every cut, from the samples
WINDOW = "dsort-window"  # a part's keys inside the windows
SPLITTERS = "dsort-splitters"  # exact cuts, from the windows
SLICE = "dsort-slice"  # the piece of a part that one output chunk takes
# a dataframe part's marker: all its slices made (the merges wait for every part's)
SLICED = "dsort-sliced"
# an output chunk or range (or a group of them) merged from its pieces of every run
MERGE = "dsort-merge"
SIZES = "dsort-sizes"  # every output partition's rows
SLICES = "dsort-slices"  # slices of runs read on the worker whose disk holds them, for a merge
SORTED_KEYS = "dsort-sorted-keys"  # an output chunk's keys
SORTED_VALUES = "dsort-sorted-values"  # an output chunk's values
# a sorted dataframe's partitions: its rows of its merge group's result (an alias of a group of one)
SORTED = "dsort-sorted"
WRITE = "dsort-write"  # an output part written, with its checksum
CHECK = "dsort-check"  # a block's valsort summary


def name(phase: str, token: str) -> str:
    """The name of ``phase``'s tasks in one graph: ``PHASE-TOKEN``."""
    return f"{phase}-{token}"


def task(key, func, *args) -> Task:
    """Task ``key``: ``func(*args)``, where ``args`` may hold :func:`ref` references (alone or
    inside lists, tuples and dicts: those become task-spec containers; a container without
    references stays plain data)."""
    return Task(key, func, *map(parse_input, args))


def alias(key, target) -> Alias:
    """Task ``key`` whose result is task ``target``'s."""
    return Alias(key, target)


def needed(dsk: dict, outputs) -> dict:
    """The tasks of ``dsk`` that the keys ``outputs`` need (themselves, and what they take within
    ``dsk``, at any depth). A collection's graph holds these only: a task no output takes would
    be one more leaf of the graph, and dask, computing a dataframe beside delayed objects, takes a
    graph's leaves for the frame's partitions (a frame of one partition would compute to the
    unused task's value)."""
    keep, todo = {}, [k for k in outputs if k in dsk]
    while todo:
        k = todo.pop()
        if k in keep:
            continue
        keep[k] = node = dsk[k]
        todo += [d for d in getattr(node, "dependencies", ()) if d in dsk and d not in keep]
    return {k: v for k, v in dsk.items() if k in keep}


@dataclass(frozen=True)
class Chunks:
    """The task keys of a collection's chunks along its first axis, ``(name, i, 0, ...)``, in
    little room: a job that every task carries names its input so, not key by key."""

    name: str
    trailing: int = 0  # the zeros after the chunk's number (an array's other axes)

    def __getitem__(self, i: int):
        return (self.name, i, *(0,) * self.trailing)

    @classmethod
    def of(cls, keys):
        """The chunks whose keys are ``keys``, in order from 0; None where they are not so named."""
        keys = list(keys)
        first = keys[0] if keys else None
        if not (isinstance(first, tuple) and len(first) >= 2 and isinstance(first[0], str)):
            return None
        got = cls(first[0], len(first) - 2)
        return got if all(k == got[i] for i, k in enumerate(keys)) else None


def run_again(key, func, *args):
    """``(result, future)`` of task ``key``, ``func(*args)`` (:func:`ref` for the results it takes),
    added to the graph being computed and run now, asked of the dask scheduler by a task that runs
    on a distributed worker. The scheduler makes again the results it takes where they are lost
    (their worker gone) or released, as it knows how while any task of the graph waits; a result
    it no longer knows (dask fused an input chunk into the one task that took it) fails it with an
    OSError that says so. Tasks of several workers asking for the same ``key`` get one result.
    Hold ``future`` while the result must stay. The caller lets go of its thread meanwhile
    (:func:`dsort.collections.remote.seceded`): the task may wait for tasks that need one."""
    from concurrent.futures import CancelledError

    from distributed import get_client

    future = get_client().submit(func, *args, key=key, pure=False)
    try:
        return future.result(), future
    # a result it takes is gone from the scheduler (fused into the task that took it)
    except CancelledError as e:
        raise OSError(
            f"task {key} cannot be run again: the scheduler no longer knows a result it takes ({e})"
        ) from None


def _beside(_near, func, *args):
    return func(*args)


class _Unfused(Task):
    """A task dask's low-level fusion leaves as it is (``block_fusion``, dask 2025.1 on)."""

    __slots__ = ()

    @property
    def block_fusion(self) -> bool:
        return True


def task_beside(key, near, func, *args) -> Task:
    """:func:`task` ``(key, func, *args)`` that also depends on task ``near`` (None: none), whose
    value it drops. dask runs a task where most of its inputs' bytes are: tasks whose one input is
    a small shared result (the merges, after the cuts) would all go to the worker holding it; each
    beside its own run (:func:`beside`; a run's handle holds its sample), they spread as the runs
    do. Never fused: a merge counts itself done with its runs (the last one frees them), and a copy
    of it fused into another task (a chunk's ``to_delayed()``, optimized apart) would run again in
    the same compute, under another name, after the runs were gone."""
    if near is None:
        return _Unfused(key, func, *map(parse_input, args))
    return _Unfused(key, _beside, parse_input(ref(near)), func, *map(parse_input, args))


def _same(value):
    return value


def anchors(dsk: dict, token: str, near) -> list:
    """The anchors of ``near`` (the run or first-pass piece each merge goes beside: a key, or
    None), one task per distinct key added to ``dsk``, giving that task's value again under a name
    of its own: the keys the merges go beside (:func:`task_beside`). The cuts task takes every
    run's handle, so its worker holds a copy of each, and dask, choosing between that worker
    (nothing to fetch) and the run's, put a third of the merges there on four GPUs (BENCHMARKS.md
    section 7). An anchor is made where its run is, as the run ends, and no task but the merges
    beside it takes it: only the run's worker holds it."""
    out = []
    for k in near:  # (ANCHOR-TOKEN, q) of run (RUN-TOKEN, q); (ANCHOR-TOKEN, g, t) of a piece
        a = None if k is None else (name(ANCHOR, token), *k[1:])
        if a is not None and a not in dsk:
            dsk[a] = _Unfused(a, _same, TaskRef(k))
        out.append(a)
    return out


def beside(keys, t: int, n: int):
    """The key among ``keys`` that task ``t`` of ``n`` goes beside (:func:`task_beside`): spread
    evenly over them, task ``t`` beside key ``t`` where there are as many; None where ``keys`` is
    empty."""
    return keys[t * len(keys) // n] if len(keys) else None


def ref(key) -> TaskRef:
    """A reference to task ``key``: an argument that stands for that task's result."""
    return TaskRef(key)


def each(phase: str, token: str, func, rows, dependencies=()) -> list:
    """One task per item of ``rows`` (each a tuple of arguments, :func:`ref` allowed): task ``i``
    is ``func(*rows[i])``, key ``(PHASE-TOKEN, i)``; returned as ``dask.delayed.Delayed``
    handles, in order, for ``dask.compute`` or a client. ``dependencies``: the dask collections
    whose tasks the references name."""
    layer = name(phase, token)
    keys = [(layer, i) for i in range(len(rows))]
    return handles(
        {k: task(k, func, *row) for k, row in zip(keys, rows)}, keys, layer, dependencies
    )


def handles(dsk: dict, keys, layer: str | None = None, dependencies=()) -> list:
    """``dask.delayed.Delayed`` handles of the tasks ``keys`` of the graph ``dsk`` (one layer,
    ``layer`` or named after the first key), in order, for ``dask.compute`` or a client.
    ``dependencies``: the dask collections whose tasks ``dsk`` refers to."""
    from dask.delayed import Delayed
    from dask.highlevelgraph import HighLevelGraph

    keys = list(keys)
    layer = layer or (
        keys[0][0]
        if keys and isinstance(keys[0], tuple)
        else str(keys[0])
        if keys
        else "dsort-empty"
    )
    graph = HighLevelGraph.from_collections(layer, dsk, dependencies=list(dependencies))
    return [Delayed(k, graph, layer=layer) for k in keys]
