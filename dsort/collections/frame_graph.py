"""The in-memory sort of a dask dataframe as a task graph (:class:`Graph`), and how its output
partitions become a dask dataframe: the graph behind :func:`dsort.collections.dataframe.sort_values`
(``strategy="memory"``), its ``divisions=True`` and :func:`~dsort.collections.dataframe.set_index`;
the external sort (:func:`~dsort.collections.dataframe.sort_values_external`) shares the output
pieces and the collection. The phases are the dataframe module's docstring's."""

from __future__ import annotations

import numpy as np

from ..core import frame_chunk as F
from ..core.frame_wire import carry, wire
from ..core.frame_keys import KeySpec
from . import tasks as T


class Graph:
    """The tasks of one in-memory frame sort (see the module docstring), as a dict: the sorts,
    the plan and the cuts at once; the slices, merges and output pieces by :meth:`collection`.

    Consecutive partitions are sorted together into runs and consecutive outputs merged
    together (:mod:`dsort.collections.scale`), so the tasks are O(partitions + outputs) and the
    slices runs x merge groups. ``every_output``: the cuts are found at every output's start
    (:func:`set_index` snaps each), not only where the merge groups meet."""

    def __init__(
        self,
        df,
        spec: KeySpec,
        partitions: int,
        ignore_index: bool,
        device,
        widths,
        every_output=False,
    ):
        from dask.base import tokenize

        from . import scale

        runs = scale.frame_runs(df.npartitions, external=False, owners=scale.partition_workers(df))
        self.groups = scale.merge_groups(partitions, len(runs))
        starts = None if every_output else tuple(a for a, _ in self.groups)
        self.df, self.spec, self.ignore_index, self.device = df, spec, ignore_index, device
        self.token = token = tokenize(
            df, spec, partitions, ignore_index, device, widths, runs, starts
        )
        self.dsk = {}
        inputs = wired_inputs(self.dsk, df, token)
        # words=True: keys as words where sort_part can (one column of NumPy numbers, on the host)
        sort = [
            self._add(
                (T.name(T.SORT, token), g),
                F.sort_part,
                [T.ref(k) for k in inputs[a:b]],
                spec,
                widths,
                device,
                True,
            )
            for g, (a, b) in enumerate(runs)
        ]
        # each part's info carries its sample: the plan finds the windows at once
        cuts_at = partitions if every_output else len(self.groups)
        info = [
            self._add((T.name(T.INFO, token), i), F.info, T.ref(s), cuts_at)
            for i, s in enumerate(sort)
        ]
        plan = self._add(
            T.name(T.PLAN, token), F.make_plan, spec, partitions, starts, *map(T.ref, info)
        )
        windows = [
            self._add((T.name(T.WINDOW, token), i), F.window, spec, T.ref(s), T.ref(plan), i)
            for i, s in enumerate(sort)
        ]
        self.cuts = self._add(T.name(T.CUTS, token), F.cuts, T.ref(plan), *map(T.ref, windows))
        self.sorted, self.plan, self.partitions = sort, plan, partitions

    def _add(self, key, func, *args):
        self.dsk[key] = T.task(key, func, *args)
        return key

    def graph(self) -> dict:
        return {**self.df.__dask_graph__(), **self.dsk}

    def collection(self, divisions=None, given=None):
        """The sorted frame: one slice task per (merge group, run), one merge per group, one
        piece per output of a group of several. ``given``: ``(cut rows where the groups meet,
        every output's rows, the groups)`` computed beforehand (default: the cuts task's, the
        plan's and this graph's)."""
        token = self.token
        if given is None:
            cuts, groups = self.cuts, self.groups
            sizes = T.ref(self._add(T.name(T.SIZES, token), F.output_sizes, T.ref(self.plan)))
        else:
            from dask.base import tokenize

            rows, sizes, groups = given
            # results of one graph cut in other places (set_index's balanced cuts, the user's
            # divisions) are other results: other names, never one found for the other
            token = tokenize(self.token, rows, sizes, groups, divisions)
            if _is_key(rows, self.dsk):  # cuts a task of this graph finds (the user's divisions)
                cuts, sizes = rows, T.ref(sizes)
            else:
                cuts = T.name(T.CUTS, f"given-{token}")
                self.dsk[cuts] = rows
        slices = T.name(T.SLICE, token)
        for g in range(len(groups)):
            for i, s in enumerate(self.sorted):
                self._add(
                    (slices, g, i), F.take, self.spec, T.ref(s), T.ref(self.plan), T.ref(cuts), g, i
                )
        # Every part's slices are made before any merge starts: a worker (one thread, say) would
        # otherwise run its own merges first, by dask's order, while another's merges wait for its
        # slices.
        ready = [
            self._add(
                (T.name(T.SLICED, token), i),
                F.sliced,
                *[T.ref((slices, g, i)) for g in range(len(groups))],
            )
            for i in range(len(self.sorted))
        ]
        merges = []
        for g, (a, b) in enumerate(groups):
            pieces = [T.ref((slices, g, i)) for i in range(len(self.sorted))]
            ready_refs = list(map(T.ref, ready))
            # its pieces may be taken elsewhere
            several = (F.wired_result, F.merge_after) if b - a > 1 else (F.merge_after,)
            merges.append(
                self._add(
                    (T.name(T.MERGE, token), g),
                    *several,
                    ready_refs,
                    self.df._meta,
                    T.ref(cuts),
                    g,
                    self.ignore_index,
                    self.device,
                    *pieces,
                )
            )
        outputs = output_pieces(self.dsk, token, merges, groups, sizes)
        return as_collection(
            self.df, self.dsk, self.df._meta, divisions, outputs, token, self.ignore_index
        )

    def persist_cuts(self):
        """Run the sorts, the plan and the cuts now, and keep their results (persisted: in the
        cluster's memory) for the lazy rest; returns the cut rows and the plan. For results whose
        divisions must be known when they are built: the input is still read once."""
        import dask
        from dask.delayed import Delayed

        keys = [*self.sorted, self.plan, self.cuts]
        persisted = dask.persist(*[Delayed(k, self.graph()) for k in keys])
        for d in persisted:
            self.dsk.update(d.__dask_graph__())
        return dask.compute(persisted[-1], persisted[-2])

    def lazy(self, name, func, *args) -> list:
        """Keys of tasks ``func(sorted part, plan, its index, *args)``, one per sorted part (not
        run)."""
        name = T.name(T.CUTS, f"{name}-{self.token}")
        return [
            self._add((name, i), func, T.ref(s), T.ref(self.plan), i, *args)
            for i, s in enumerate(self.sorted)
        ]

    def lazy_one(self, name, func, *args) -> tuple:
        """``(key of func(*args)'s first item, key of its second)``: a task of a pair (``args``:
        keys of this graph's tasks among them) and one task each for its items (not run)."""
        key = self._add(
            T.name(T.CUTS, f"{name}-{self.token}"),
            func,
            *[T.ref(a) if a in self.dsk else a for a in args],
        )
        first = self._add(T.name(T.CUTS, f"{name}-first-{self.token}"), _item, T.ref(key), 0)
        second = self._add(T.name(T.SIZES, f"{name}-{self.token}"), _item, T.ref(key), 1)
        return first, second

    def run(self, name, func, *args):
        """``func(sorted part, plan, its index, *args)`` of every sorted part, computed now."""
        import dask
        from dask.delayed import Delayed

        name = T.name(T.CUTS, f"{name}-{self.token}")
        keys = [
            self._add((name, i), func, T.ref(s), T.ref(self.plan), i, *args)
            for i, s in enumerate(self.sorted)
        ]
        graph = self.graph()
        return dask.compute(*[Delayed(k, graph) for k in keys])


def _item(pair, i):
    return pair[i]


def _is_key(x, dsk) -> bool:
    try:
        return x in dsk
    except TypeError:  # an array of cut rows: no key
        return False


def wired_inputs(dsk: dict, df, token: str) -> list:
    """The keys of frame ``df``'s partitions as a sort's runs take them: where its meta has object
    columns (lists, arrays, dicts: pickled one value at a time when a partition moves to a run on
    another worker), each partition is first wrapped where it is made (a task each, added to
    ``dsk``), so it travels through Arrow; else the partitions themselves. Where the graph runs
    in several processes (the rows travel to the runs, then to the merges), its object columns
    of arrays are carried as Arrow columns from there (:func:`dsort.core.frame_wire.carry`;
    converted once, not at every move: BENCHMARKS.md section 5), and the merges give them back
    (:func:`dsort.core.frame_chunk.merge`); in one process they stay as they are
    (:func:`dsort.core.frame_wire.wire`: converted only if pickled)."""
    import pandas as pd

    from .stores import rows_travel

    keys = df.__dask_keys__()
    meta = getattr(df, "_meta", None)
    # pandas' object columns only
    if not isinstance(meta, pd.DataFrame) or not any(d == np.dtype(object) for d in meta.dtypes):
        return keys
    layer = T.name(T.WIRE, token)
    how = carry if rows_travel() else wire
    out = [(layer, i) for i in range(len(keys))]
    for k, key in zip(out, keys):
        dsk[k] = T.task(k, how, T.ref(key))
    return out


def output_pieces(dsk: dict, token: str, merges, groups, sizes, piece=F.piece) -> list:
    """The output partitions' task keys, ``(SORTED-token, t)``: merge ``g``'s result where its
    group ``(a, b)`` is one output (an alias of it: :func:`as_collection`), else a piece task of it
    per output (added to ``dsk``: ``piece(merged, sizes, t, a)``); ``sizes``: every output's rows
    (or a reference to them)."""
    name = T.name(T.SORTED, token)
    outputs = []
    for key, (a, b) in zip(merges, groups):
        if b - a == 1:
            outputs.append(key)
            continue
        for t in range(a, b):
            outputs.append((name, t))
            dsk[outputs[-1]] = T.task(outputs[-1], piece, T.ref(key), sizes, t, a)
    return outputs


def as_collection(df, dsk: dict, meta, divisions, keys, token: str, ignore_index: bool = False):
    """A dask dataframe named ``SORTED-token`` whose partitions are the tasks ``keys`` of ``dsk``
    (which reads ``df``'s; only the tasks the partitions need are kept, :func:`dsort.collections.
    tasks.needed`): those named ``(SORTED-token, t)`` (:func:`output_pieces`) are its
    partitions as they are, the others' results are taken by an alias each. No task more: dask's
    ``from_delayed`` added two a partition (1,024 more at 512 partitions, not free: BENCHMARKS.md
    section 5),
    and ``from_graph`` hashes the input's graph to name the result (which costs the data of a
    persisted input and fails on a loader dask cannot hash); this result is named by ``token``.
    ``ignore_index``: the partitions are indexed by their rows' positions, and so is the meta (a
    range, unnamed: pandas' ``sort_values(ignore_index=True)`` drops the name)."""
    from dask.highlevelgraph import HighLevelGraph

    from .named_frame import collection

    layer = T.name(T.SORTED, token)
    graph = HighLevelGraph.from_collections(layer, T.needed(dsk, keys), dependencies=[df])
    meta = meta.reset_index(drop=True) if ignore_index else meta
    return collection(graph, meta, divisions or (None,) * (len(keys) + 1), keys, layer)


def nonempty_cuts(cut):
    """Cut rows without the outputs they leave empty (divisions must not go back), but one."""
    keep = [0] + [t for t in range(1, cut.shape[0]) if cut[t].sum() > cut[t - 1].sum()]
    if len(keep) == 1:
        keep.append(cut.shape[0] - 1)
    return cut[keep]


def positional_divisions(sizes) -> tuple:
    """The divisions of a result indexed by position (its partitions of ``sizes`` rows): where its
    partitions start, then its last row."""
    starts = np.cumsum([0, *sizes])  # the first row of each output partition, then the row count
    return tuple(int(x) for x in starts[:-1]) + (max(int(starts[-1]) - 1, 0),)


def grouped_cuts(cut, runs: int):
    """``(cut rows where the groups meet, every output's rows, the groups)`` of per-output cut
    rows ``cut``, its outputs in merge groups (:func:`dsort.collections.scale.merge_groups`)."""
    from . import scale

    sizes = tuple(int(x) for x in np.diff(cut.sum(axis=1)))
    groups = scale.merge_groups(len(sizes), runs)
    return cut[[a for a, _ in groups] + [len(sizes)]], sizes, groups
