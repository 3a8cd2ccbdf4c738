"""The fixed-width file sort (records and ``.npy``) as one dask graph: the run, cut and merge
tasks of :mod:`dsort.core.filesort` over the input's blocks, built the one way dsort builds tasks
(:mod:`dsort.collections.tasks`)."""

from __future__ import annotations

from ..core import plan
from ..core.filesort import Job, cuts_task, merge_task, run_task
from ..collections.passes import first_pass
from ..collections.tasks import CUTS, MERGE, RUN, anchors, beside, name, ref, task, task_beside


def graph(job: Job) -> tuple[dict, list, list, list]:
    """``(dask graph, run keys, chain keys, merge keys)``: computing the run keys gives ``(Run,
    input summary, times)`` per block, the chain keys ``(Chain, times)`` per group of a first
    merge pass (none where one pass merges every run: ``job.groups`` empty), the merge keys
    ``(output summary, times)`` per output range."""
    dsk = {}
    run_keys = [(name(RUN, job.id), i) for i in range(len(job.blocks))]
    for i, k in enumerate(run_keys):
        dsk[k] = task(k, run_task, job, i)
    chain_keys, all_pieces = first_pass(dsk, job, job.id, run_keys)
    # the final pass: over the runs, or over the chains; each merge beside a run or piece it reads
    inputs = chain_keys or run_keys
    cut = name(CUTS, job.id)
    dsk[cut] = task(cut, cuts_task, job, [ref(k) for k in inputs])
    merge_keys = [(name(MERGE, job.id), t) for t in range(len(job.range_rows))]
    near = anchors(dsk, job.id, [beside(all_pieces or run_keys, t, len(merge_keys)) for t in range(len(merge_keys))])
    for t, k in enumerate(merge_keys):
        dsk[k] = task_beside(k, near[t], merge_task, job, ref(cut), t)
    return dsk, run_keys, chain_keys, merge_keys


# -- sizes ----------------------------------------------------------------------------------------


def plan_blocks(files, data_offsets, lengths, row_bytes: int, rows_per_block: int):
    """Input blocks ``(path, byte offset, rows)`` of :func:`dsort.core.plan.blocks`."""
    return tuple((str(files[f]), int(data_offsets[f]) + s * row_bytes, n) for f, s, n in plan.blocks(lengths, rows_per_block))
