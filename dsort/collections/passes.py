"""The tasks of a first merge pass (:class:`dsort.core.filesort.FirstPass`), for the file sort's
graph and the external array sort's: where the runs are more than one merge pass takes, each
group of consecutive runs is cut (``dsort-group-cuts``), merged range by range into the pieces of
one chained run (``dsort-group-merge``) and handed on as that chain (``dsort-chain``); the final
cuts and merges then take the chains for runs."""

from __future__ import annotations

from ..core.filesort import FirstPass, chain_task, group_cuts_task, group_merge_task
from .tasks import CHAIN, GROUP_CUTS, GROUP_MERGE, anchors, beside, name, ref, task, task_beside


def first_pass(dsk: dict, job: FirstPass, token: str, run_keys: list, functions=None, extra=()) -> tuple[list, list]:
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
