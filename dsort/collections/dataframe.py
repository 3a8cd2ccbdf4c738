"""Sorting dask dataframes and series with pandas' semantics: :func:`sort_values`,
:func:`sort_series`, :func:`set_index`, and the ``.dsort`` accessor on dask frames and series.

``sort_values(df, by, *, ascending=True, na_position="last")`` equals pandas'
``df.sort_values(by, ascending=..., na_position=..., kind="stable")`` on the concatenated
partitions: stable (ties keep their input order), missing values (NaN, None, NaT, pd.NA) last (or
first), index labels kept (or, with ``ignore_index``, the rows' positions); ``by`` names columns or
index levels. The result has the input's number of partitions (or ``npartitions``), balanced to
within one row.

How (the same three steps as for arrays, on the rows' keys): each partition's ``by`` columns are
encoded as fixed-width byte keys whose ``memcmp`` order is the wanted order (one column of NumPy
numbers sorted on the host: as one ``uint64`` word per row; :mod:`dsort.core.frame_keys`) and the
partition is sorted by them; the exact cuts of every output
partition come from samples and windows of the keys (:mod:`dsort.core.plan`); each output partition
takes its slice of every sorted partition and merges them by their keys
(:mod:`dsort.core.frame_chunk`). Only the slices travel, once. Building the result runs nothing: the
input is read once, during ``compute``; unsupported key types and wrong arguments fail at the call,
from the frame's meta.

Graph phases (task groups on the dashboard, :mod:`dsort.collections.tasks`): ``dsort-sort`` (one per
input partition), ``dsort-info`` (a part's size and regular sample), ``dsort-plan`` (with the
windows around every cut), ``dsort-window``, ``dsort-cuts`` (small), ``dsort-slice`` (one per input
and output partition; it runs where the sorted partition lives), ``dsort-sliced`` (one per input
partition: all its slices made), ``dsort-merge`` (one per output partition, after every
``dsort-sliced``).

Frames bigger than memory: ``strategy="external"`` (:func:`sort_values_external`).
"""

from __future__ import annotations

import pandas as pd

from . import tasks as T
from .frame_graph import Graph, as_collection, output_pieces, positional_divisions, wired_inputs
from .frame_spec import key_spec, on_gpu_frame, output_partitions, pandas_meta
from .indexing import set_index
from ..core import frame_chunk
from ..core.frame_keys import KeySpec, encode_keys, string_columns, string_widths
from ..core.frame_rows import RowCodec

__all__ = [
    "encode_keys",
    "set_index",
    "sort_series",
    "sort_values",
    "sort_values_external",
    "string_columns",
    "string_widths",
]


def choose_strategy(partitions: int, outputs: int, divisions: bool = False, device=None) -> str:
    """The ``"auto"`` rule. ``"memory"`` where the external sort cannot run (workers on several
    machines, whose files the others cannot read; ``divisions=True``). Else ``"external"`` for
    ``device="gpu"``: its runs stay on the GPUs and a merge of many runs is one sort of their
    slices (the faster by far on a GPU: BENCHMARKS.md section 5). On the CPU, ``"memory"`` while its
    slices (runs x merge groups, :mod:`dsort.collections.scale`: about twice the worker threads
    each, whatever the partitions) are at most the setting ``dsort.dataframe.memory-pieces`` (1024;
    dask's config), else ``"external"``. Each in-memory slice is one dask task and transfer; the
    external sort reads its slices inside its merge tasks (on one machine from the page cache). On
    CPU workers the in-memory sort was the faster, or close to the external one, from 16 to 4096
    partitions (BENCHMARKS.md section 4)."""
    from . import config, scale, stores

    runs = len(scale.frame_runs(partitions, external=False))
    pieces = runs * len(scale.merge_groups(outputs, runs))
    if divisions or not stores.one_host():
        return "memory"
    if device == "gpu" or pieces > int(config.get("dataframe.memory-pieces")):
        return "external"
    return "memory"


def _widths_tuple(spec: KeySpec, widths):
    if not widths:
        return None
    return tuple(max(int(widths.get(c, 0)), 1) if st else 0 for c, st in zip(spec.by, spec.strings))


def sort_values(
    df,
    by,
    *,
    ascending=True,
    na_position="last",
    npartitions=None,
    ignore_index=False,
    divisions=False,
    strategy="auto",
    device=None,
    widths=None,
    local_directory=None,
    memory_limit="auto",
    device_memory_limit=None,
    shuffle_method=None,
    max_branch=None,
    upsample=None,
    partition_size=None,
    sort_function=None,
    sort_function_kwargs=None,
    limits=None,
):
    """Sort a dask dataframe by columns or index levels, as pandas' stable ``sort_values``.

    Options after ``by`` are keywords, as in pandas (in dask the third positional argument would
    be ``npartitions``). The module docstring says how the sort runs.

    Parameters
    ----------
    df : dask.dataframe.DataFrame or Series
        pandas or cudf partitions (a dask-cudf frame is sorted on the GPUs where its partitions
        are, and given back as one).
    by : label or list of labels
        Column labels or index level names.
    ascending : bool or list of bool, default True
        One for all, or one for each of ``by``.
    na_position : {"last", "first"}, default "last"
        Where missing values go.
    npartitions : int, optional
        Output partitions (default: the input's), balanced to within one row.
    ignore_index : bool, default False
        The result's index is the rows' positions, 0 to n - 1.
    divisions : bool, default False
        The result's divisions are known (the positions where its partitions start, from the exact
        cuts; implies ``ignore_index``), so ``loc`` by position finds its partition. The cuts then
        run at the call (the sorted partitions are persisted: the input is still read once).
    strategy : {"auto", "memory", "external"}, default "auto"
        ``"external"`` for frames bigger than memory (:func:`sort_values_external`); ``"auto"``
        chooses (:func:`choose_strategy`): for a dask-cudf frame, the external sort of a frame of
        numbers, booleans, datetimes and durations (its runs on the GPUs as bytes), and the
        in-memory one of other columns (strings, categoricals, decimals: their rows gathered by
        cudf; external, rows through files, when ``device_memory_limit`` is given).
    device : {None, "gpu"}, default None
        ``"gpu"``: the keys sorted on the workers' GPUs, the rows following on the host.
    widths : dict, optional
        A width in bytes for each string column, by name: every partition's keys encoded at it
        (else each partition's own, padded where they meet).
    local_directory, memory_limit, device_memory_limit
        An external sort's limits: where runs that do not fit in memory go, the host memory its
        runs may hold, and each GPU worker's runs (bytes, a size, or a share of its GPU).
    shuffle_method, max_branch, upsample, partition_size
        Knobs of dask's own shuffle and quantiles, accepted so that dask's calls run unchanged,
        with no effect: the cuts are exact and the partitions balanced whatever they say.
    sort_function, sort_function_kwargs
        dask's: where either is given, each output partition (already in order) is passed
        through ``sort_function(part, by=[...], ascending=..., na_position=..., ignore_index=...,
        **sort_function_kwargs)``, as dask sorts its partitions (default: pandas'
        ``sort_values``, stable unless the kwargs say otherwise).
    limits : dsort.collections.config.Limits, optional
        ``local_directory``, ``memory_limit`` and ``device_memory_limit`` as one object (then none
        of those three).

    Returns
    -------
    dask.dataframe.DataFrame or Series
        Lazy, of ``npartitions`` partitions, balanced to within one row; ties in input order.
    """
    from .config import Limits

    words = dict(
        local_directory=local_directory,
        memory_limit=memory_limit,
        device_memory_limit=device_memory_limit,
    )
    limits = Limits.of(limits, **words)
    if sort_function is not None or sort_function_kwargs is not None:
        out = sort_values(
            df,
            by,
            ascending=ascending,
            na_position=na_position,
            npartitions=npartitions,
            ignore_index=ignore_index,
            divisions=divisions,
            strategy=strategy,
            device=device,
            widths=widths,
            limits=limits,
        )
        kwargs = dict(
            by=by if isinstance(by, list) else [by],
            ascending=ascending,
            na_position=na_position,
            ignore_index=ignore_index,
        )
        if sort_function is None:
            sort_function, kwargs["kind"] = _sort_part, "stable"
        kwargs.update(sort_function_kwargs or {})
        return out.map_partitions(sort_function, **kwargs, meta=out._meta, align_dataframes=False)
    spec = key_spec(df, by, ascending, na_position, strategy, device)
    parts = output_partitions(df, npartitions)
    gpu_frame = on_gpu_frame(df)  # cudf partitions: sorted where they are, on the GPUs
    if gpu_frame:
        device = "gpu"
    if strategy == "auto":
        strategy = choose_strategy(df.npartitions, parts, divisions, device)
        if (
            strategy == "external"
            and gpu_frame
            and limits.device_memory_limit is None
            and RowCodec.of(pandas_meta(df)) is None
        ):
            # columns the GPU-resident runs cannot hold (strings, categoricals, decimals): the
            # external sort would write its rows to files; in memory (spilled by dask-cuda where it
            # must) was several times faster with a string column (BENCHMARKS.md section 5), so
            # that is the default without a GPU limit
            strategy = "memory"
    if strategy == "external":
        if divisions:
            raise ValueError("divisions=True needs the in-memory sort (strategy='memory')")
        return sort_values_external(
            df,
            list(spec.by),
            ascending=list(spec.ascending),
            na_position=na_position,
            widths=widths,
            npartitions=parts,
            ignore_index=ignore_index,
            device=device,
            limits=limits,
        )
    g = Graph(df, spec, parts, ignore_index or divisions, device, _widths_tuple(spec, widths))
    if divisions:
        rows, p = g.persist_cuts()
        sizes = [n for n in p.out_sizes if n] or [0]  # balanced: any empty outputs come last
        groups = [(a, min(b, len(sizes))) for a, b in g.groups if a < len(sizes)]
        return g.collection(
            positional_divisions(sizes), (rows[: len(groups) + 1], tuple(sizes), groups)
        )
    return g.collection()


def sort_series(
    s,
    *,
    ascending=True,
    na_position="last",
    npartitions=None,
    ignore_index=False,
    divisions=False,
    strategy="auto",
    device=None,
    **options,
):
    """A dask series sorted by its values, as pandas' ``Series.sort_values(kind="stable")``: index
    labels kept (or positions with ``ignore_index``; known positional divisions with
    ``divisions=True``), the name kept; a dask-cudf series stays one. The other options are
    :func:`sort_values`'s."""
    meta = getattr(s, "_meta", None)
    # pandas' or cudf's
    if not (isinstance(meta, pd.Series) or (on_gpu_frame(s) and type(meta).__name__ == "Series")):
        raise TypeError(
            f"sort_series sorts dask Series; this is a {type(s).__name__}"
            + (" (sort_values sorts frames)" if hasattr(s, "columns") else "")
        )
    label = s.name if s.name is not None else "values"  # errors name the series by its name
    out = sort_values(
        s.to_frame(name=label),
        [label],
        ascending=ascending,
        na_position=na_position,
        npartitions=npartitions,
        ignore_index=ignore_index,
        divisions=divisions,
        strategy=strategy,
        device=device,
        **options,
    )
    return out[label].rename(s.name)


def _sort_part(part, **kwargs):
    return part.sort_values(**kwargs)


def sort_values_external(
    df,
    by,
    *,
    ascending=True,
    na_position="last",
    widths=None,
    npartitions=None,
    ignore_index=False,
    local_directory=None,
    memory_limit="auto",
    device_memory_limit=None,
    device=None,
    limits=None,
):
    """:func:`sort_values` in memory bounded by the partition size, not the frame's.

    Each partition is sorted by its encoded keys into a run (its rows pickled in blocks in a file
    under ``local_directory``, or, for fixed-width columns, kept as byte rows with its keys in the
    run store), the exact cuts of every output partition come from the keys alone, and each output
    partition reads its slices of the runs and merges them (:mod:`dsort.collections.frame_runs`,
    :mod:`dsort.collections.fixed_frames`): ``sort_values_external(df, ...).to_parquet(path)``
    never holds the frame. The runs are removed once every output partition is made.

    Parameters
    ----------
    df, by, ascending, na_position, widths, npartitions, ignore_index, device
        As for :func:`sort_values`.
    local_directory : str, optional
        Where runs that do not fit in memory go (default: dask's ``temporary-directory``).
    memory_limit : int, str or float, default "auto"
        Host memory the runs may hold in one process, then files.
    device_memory_limit : int, str or float, optional
        Sorted on GPUs (``device="gpu"`` or a dask-cudf frame), a frame of fixed-width columns
        keeps its runs on the GPUs, up to ``dsort.runs.shared-gpu-fraction`` of each one's memory
        and this much of each worker's runs (bytes, a size such as ``"4GB"``, or a share of its
        GPU such as ``0.25``, as dask-cuda's limit of the same name); beyond them, host memory
        and then files.
    limits : dsort.collections.config.Limits, optional
        Those three as one object.

    Returns
    -------
    dask.dataframe.DataFrame or Series
        Lazy, as the in-memory sort's, balanced to within one row.
    """
    from dask.base import tokenize

    from . import config, fixed_frames, frame_runs, scale, stores
    from ..core import plan, runs as R
    from .array import run_memory
    from .passes import merge_tasks

    lim = config.Limits.of(
        limits,
        local_directory=local_directory,
        memory_limit=memory_limit,
        device_memory_limit=device_memory_limit,
    )
    local_directory = lim.local_directory
    spec = key_spec(df, by, ascending, na_position, "external", device)
    budget = run_memory(lim.memory_limit)
    # a share: of each worker's GPU
    gpu_budget = config.size_or_share(lim.device_memory_limit, "device_memory_limit")
    widths = _widths_tuple(spec, widths)
    partitions, spacing = output_partitions(df, npartitions), 256
    gpu_frame, meta = on_gpu_frame(df), pandas_meta(df)
    owners, on_gpus = scale.partition_workers(df), device == "gpu" or gpu_frame
    runs_at = scale.frame_runs(df.npartitions, external=True, owners=owners, gpu=on_gpus)
    # as many merges as runs where they do not follow the workers: runs cut where the owner changes
    # cost each merge a slice more, a merge more would cost one more of every run
    groups = scale.merge_groups(
        partitions, len(scale.frame_runs(df.npartitions, external=True, gpu=on_gpus))
    )
    starts = tuple(a for a, _ in groups)
    tok = tokenize(df, spec, widths, npartitions, ignore_index, device, "external", runs_at, starts)
    device = "gpu" if gpu_frame else device
    # a cudf frame's rows carry their columns' nulls; one of other columns (strings, categoricals,
    # decimals, pandas' nullable dtypes) takes the general path below, its rows gathered by cudf
    codec = RowCodec.of(meta, nulls=gpu_frame)
    # more runs than one merge pass takes: a first pass over groups of them, as many ranges a group
    # as runs
    passes = plan.pass_groups(len(runs_at), int(config.get("file-sort.max-runs")))
    first = dict(
        groups=passes,
        group_ranges=tuple((0,) * (b - a) for a, b in passes),
        first_piece=len(runs_at),
    )
    if codec is not None:  # fixed-width columns: rows in the run store, no pickling
        key_bytes = spec.width((0,) * len(spec.by))
        layout = R.Layout(key_bytes + codec.row_bytes, key_bytes)
        gpu = device == "gpu" or gpu_frame
        store = stores.store_config(
            tok, layout.row_bytes, local_directory, budget, gpu=gpu, gpu_budget=gpu_budget
        )
        # a lost run is made again from them (remote.FromGraph)
        chunks = T.Chunks.of(df.__dask_keys__())
        job = fixed_frames.FixedFrameJob(
            spec,
            codec,
            partitions,
            layout=layout,
            spacing=spacing,
            store=store,
            ignore_index=ignore_index,
            gpu=gpu,
            cudf=gpu_frame,
            starts=starts,
            inputs=None if chunks is None else (chunks, tuple(runs_at)),
            **first,
        )
        run, cuts, merge, extra, functions = (
            fixed_frames.fixed_run,
            fixed_frames.fixed_cuts,
            fixed_frames.fixed_merge,
            (),
            None,
        )
    else:
        store = stores.store_config(
            tok, spec.width(widths or (1,) * len(spec.by)), local_directory, budget
        )
        job = frame_runs.FrameJob(
            spec,
            widths,
            partitions,
            spacing=spacing,
            store=store,
            ignore_index=ignore_index,
            device=device,
            starts=starts,
            **first,
        )
        run, cuts, merge, extra = (
            frame_runs.frame_run,
            frame_runs.frame_cuts,
            frame_runs.frame_merge,
            (df._meta,),
        )
        functions = (
            frame_runs.frame_group_cuts,
            frame_runs.frame_group_merge,
            frame_runs.frame_chain,
        )
    dsk = {}
    # fixed-width frames have no object columns
    inputs = wired_inputs(dsk, df, tok) if codec is None else df.__dask_keys__()
    runs = [(T.name(T.RUN, tok), g) for g in range(len(runs_at))]
    for key, (a, b) in zip(runs, runs_at):
        dsk[key] = T.task(key, run, job, key[1], *[T.ref(k) for k in inputs[a:b]])

    # a group of several outputs: its frame wired for the output pieces that other workers may take
    def wired(g):
        return (
            (frame_chunk.wired_result,) if codec is None and groups[g][1] - groups[g][0] > 1 else ()
        )

    # the merges beside the first pass's pieces, or spread over the workers that hold the runs
    # (evenly however the input lies)
    run_owners = [owners[a] for a, _ in runs_at] if owners else None
    cut, merges, _, _ = merge_tasks(
        dsk,
        job,
        tok,
        runs,
        cuts,
        merge,
        len(groups),
        owners=run_owners,
        first=functions,
        extra=extra,
        wrap=wired,
    )
    sizes = T.name(T.SIZES, tok)
    dsk[sizes] = T.task(sizes, frame_runs.output_sizes, job, T.ref(cut))
    # fixed-width rows: a group's outputs made apart
    piece = fixed_frames.nth if codec is not None else frame_chunk.piece
    outputs = output_pieces(dsk, tok, merges, groups, T.ref(sizes), piece)
    return as_collection(df, dsk, df._meta, None, outputs, tok, ignore_index)


class _FrameAccessor:
    """``ddf.dsort``: dsort's sorts as methods of a dask dataframe (registered when dask.dataframe
    and dsort are both imported)."""

    def __init__(self, df):
        self._df = df

    def sort_values(self, by, **options):
        """:func:`dsort.dataframe.sort_values` of this frame."""
        return sort_values(self._df, by, **options)

    def set_index(self, other, *args, **options):
        """:func:`dsort.dataframe.set_index` of this frame (dask's positional arguments too)."""
        return set_index(self._df, other, *args, **options)


class _SeriesAccessor:
    """``series.dsort``: :func:`sort_series` as a method of a dask series."""

    def __init__(self, s):
        self._s = s

    def sort_values(self, **options):
        """:func:`dsort.dataframe.sort_series` of this series."""
        return sort_series(self._s, **options)


def register_accessors() -> None:
    """Put ``.dsort`` on dask dataframes and series (done once dsort and dask.dataframe are both
    imported, in either order: see :mod:`dsort`)."""
    import warnings

    from dask.dataframe import extensions

    with warnings.catch_warnings():  # registering twice (a reload) only warns
        warnings.simplefilter("ignore")
        extensions.register_dataframe_accessor("dsort")(_FrameAccessor)
        extensions.register_series_accessor("dsort")(_SeriesAccessor)
