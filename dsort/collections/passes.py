"""The graph of every external sort, built once here for files, arrays and frames
(:func:`merge_tasks`): after its run tasks, a first merge pass where the runs are more than one
pass takes (:func:`first_pass`), one cuts task, and the merges, each beside a run or piece it
reads.

The first pass (:class:`dsort.core.filesort.FirstPass`): each group of consecutive runs is cut
(``dsort-group-cuts``), merged range by range into the pieces of one chained run
(``dsort-group-merge``) and handed on as that chain (``dsort-chain``); the final cuts and merges
then take the chains for runs."""

from __future__ import annotations

from ..core.filesort import FirstPass, chain_task, group_cuts_task, group_merge_task
from . import scale
from .tasks import (
    CHAIN,
    CUTS,
    GROUP_CUTS,
    GROUP_MERGE,
    MERGE,
    anchors,
    beside,
    name,
    ref,
    task,
    task_beside,
)


def merge_tasks(
    dsk: dict,
    job,
    token: str,
    run_keys: list,
    cuts,
    merge,
    merges: int,
    *,
    owners=None,
    first=None,
    extra=(),
    wrap=None,
):
    """Add the tasks that follow an external sort's run tasks (``run_keys``) to ``dsk``: the first
    pass where ``job.groups`` asks for one (:func:`first_pass`; ``first``: its functions where the
    runs are not fixed-width rows), the cuts task ``cuts(job, *runs or chains)``, and ``merges``
    merge tasks ``merge(job, cut, g, *extra)``. Each merge goes beside a run (or first-pass piece)
    it reads, spread evenly over the workers that hold the runs where ``owners`` (each run's
    worker) says (:func:`dsort.collections.scale.beside_balanced`), else over the runs.
    ``wrap(g)``: functions that merge ``g``'s result goes through first (none by default).
    Returns ``(cuts key, merge keys, chain keys, piece keys)``."""
    chains, pieces = first_pass(dsk, job, token, run_keys, first, extra)
    near = anchors(
        dsk, token, scale.beside_balanced(pieces or run_keys, None if pieces else owners, merges)
    )
    cut = name(CUTS, token)
    dsk[cut] = task(cut, cuts, job, *map(ref, chains or run_keys))
    keys = [(name(MERGE, token), g) for g in range(merges)]
    for g, key in enumerate(keys):
        dsk[key] = task_beside(
            key, near[g], *(wrap(g) if wrap else ()), merge, job, ref(cut), g, *extra
        )
    return cut, keys, chains, pieces


def first_pass(
    dsk: dict, job: FirstPass, token: str, run_keys: list, functions=None, extra=()
) -> tuple[list, list]:
    """Add ``job``'s first-pass tasks over the runs of ``run_keys`` to ``dsk``: ``(chain keys, piece
    keys)``, both empty where ``job.groups`` is (one pass). A chain task gives ``(Chain, stage
    times)``; the final merges go beside the pieces they read, as they would beside runs.
    ``functions``: the tasks' ``(group cuts, group merge, chain)`` where the job's runs are not
    fixed-width rows (a frame's pickled rows), ``extra`` the group merges' last arguments."""
    cuts_f, merge_f, chain_f = functions or (group_cuts_task, group_merge_task, chain_task)
    chains, pieces = [], []
    for g, (a, b) in enumerate(job.groups):
        cut, n = (name(GROUP_CUTS, token), g), len(job.group_ranges[g])
        dsk[cut] = task(cut, cuts_f, job, g, [ref(k) for k in run_keys[a:b]])
        mine = [(name(GROUP_MERGE, token), g, t) for t in range(n)]
        near = anchors(dsk, token, [beside(run_keys[a:b], t, n) for t in range(n)])
        for t, k in enumerate(mine):
            dsk[k] = task_beside(k, near[t], merge_f, job, ref(cut), g, t, *extra)
        chain = (name(CHAIN, token), g)
        dsk[chain] = task(chain, chain_f, job, g, [ref(k) for k in mine])
        chains.append(chain)
        pieces += mine
    return chains, pieces
