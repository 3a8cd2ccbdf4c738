"""The external sort of dask dataframes whose columns and index all have fixed-width dtypes.

Such frames skip the pickled blocks of :mod:`dsort.collections.frame_runs`: each row is its key's
bytes then its own (:class:`dsort.core.frame_rows.RowCodec`), and the runs are those rows in the
run store, sorted, cut and merged exactly as an array's keys and values (on the GPU with
``device="gpu"``: the rows too), then decoded into frames by the merges (pandas or cudf).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ..core import chunk, cuts, plan
from ..core import frame_backend
from ..core import frame_chunk as FC
from ..core import filesort as F
from ..core import runs as R
from ..engine import device as dev
from ..engine import pools
from ..engine import host
from . import remote
from . import tasks as T
from .frame_runs import output_sizes
from .stores import device_here


@dataclass(frozen=True)
class FixedFrameJob(remote.FromGraph):
    """What the tasks of one external sort of a fixed-width frame need: a
    :class:`~dsort.core.filesort.RunJob` (its ``layout``: the key's bytes, then the row's; its
    ``range_rows``: set by the cuts task, once the runs' sizes are known; always ascending: the
    key bytes carry the order), and the frame's."""

    spec: object  # the sort's KeySpec
    codec: object  # the rows' RowCodec
    partitions: int
    ignore_index: bool = False
    gpu: bool = False
    # cudf partitions (a dask-cudf frame): their columns read and the outputs made on the GPU
    cudf: bool = False
    starts: tuple = (0,)  # the first output of every merge group
    first_piece: int = 0
    # (the input partitions' Chunks, ((first partition, end partition) of each run))
    inputs: tuple | None = None

    def gpu_for(self, t: int):
        return device_here() if self.gpu else None

    def run_task(self, q: int) -> tuple:
        chunks, runs = self.inputs
        a, b = runs[q]
        return fixed_run, self, q, *[T.ref(chunks[i]) for i in range(a, b)]

    def slot(self, gpu):
        return F.on_stream(gpu)  # this thread's own stream, as fixed_merge


def fixed_run(job: FixedFrameJob, p: int, *parts) -> R.Run:
    """Consecutive partitions ``parts`` as rows (key bytes, row bytes), sorted by their keys and
    kept as run ``p``. On a GPU the rows are built there: the columns go as they are, keys and
    rows are made on the device (no host pass over the rows)."""
    watch = F.Stopwatch()
    if job.gpu:
        # this thread's own stream: the worker's threads overlap on the GPU
        with F.on_stream(device_here()):
            rows = _device_rows(job, parts, watch)
            run = F.sort_and_keep(job, p, rows, watch, device_here())
        remote.report_stages("run", watch)
        return run
    part = FC.concat(parts)
    keys, _ = job.spec.encode(part)
    rows = np.empty((len(part), job.layout.row_bytes), np.uint8)
    kb = job.layout.key_bytes
    key = np.dtype(
        {"names": ["key"], "formats": [f"V{kb}"], "offsets": [0], "itemsize": job.layout.row_bytes}
    )
    # each key as one element
    rows.reshape(-1).view(key)["key"] = np.ascontiguousarray(keys).reshape(-1).view(f"V{kb}")
    job.codec.encode(part, rows, kb)
    watch.lap("encode")
    run = F.sort_and_keep(job, p, rows, watch)
    remote.report_stages("run", watch)
    return run


def _device_rows(job: FixedFrameJob, parts, watch: F.Stopwatch):
    """The run rows of the partitions ``parts``, one after the other, made on the current GPU (no
    frame joined first): their columns (and index) copied there as they are and joined column by
    column, then the keys (:func:`dsort.core.frame_keys.write_number_keys`: a fixed-width frame's
    sort columns are all numbers, booleans, datetimes or durations) and the rows' bytes written."""
    import cupy

    from ..core.frame_keys import write_number_keys

    kinds = [np.dtype(d).kind for d in job.codec.dtypes]
    # already on this GPU (datetimes as int64): read in the order of cudf's stream, which this
    # thread's then waits for
    if job.cudf:
        each = [pools.after_default_stream(job.codec.gpu_columns, part) for part in parts]
        columns = each[0] if len(each) == 1 else [cupy.concatenate(c) for c in zip(*each)]
    # host columns: each column of all the parts copied at once; CuPy has no datetimes; a range
    # index is made there
    else:
        made = all(_range_index_made(job, part) for part in parts)
        each = [job.codec.columns(part, index=not made) for part in parts]
        columns = [
            chunk.joined_on_gpu([c[i].view(np.int64) if k in "mM" else c[i] for c in each])
            for i, k in enumerate(kinds[: len(each[0])])
        ]
        if made and len(columns) < len(kinds):
            ranges = [
                cupy.arange(p.index.start, p.index.stop, p.index.step, dtype=job.codec.dtypes[-1])
                for p in parts
            ]
            columns.append(ranges[0] if len(ranges) == 1 else cupy.concatenate(ranges))
    watch.lap("copy in")
    names = list(parts[0].columns)
    # else: the index (last), by its name
    keys = [names.index(c) if c in names else len(columns) - 1 for c in job.spec.by]
    rows = cupy.empty((len(columns[-1]), job.layout.row_bytes), cupy.uint8)
    # the index has no nulls
    gone = [job.codec.missing(columns, i) if i < job.codec.width else None for i in keys]
    write_number_keys(
        job.spec, [columns[i] for i in keys], rows, cupy, [kinds[i] for i in keys], gone
    )
    job.codec.place(columns, rows, job.layout.key_bytes)
    F.sync(device_here())
    watch.lap("encode")
    return rows


def fixed_cuts(job: FixedFrameJob, *runs):
    """The cuts of ``job.partitions`` balanced output partitions (:func:`frame_cuts`)."""
    watch = F.Stopwatch()
    runs = [F.handle(r) for r in runs]  # runs, or a first pass's chains
    out_sizes = plan.balanced(sum(r.rows for r in runs), job.partitions)
    final = replace(job.final(), range_rows=plan.group_sums(out_sizes, job.starts))
    cut = F.cut_runs(final, list(runs), watch, settle_later=True)
    remote.report_stages("cuts", watch)
    return cut


def fixed_merge(job: FixedFrameJob, cut, t: int):
    """Merge group ``t``: its slices of every run merged and decoded into its output partitions,
    a tuple of them where it has several (:func:`nth`), else the one frame."""
    gpu = device_here() if job.gpu else None
    watch = F.Stopwatch()
    # as fixed_run; the host arrays from the worker's pool (dsort.engine.host)
    with F.on_stream(gpu), host.pooled():
        merged = F.merge_rows(job, cut, t, watch, gpu)
        rows = merged[1] if merged is not None else None
        sizes = _group_sizes(job, cut, t)
        if job.cudf:  # the outputs stay on the GPU, the group's columns taken apart once
            out = _cudf_outputs(job, rows, sizes, watch)
        else:
            out = _pandas_outputs(job, rows, sizes, watch)
    R.finish(job.store, t, len(job.starts), cut[1])
    remote.report_stages("merge", watch)
    if job.ignore_index:
        starts = np.cumsum([int(cuts.range_starts(cut[0])[t]), *sizes]).tolist()
        backend = frame_backend.of(out[0])
        out = [backend.with_positions(frame, start) for frame, start in zip(out, starts)]
    return out[0] if len(out) == 1 else tuple(out)


def _group_sizes(job: FixedFrameJob, cut, t: int) -> tuple:
    """The rows of merge group ``t``'s output partitions."""
    return output_sizes(job, cut)[
        job.starts[t] : job.starts[t + 1] if t + 1 < len(job.starts) else job.partitions
    ]


def _bounds(sizes) -> list:
    """``(first, end)`` rows of each output of ``sizes`` rows in its group."""
    ends = np.cumsum([0, *sizes]).tolist()
    return list(zip(ends[:-1], ends[1:]))


def _pandas_outputs(job: FixedFrameJob, rows, sizes, watch: F.Stopwatch) -> list:
    """The pandas frames of merged ``rows`` (on this worker's GPU, or the host) cut into output
    partitions of ``sizes`` rows: the group's columns taken apart once (on the GPU, then copied
    out as they are) and each output's frame made on its slices of them, no copy (a frame sliced
    and copied per output was a second pass over every byte). The outputs of a group share that
    memory until the last of them goes: dask counts each output's own slice, so a spilled output
    frees its memory only with its group's others (written out or spilled together, as a sort's
    consumer takes them in order)."""
    if rows is None or not len(rows):
        rows = np.empty((0, job.layout.row_bytes), np.uint8)
    if dev.is_device_array(rows):
        columns = job.codec.pick(rows, job.layout.key_bytes)
        F.sync(device_here())
        watch.lap("decode")
        columns = [dev.to_host(x) for x in columns]
        watch.lap("copy out")
    else:
        columns = job.codec.unpack(rows, job.layout.key_bytes)
        watch.lap("decode")
    out = [job.codec.frame([c[a:b] for c in columns]) for a, b in _bounds(sizes)]
    watch.lap("make frame")
    return out


def _cudf_outputs(job: FixedFrameJob, rows, sizes, watch: F.Stopwatch) -> list:
    """The cudf frames of merged ``rows`` cut into output partitions of ``sizes`` rows: the group's
    columns taken apart on the GPU once, each output's frame wrapping its slice of them (no frame
    sliced and copied again). One allocation a column a group, not an output: with RMM's default
    resource each is a cudaMalloc, and its cudaFree waits for the whole GPU. The outputs of a group
    share that memory until the last of them goes."""
    if rows is None:  # no rows: the meta's columns and index, as cudf
        import cudf

        return [cudf.from_pandas(job.codec.meta, nan_as_null=False) for _ in sizes]
    with pools.cudf_owned():  # the outputs' columns become cudf's memory
        whole = job.codec.pick(rows, job.layout.key_bytes)
    columns = [[c[a:b] for c in whole] for a, b in _bounds(sizes)]
    nulls = job.codec.null_columns(rows, job.layout.key_bytes)
    F.sync(device_here())  # the columns made before cudf (its own stream) reads them
    watch.lap("decode")
    out = [pools.on_default_stream(job.codec.cudf_frame, c, nulls) for c in columns]
    watch.lap("make frame")
    return out


def nth(frames, sizes, t: int, first: int):
    """Output partition ``t`` of a merge group whose first is ``first``: its frame among the
    group's ``frames`` (:func:`fixed_merge`), as :func:`dsort.core.frame_chunk.piece` is of the
    other groups' one frame."""
    return frames[t - first]


def _range_index_made(job: FixedFrameJob, part) -> bool:
    """Whether pandas partition ``part``'s index is a range the GPU makes itself (of an integer
    dtype: no copy of its values)."""
    import pandas as pd

    return type(part.index) is pd.RangeIndex and np.dtype(job.codec.dtypes[-1]).kind in "iu"
