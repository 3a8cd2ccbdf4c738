"""How a dask sort is cut into tasks: runs and merge groups that follow the data and the workers,
never the number of chunks or partitions.

A collection of P chunks (partitions) sorted into Q output chunks would cost P x Q tasks (or
slices) if every chunk were a run and every output a merge: 4096 small chunks would make 16
million. Here consecutive chunks are sorted together into R runs (:func:`array_runs`,
:func:`frame_runs`), consecutive outputs are merged together in as many groups (at least
:data:`MIN_GROUPS`; :func:`merge_groups`, :func:`output_groups`), and each output chunk is then a
plain piece of its group's result. R comes from the worker threads (every one busy) and the data's
size (no run below ``dsort.scale.min-run``; an external sort's runs bounded by
``dsort.scale.external-run``), so a sort builds O(P + Q) tasks and R x R slices, whatever P and Q
are.
"""

from __future__ import annotations

import os

from . import config
from ..core import plan
from .remote import scheduler_identity

MIN_GROUPS = 8  # merge groups at least (where there are as many outputs): see merge_groups


def _cluster_workers():
    """The scheduler's record of each worker of the distributed client the graph will run on, or
    None where dask's local schedulers run it."""
    import dask

    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    try:
        from distributed import default_client

        return list(scheduler_identity(default_client())["workers"].values())
    except (ImportError, ValueError, TypeError):
        return None


def threads() -> int:
    """The worker threads the graph will run on: a distributed client's workers' together, else
    this machine's CPUs (dask's local schedulers)."""
    workers = _cluster_workers()
    if workers is None:
        return os.cpu_count() or 1
    return max(1, sum(int(w.get("nthreads") or 1) for w in workers))


def workers() -> int:
    """The workers the graph will run on: a distributed client's, else one (dask's local
    schedulers)."""
    return max(1, len(_cluster_workers() or ()))


def _bytes(name: str, gpu: bool) -> int:
    """The setting ``dsort.collections.scale.NAME`` (``gpu-NAME`` for a GPU) in bytes."""
    return config.nbytes("scale." + ("gpu-" if gpu else "") + name)


def array_runs(sizes, row_bytes: int, gpu: bool, external: bool, host: bool = True) -> list:
    """Chunks of ``sizes`` rows (``row_bytes`` a row: key and value) grouped into runs:
    ``[(first chunk, end), ...]`` (:func:`dsort.core.plan.groups`). ``host``: the chunks are in
    host memory, where chunks of ``whole-chunk`` bytes are not grouped (moving one to another
    worker costs more than its sort). Chunks already on the GPUs (``gpu``, not ``host``) sorted by
    an external sort (its runs shared between the GPUs): ``gpu-resident-runs-per-worker`` runs a
    worker, each of at most ``gpu-resident-run`` bytes. Every merge reads a slice of every run, so
    fewer, larger runs win there (BENCHMARKS.md section 7)."""
    nbytes = int(sum(sizes)) * int(row_bytes)
    if gpu and external and not host:
        count = plan.run_count(
            len(sizes),
            workers(),
            int(config.get("scale.gpu-resident-runs-per-worker")),
            nbytes,
            _bytes("min-run", gpu),
            _bytes("resident-run", gpu),
        )
        return plan.groups(sizes, count)
    count = plan.run_count(
        len(sizes),
        threads(),
        int(config.get("scale.runs-per-thread")),
        nbytes,
        _bytes("min-run", gpu),
        _bytes("external-run", gpu) if external else None,
        _bytes("whole-chunk", gpu) if host else None,
        int(config.get("scale.most-runs-per-thread")),
    )
    return plan.groups(sizes, count)


def frame_runs(partitions: int, external: bool, owners=None, gpu: bool = False) -> list:
    """Partitions grouped into runs, by count (their sizes are not known before they are read):
    ``runs-per-thread`` for each worker thread, or where ``gpu`` (the runs are sorted and merged
    on GPUs) ``gpu-runs-per-worker`` for each worker (its threads share one GPU: more runs only
    add slices for every merge to read, and on several GPUs their reads of each other's runs
    contend for the GIL: BENCHMARKS.md section 7); for an external sort at most
    ``frame-partitions-per-run`` partitions a run (memory bounded by a few partitions). With
    ``owners`` (:func:`partition_workers`), no run joins partitions of two workers: dask would move
    all but one of them to one worker (cudf frames on two GPUs, over TCP: about half the runs
    waited for a partition of the other GPU, BENCHMARKS.md section 5); unless that makes more than
    :data:`MOST_RUNS_FOLLOWING_WORKERS` times the runs (partitions scattered over the workers), or
    for an external sort :data:`EXTERNAL_RUNS_FOLLOWING_WORKERS` runs if that is more. The merges
    are as many as the runs without ``owners`` (:func:`merge_groups`)."""
    if gpu:
        count = plan.run_count(partitions, workers(), int(config.get("scale.gpu-runs-per-worker")))
    else:
        count = plan.run_count(partitions, threads(), int(config.get("scale.runs-per-thread")))
    if external:
        count = max(
            count, -(-partitions // max(1, int(config.get("scale.frame-partitions-per-run"))))
        )
    runs = plan.groups([1] * partitions, count)
    if not owners or not any(owners):
        return runs
    out = _cut_at_owners(runs, owners)
    # but not at any price: the cuts and merges grow with the runs (runs x merge groups slices); an
    # external sort's merges stay as many (sort_values_external), each reading a slice more a run
    most = max(
        MOST_RUNS_FOLLOWING_WORKERS * len(runs), EXTERNAL_RUNS_FOLLOWING_WORKERS if external else 0
    )
    return out if len(out) <= most else runs


def _cut_at_owners(runs, owners) -> list:
    """Consecutive ``runs`` (``(a, b)``) cut wherever the owner of the next piece changes
    (``owners``: each piece's worker; a piece of unknown owner joins any)."""
    out = []
    for a, b in runs:
        cuts, last = [], owners[a]  # the last known owner in this run
        for i in range(a + 1, b):
            if owners[i] and last and owners[i] != last:
                cuts.append(i)
            last = owners[i] or last
        out += list(zip([a, *cuts], [*cuts, b]))
    return out


# At most this many times the runs where they follow the workers (frame_runs), else the partitions
# move. Cudf frames over 2 workers at random (BENCHMARKS.md section 5): at 64 partitions, runs
# that follow the workers (a few more) beat moving partitions; at 512 partitions, following made
# many times the runs and was much slower than moving them.
MOST_RUNS_FOLLOWING_WORKERS = 1.5
# An external sort's runs follow the workers up to this many whatever the count: its merges do not
# grow with them, and runs that fetch partitions over TCP cost more than a slice more for each
# merge to read (pandas frames on four GPUs: BENCHMARKS.md section 7).
EXTERNAL_RUNS_FOLLOWING_WORKERS = 64


PLACEMENT_DEPTH = 6  # partition-wise steps followed back from a partition to one dask holds


def partition_workers(collection, keys=None) -> list | None:
    """The dask worker that holds each partition of ``collection`` (``keys``: their task keys,
    where they are not its ``__dask_keys__()``: an array's chunks along axis 0), or will make it
    beside the one result it is made from: a persisted partition's worker, or (a partition-wise
    step over a persisted collection, up to :data:`PLACEMENT_DEPTH` of them) its source's; None for
    a partition made otherwise. None where no distributed client has two workers or more (one
    machine's threads move nothing), or the setting ``dsort.scale.runs-follow-workers`` is off.
    Reads the collection's graph where its expression holds persisted partitions (not free at
    thousands of partitions: BENCHMARKS.md), not a lazy one's."""
    import dask

    if not config.get("scale.runs-follow-workers"):
        return None
    if dask.config.get("scheduler", None) not in (None, "dask.distributed", "distributed"):
        return None
    try:
        from distributed import Future, default_client

        client = default_client()
    except (ImportError, ValueError):
        return None
    if len(scheduler_identity(client)["workers"]) < 2:
        return None
    # a dask-expr frame: persisted data is a FromGraph in it
    expr = getattr(collection, "expr", None)
    if expr is not None and not any(type(e).__name__ == "FromGraph" for e in expr.walk()):
        return None  # no graph to read (a lazy frame's costs time at thousands of partitions)
    from dask.core import get_dependencies

    graph, keys = collection.__dask_graph__(), collection.__dask_keys__() if keys is None else keys
    source = {}
    for k in keys:
        at = k
        for _ in range(PLACEMENT_DEPTH):
            node = graph.get(at)
            if isinstance(node, Future):
                source[k] = node
                break
            deps = get_dependencies(graph, at) if node is not None else ()
            if len(deps) != 1:
                break
            at = next(iter(deps))
    if not source:
        return None
    who = client.who_has(list({f.key: f for f in source.values()}.values()))
    return [(who.get(source[k].key) or [None])[0] if k in source else None for k in keys]


def runs_by_worker(sizes, groups, owners, ties_unseen: bool) -> list:
    """Runs (tuples of chunk numbers) of the chunks of ``sizes`` rows that keep each run's chunks
    on one worker (``owners``: each chunk's worker, from :func:`partition_workers`; None where
    not known); ``groups``: consecutive chunks as :func:`array_runs` made them. A run of chunks of
    two workers moves all but one of them first, over TCP (BENCHMARKS.md section 7: most of the
    first sort's time on two GPUs).

    The groups cut where the owner changes, while that makes at most
    :data:`MOST_RUNS_FOLLOWING_WORKERS_ARRAYS` times the runs. Beyond that (chunks scattered over
    the workers), and where equal keys cannot be told apart (``ties_unseen``: keys alone, of a type
    whose equal values are equal bytes), each worker's chunks in order, in a share of the runs as
    large as its share of the rows: runs of chunks that are not consecutive, whose ties a stable
    merge would order by run, not by position. Else ``groups`` as they are."""
    as_is = [tuple(range(a, b)) for a, b in groups]
    if owners is None or len({o for o in owners if o}) < 2:
        return as_is
    cut = [tuple(range(a, b)) for a, b in _cut_at_owners(groups, owners)]
    if len(cut) <= MOST_RUNS_FOLLOWING_WORKERS_ARRAYS * len(groups):
        return cut
    if not ties_unseen:
        return as_is
    mine: dict = {}
    for i, o in enumerate(owners):
        mine.setdefault(o, []).append(i)
    total = max(1, int(sum(sizes)))
    out = []
    for chunks in mine.values():
        rows = [int(sizes[i]) for i in chunks]
        share = max(1, round(len(groups) * sum(rows) / total))
        out += [tuple(chunks[a:b]) for a, b in plan.groups(rows, share)]
    return sorted(out)


# At most this many times the runs where an array's runs follow the workers in consecutive
# chunks (runs_by_worker): a run a chunk where chunks alternate between two workers.
MOST_RUNS_FOLLOWING_WORKERS_ARRAYS = 2


def beside_balanced(keys, owners, n: int) -> list:
    """For each of ``n`` tasks, the key among ``keys`` it goes beside (:func:`dsort.collections.
    tasks.task_beside`), so that the tasks spread evenly over the workers that hold the keys
    (``owners``: each key's worker, from :func:`partition_workers`; None where not known), not
    over the keys: where the input lies unevenly (2^26 rows of frames on two GPUs, 55 of 64
    partitions on one worker), merges beside the runs would load that worker as much. Task ``t``
    goes to the ``t``-th worker in turn, beside that worker's keys in turn. Without two known
    owners: spread over the keys (:func:`dsort.collections.tasks.beside`)."""
    from . import tasks as T

    known = [] if owners is None else list(dict.fromkeys(o for o in owners if o))
    if len(known) < 2 or len(owners) != len(keys):
        return [T.beside(keys, t, n) for t in range(n)]
    mine = {w: [k for k, o in zip(keys, owners) if o == w] for w in known}
    return [
        mine[known[t % len(known)]][(t // len(known)) % len(mine[known[t % len(known)]])]
        for t in range(n)
    ]


def output_groups(sizes, runs: int) -> list:
    """Output chunks of ``sizes`` rows in consecutive merge groups of about equal rows: as many as
    the runs, at least :data:`MIN_GROUPS` (see :func:`merge_groups`)."""
    return plan.groups(sizes, max(1, runs, MIN_GROUPS))


def merge_groups(outputs: int, runs: int) -> list:
    """Output chunks ``0 .. outputs - 1`` in consecutive groups, as many as the runs (at most one
    per output) and at least :data:`MIN_GROUPS`: each group is one merge, of about a run's rows,
    and its outputs are pieces of it. Why a floor: distributed's scheduler takes a large task
    group whose tasks depend on fewer than 5 tasks in all for "root-ish" and queues it, handing a
    worker one task per round trip; thousands of output pieces of one or two merges then cost
    many times more each (BENCHMARKS.md section 4)."""
    return plan.groups([1] * outputs, max(1, runs, MIN_GROUPS))
