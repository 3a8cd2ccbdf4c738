"""The fixed-width file sort (records and ``.npy``) as one dask graph: the run, cut and merge
tasks of :mod:`dsort.core.filesort` over the input's blocks, built the one way dsort builds tasks
(:mod:`dsort.collections.tasks`)."""

from __future__ import annotations

from ..core import plan
from ..core.filesort import Job, cuts_task, merge_task, run_task
from ..collections.passes import merge_tasks
from ..collections.tasks import RUN, name, task


def graph(job: Job) -> tuple[dict, list, list, list]:
    """``(dask graph, run keys, chain keys, merge keys)``: computing the run keys gives ``(Run,
    input summary, times)`` per block, the chain keys ``(Chain, times)`` per group of a first
    merge pass (none where one pass merges every run: ``job.groups`` empty), the merge keys
    ``(output summary, times)`` per output range."""
    dsk = {}
    run_keys = [(name(RUN, job.id), i) for i in range(len(job.blocks))]
    for i, k in enumerate(run_keys):
        dsk[k] = task(k, run_task, job, i)
    _, merge_keys, chain_keys, _ = merge_tasks(
        dsk, job, job.id, run_keys, cuts_task, merge_task, len(job.range_rows)
    )
    return dsk, run_keys, chain_keys, merge_keys


# -- sizes ----------------------------------------------------------------------------------------


def plan_blocks(files, data_offsets, lengths, row_bytes: int, rows_per_block: int):
    """Input blocks ``(path, byte offset, rows)`` of :func:`dsort.core.plan.blocks`."""
    return tuple(
        (str(files[f]), int(data_offsets[f]) + s * row_bytes, n)
        for f, s, n in plan.blocks(lengths, rows_per_block)
    )
