"""Task graphs of the distributed sort: local sort, splitters, merge.

Phases, each a family of tasks named for it (the dashboard's task groups):

``dsort-sort``       one per run: a group of consecutive input chunks sorted together by its engine
                     (:mod:`dsort.collections.scale`: about two runs per worker thread, whatever the
                     chunks).
``dsort-sample``     one per part: its run's regular sample (small, NumPy).
``dsort-bounds``     one per merge: windows around every cut, from all samples.
``dsort-window``     one per part: its keys inside the windows (small, NumPy).
``dsort-splitters``  one per merge: exact cuts, from the windows.
``dsort-slice``      one per (merge group, part): the piece of the part that group of output chunks
                     takes; it runs where the part lives, so only that piece travels.
``dsort-merge``      one per group of consecutive output chunks: merges its pieces; each output
                     chunk is then its rows of its group's merge
                     (``dsort-sorted-keys``/``-values``).

Strategies: ``"multiway"`` runs one merge over all R runs (each merge group gathers its R pieces
once and merges them on its own worker); ``"tree"`` runs ceil(log2 R) rounds of merges of run
pairs, each cut into merge groups by two-run splitters. ``"auto"``: see :func:`choose_strategy`.

Graph building looks at chunk sizes only (they must be known); no task runs before ``compute``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from dask.base import tokenize
from dask.highlevelgraph import HighLevelGraph

from ..core import chunk, plan
from . import external, scale, stores
from . import config  # (also: the dask front end registers the dsort.* settings with dask.config)
from ..core import runs as R
from . import tasks as T
from ..engine import keys as K
from .tasks import ref, task

STRATEGIES = ("auto", "multiway", "tree", "external")
DEVICES = (None, "gpu")


def check_options(strategy, device, na_position) -> None:
    """Refuse, with a ``ValueError`` that names the choices, a ``strategy`` not in
    :data:`STRATEGIES`, a ``device`` not in :data:`DEVICES` or an ``na_position`` the engines
    do not take."""
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}")
    if device not in DEVICES:
        raise ValueError(f"device must be None (each chunk's own engine) or 'gpu', got {device!r}")
    K.check_na_position(na_position)


def choose_strategy() -> str:
    """The ``"auto"`` rule: ``"multiway"``, whatever the number of chunks: it was the faster of the
    two on CPU workers (2 to 32 chunks) and on one and two GPUs, keys on the GPUs or in host memory
    (BENCHMARKS.md, "Strategy rule"). The tree moves and rewrites every element once per round and
    waits for a splitter round trip per round; multiway moves each element once."""
    return "multiway"


@dataclass
class _Run:
    """A sorted run held as consecutive parts: task keys of ``(keys, values)`` and their sizes."""

    parts: list
    sizes: list

    @property
    def size(self):
        return int(sum(self.sizes))

    @property
    def offsets(self):
        return plan.offsets(self.sizes).tolist()


_PHASES = (T.SORT, T.SAMPLE, T.BOUNDS, T.WINDOW, T.SPLITTERS, T.SLICE, T.MERGE)


class _Builder:
    def __init__(self, token, descending, na_position, device=None):
        self.dsk = {}
        self.names = {p: T.name(p, token) for p in _PHASES}
        self.order = (descending, na_position)
        self.device = device

    def add(self, key, func, *args):
        self.dsk[key] = task(key, func, *args)
        return key

    def per_part(self, phase, group, runs, func, *args, out=(), run_arg=False):
        """One ``phase`` task per part of every run: ``func(part, offset, *args)``, plus the run's
        index with ``run_arg``; references to them, nested by run."""
        refs = []
        for q, run in enumerate(runs):
            extra = (q,) if run_arg else ()
            keys = [(self.names[phase], *group, *out, q, c) for c in range(len(run.parts))]
            refs.append(
                [
                    ref(self.add(k, func, ref(p), off, *args, *extra))
                    for k, p, off in zip(keys, run.parts, run.offsets)
                ]
            )
        return refs

    def local_sort(self, key_chunks, value_chunks, sizes, positions, groups):
        """One run per group ``(a, b)`` of consecutive chunks, sorted together."""
        runs = []
        starts = plan.offsets(sizes).tolist()
        for g, (a, b) in enumerate(groups):
            values = None if value_chunks[a] is None else [ref(v) for v in value_chunks[a:b]]
            keys = [ref(k) for k in key_chunks[a:b]]
            key = self.add(
                (self.names[T.SORT], g),
                chunk.local_sort,
                keys,
                values,
                starts[a],
                positions,
                *self.order,
                self.device,
            )
            runs.append(_Run([key], [int(sum(sizes[a:b]))]))
        return runs

    def merge(self, runs, out_sizes, group):
        """Merge ``runs`` (two or more) into one run whose parts have ``out_sizes`` (two or more);
        ``group`` names this merge."""
        sizes = [r.size for r in runs]
        targets = plan.interior_targets(out_sizes)
        rows = ref(self._splitters(runs, sizes, targets, group))
        parts = []
        for t in range(len(out_sizes)):
            pieces = self.per_part(
                T.SLICE, group, runs, chunk.take, rows, t, out=(t,), run_arg=True
            )
            parts.append(
                self.add((self.names[T.MERGE], *group, t), chunk.merge_runs, pieces, *self.order)
            )
        return _Run(parts, [int(n) for n in out_sizes])

    def _splitters(self, runs, sizes, targets, group):
        spacing = plan.sample_spacing(sizes, len(targets))
        samples = self.per_part(T.SAMPLE, group, runs, chunk.sample, spacing)
        bounds = (self.names[T.BOUNDS], *group)
        windows = ref(self.add(bounds, chunk.bounds, samples, sizes, spacing, targets, *self.order))
        wins = self.per_part(T.WINDOW, group, runs, chunk.window, windows, run_arg=True)
        return self.add(
            (self.names[T.SPLITTERS], *group),
            chunk.splitters,
            wins,
            windows,
            sizes,
            targets,
            *self.order,
        )


def _first_keys(array):
    """Task keys of the chunks along axis 0 (the array is one chunk wide in every other axis)."""
    out = []
    for k in array.__dask_keys__():
        while isinstance(k, list):
            k = k[0]
        out.append(k)
    return out


def sort_graph(
    keys,
    values=None,
    *,
    positions=False,
    descending=False,
    na_position="last",
    strategy="auto",
    device=None,
    local_directory=None,
    host_budget=0,
):
    """Build the sort of dask array ``keys`` (known chunk sizes along axis 0, one chunk in any
    other axis) carrying ``values`` (same chunks along axis 0) or, with ``positions``, the global
    int64 positions of the elements. ``device="gpu"``: host chunks are sorted and merged on the
    workers' GPUs and the output chunks come back to host memory. ``strategy="external"`` (never
    chosen by ``"auto"`` here: the front end decides): the runs live in a run store of
    ``host_budget`` bytes of memory, then files under ``local_directory``
    (:mod:`dsort.collections.external`).

    Returns ``[(graph, name), ...]``: the sorted keys, then the carried values if any; output
    chunk ``i`` is task ``(name, i, 0...)``, of the input's size. The graphs share their tasks.
    """
    check_options(strategy, device, na_position)
    sizes = [int(n) for n in keys.chunks[0]]
    if strategy == "auto":
        strategy = choose_strategy()
    gpu = device == "gpu" or not isinstance(keys._meta, np.ndarray)
    host = isinstance(keys._meta, np.ndarray)
    groups = scale.array_runs(
        sizes, _row_bytes(keys, values, positions), gpu, strategy == "external", host
    )
    owners = None
    if strategy == "external":  # runs of chunks of one worker each
        ties_unseen = values is None and not positions and keys.dtype.kind in "biuV"
        owners = scale.partition_workers(keys, _first_keys(keys))
        groups = scale.runs_by_worker(sizes, groups, owners, ties_unseen)
    out_groups = scale.output_groups(sizes, len(groups))
    token = tokenize(
        keys, values, positions, descending, na_position, strategy, device, groups, out_groups
    )
    key_name = T.name(T.SORTED_KEYS, token)
    value_name = T.name(T.SORTED_VALUES, token) if (values is not None or positions) else None
    back_to_host = device == "gpu" and host  # output chunks: the input's type
    value_chunks = _first_keys(values) if values is not None else [None] * len(sizes)
    deps = [keys] if values is None else [keys, values]
    outputs = [(key_name, keys.ndim, 0)]
    if value_name:
        outputs.append((value_name, 1 if values is None else values.ndim, 1))
    if strategy == "external":
        job = _external_job(
            keys,
            values,
            positions,
            sizes,
            groups,
            out_groups,
            descending,
            na_position,
            device,
            token,
            local_directory,
            host_budget,
        )
        dsk, merges = external.graph(
            token, _first_keys(keys), value_chunks, sizes, groups, job, owners
        )
        dsk.update(external.output_tasks(merges, outputs, back_to_host, sizes, out_groups))
        return [_collection_graph(dsk, name, deps) for name, _, _ in outputs]
    b = _Builder(token, descending, na_position, device)
    runs = b.local_sort(_first_keys(keys), value_chunks, sizes, positions, groups)
    out = plan.group_sums(sizes, [a for a, _ in out_groups])  # rows of every merge group
    if strategy == "multiway":
        if len(out) > 1 or len(runs) > 1:
            runs = [b.merge(runs, out, (0,))]
    else:
        level = 0
        while len(runs) > 1:
            pairs = list(zip(runs[::2], runs[1::2]))
            last = len(runs) == 2
            merged = [
                b.merge([a, c], out if last else a.sizes + c.sizes, (level, i))
                for i, (a, c) in enumerate(pairs)
            ]
            runs = merged + runs[len(merged) * 2 :]
            level += 1
        if len(out) > 1 and runs[0].sizes != list(out):  # one run: cut into the merge groups
            runs = [b.merge(runs, out, (level, 0))]
    final = runs[0].parts  # one per merge group
    for name, nd, which in outputs:
        getter = (chunk.keys_of, chunk.values_of)[which]
        for i, g, lo, hi in plan.pieces(sizes, out_groups):
            key = (name, i) + (0,) * (nd - 1)
            b.dsk[key] = task(key, getter, ref(final[g]), back_to_host, lo, hi)
    return [_collection_graph(b.dsk, name, deps) for name, _, _ in outputs]


def _collection_graph(dsk: dict, name: str, deps) -> tuple:
    """``(graph, name)`` of the output named ``name``: the tasks of ``dsk`` its chunks need
    (:func:`dsort.collections.tasks.needed`; the keys and the values of one sort share the
    others)."""
    outputs = [k for k in dsk if isinstance(k, tuple) and k[0] == name]
    return HighLevelGraph.from_collections(name, T.needed(dsk, outputs), dependencies=deps), name


def _row_bytes(keys, values, positions) -> int:
    """Bytes a row of the sort moves: its key's, then its value's (or its int64 position)."""
    width = keys.dtype.itemsize * int(np.prod(keys.shape[1:], dtype=np.int64))
    if positions:
        return width + 8
    if values is not None:
        return width + values.dtype.itemsize * int(np.prod(values.shape[1:], dtype=np.int64))
    return width


def _external_job(
    keys,
    values,
    positions,
    sizes,
    groups,
    out_groups,
    descending,
    na_position,
    device,
    token,
    local_directory,
    host_budget,
):
    """The :class:`dsort.collections.external.ArrayJob` of a sort: rows are the key's bytes, then
    the value's."""
    byte_rows = keys.ndim == 2
    key_bytes = keys.shape[1] if byte_rows else keys.dtype.itemsize
    if positions:
        value_dtype, value_shape = np.dtype(np.int64), ()
    elif values is not None:
        value_dtype, value_shape = values.dtype, tuple(values.shape[1:])
    else:
        value_dtype, value_shape = None, ()
    layout = R.Layout(
        _row_bytes(keys, values, positions), key_bytes, None if byte_rows else keys.dtype.str
    )
    gpu = device == "gpu" or not isinstance(keys._meta, np.ndarray)
    run_rows = [int(sum(sizes[i] for i in each)) for each in groups]
    range_rows = plan.group_sums(sizes, [a for a, _ in out_groups])
    # more runs than one merge pass takes: a first pass merges groups of them, in ranges of a run's
    # rows
    passes = plan.pass_groups(len(run_rows), int(config.get("file-sort.max-runs")))
    group_ranges = tuple(plan.ranges(sum(run_rows[a:b]), max(run_rows)) for a, b in passes)
    spacing, chain_spacing = plan.pass_spacings(run_rows, len(range_rows), passes, group_ranges)
    key_chunks, value_chunks = (
        T.Chunks.of(_first_keys(keys)),
        None if values is None else T.Chunks.of(_first_keys(values)),
    )
    starts = plan.offsets(sizes).tolist()
    # a lost run is made again from them
    inputs = (
        (key_chunks, value_chunks),
        tuple((each, tuple(starts[i] for i in each)) for each in groups),
    )
    return external.ArrayJob(
        layout=layout,
        range_rows=range_rows,
        spacing=spacing,
        store=stores.store_config(token, layout.row_bytes, local_directory, host_budget, gpu=gpu),
        key_shape=tuple(keys.shape[1:]),
        value_dtype=value_dtype,
        value_shape=value_shape,
        positions=positions,
        gpu=gpu,
        descending=descending,
        na_position=na_position,
        groups=passes,
        group_ranges=group_ranges,
        first_piece=len(run_rows),
        chain_spacing=chain_spacing,
        inputs=None
        if key_chunks is None or (values is not None and value_chunks is None)
        else inputs,
    )
