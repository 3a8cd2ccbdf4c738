"""dsort's run stores on a distributed cluster: the worker a task runs on, letting go of its
thread while it waits, and slices of runs on other machines' disks read where they are.

:data:`DASK` is the :class:`~dsort.core.run_handles.Cluster` that the stores of a sort run by dask
carry in their config (:func:`dsort.collections.stores.store_config`): on a distributed worker it
names the worker and reads other workers' runs by tasks pinned to them; elsewhere (dask's local
schedulers, the client) it is one process, as :data:`dsort.core.run_handles.LOCAL`. Nothing here
imports distributed before a worker runs (the embedded sort never pays for it).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
import uuid

from ..core import filesort as F
from ..core import runs as R
from . import tasks as T
from ..core.run_handles import Run, flat

logger = logging.getLogger(__name__)

# A merge waits at most this long for another worker to read its slices of that worker's runs
# (then makes those runs again itself, or fails saying what that worker was doing): a read that
# never comes back (seen twice in tests/test_two_pass.py on the 2-core machine, cause not found;
# the hosts test's "gone" workers were scheduler_identity's race) must not hang the sort; where
# nothing can make them again, the read is asked once more.
REMOTE_READ_SECONDS = 120.0
# How often a task waiting for slices read on other workers looks whether those workers are still
# there: a read pinned to a worker that died waits for it for ever, so the wait ends only at a look.
REMOTE_POLL_SECONDS = 0.5


class DaskCluster:
    """The cluster of a sort run by dask (:class:`~dsort.core.run_handles.Cluster`)."""

    def worker(self):
        return this_worker()

    def seceded(self):
        return seceded()

    def everywhere(self) -> bool:
        """``dsort.read-runs-where-they-are``: read other workers' runs there even where their
        files are visible here (a test of reads across hosts on one machine)."""
        import dask

        return bool(dask.config.get("dsort.read-runs-where-they-are", False))

    def __reduce__(self):
        return (_dask, ())

    def fetch(self, store, items, recover=None) -> dict:
        """``{item: NumPy rows}`` for the items whose run lies on another machine's disk (its file
        is not visible here): one task on each such worker reads all of this task's slices there
        (this task secedes meanwhile), so only the slices travel; runs of workers that are gone are
        made again here first (``recover(index) -> Run``: its block sorted again), then read as
        local runs. The caller must hold nothing another task of this worker waits for (a GPU
        slot): while it waits, the worker starts other tasks on its thread, and it takes a thread
        back only when one of them ends."""
        # the keys of the result: the items of a chain's pieces, as read_many numbers them
        items = flat(items)[0]
        everywhere = self.everywhere()  # also where the files are visible
        mine = store.address
        remote = {
            i: it
            for i, it in enumerate(items)
            if it[0].worker and it[0].worker != mine and (everywhere or not R.visible(it[0]))
        }
        if not remote:
            return {}
        from distributed import wait, worker_client

        by_worker: dict = {}
        for i, (run, _, _) in remote.items():
            by_worker.setdefault(run.worker, []).append(i)
        got = {}
        with worker_client() as client:

            def ask(w):  # a read task pinned to worker w, and when it is late
                items = [(remote[i][0], int(remote[i][1]), int(remote[i][2])) for i in by_worker[w]]
                key = f"dsort-slices-{store.config.job}-{uuid.uuid4().hex}"
                f = client.submit(
                    R.read_slices,
                    store.config,
                    items,
                    workers=[w],
                    allow_other_workers=False,
                    key=key,
                )
                return f, time.monotonic() + REMOTE_READ_SECONDS

            alive = set(scheduler_identity(client)["workers"])
            futures = {w: ask(w) for w in by_worker if w in alive}
            why = {w: "which is gone" for w in by_worker if w not in futures}
            asked_again: set = set()
            while futures:
                try:
                    wait([f for f, _ in futures.values()], timeout=REMOTE_POLL_SECONDS)
                except TimeoutError:  # still running, or waiting for a worker that died: look again
                    pass
                alive = set(scheduler_identity(client)["workers"])
                for w, (f, deadline) in list(futures.items()):
                    if f.status == "finished":
                        try:
                            got.update(zip(by_worker[w], f.result(timeout=REMOTE_READ_SECONDS)))
                        except TimeoutError:  # its result does not come: made again below
                            why[w] = f"whose result did not come within {REMOTE_READ_SECONDS:g} s"
                            f.cancel()
                    elif f.status == "error":
                        why[w] = (
                            f"whose read failed: {type(f.exception()).__name__}: {f.exception()}"
                        )
                        f.cancel()
                    elif w not in alive:
                        why[w] = "which is gone"
                        f.cancel()  # its worker died meanwhile: its runs are made again below
                    elif time.monotonic() > deadline:
                        why[w] = (
                            f"which did not read it within {REMOTE_READ_SECONDS:g} s "
                            f"({_doing(client, w, f.key)})"
                        )
                        f.cancel()
                        # nothing to make them again with: asked once more
                        if recover is None and w not in asked_again:
                            logger.warning(
                                "run slices asked of worker %s: %s; asked again", w, why[w]
                            )
                            asked_again.add(w)
                            futures[w] = ask(w)
                            continue
                    else:
                        continue
                    del futures[w]
        lost = {i: it for i, it in remote.items() if i not in got}
        for run, _, _ in lost.values():
            if recover is None:
                raise OSError(
                    f"run {run.index} was on worker {run.worker}, "
                    f"{why.get(run.worker, 'which did not read it')}"
                )
        with seceded() if lost else contextlib.nullcontext():  # as read_many makes lost runs
            for i, (run, lo, hi) in lost.items():
                got[i] = store.read(store.recover_once(run.index, recover), lo, hi)
        return got


DASK = DaskCluster()


def _dask() -> DaskCluster:
    return DASK


@contextlib.contextmanager
def seceded():
    """On a dask worker, the task running this block lets go of its thread meanwhile (the worker
    runs other tasks, those this one waits for among them) and takes one back at its end."""
    # no worker, or let go already (a recovery inside one)
    if this_worker() is None or getattr(_seceding, "on", False):
        yield
        return
    from distributed import rejoin, secede

    secede()
    _seceding.on = True
    try:
        yield
    finally:
        _seceding.on = False
        rejoin()


_seceding = threading.local()


def this_worker():
    """The dask worker running this task, or None (dask's local schedulers, the client). A
    process that has not imported distributed runs no worker: it is not imported here (the
    embedded sort never pays for it)."""
    if "distributed" not in sys.modules:
        return None
    try:
        from distributed import get_worker

        return get_worker()
    except (ImportError, ValueError):
        return None


def read_where_it_is(run: Run, path: str, read, *args):
    """``read(path, *args)`` of a file that lies beside ``run`` (a frame's pickled rows): here
    where the file is visible, else by a task pinned to the worker whose disk holds the run (on a
    cluster of hosts that share nothing), this task seceded meanwhile. A worker gone fails with an
    OSError that names it; a read that does not come back within :data:`REMOTE_READ_SECONDS` is
    asked once more, then fails with an OSError that says what that worker was doing."""
    if os.path.exists(path) or not run.worker:
        return read(path, *args)
    from distributed import worker_client

    with seceded(), worker_client() as client:
        for asked in range(2):
            if run.worker not in scheduler_identity(client)["workers"]:
                raise OSError(f"{path} was on worker {run.worker}, which is gone")
            key = f"dsort-slices-{run.job}-{uuid.uuid4().hex}"
            f = client.submit(
                read, path, *args, workers=[run.worker], allow_other_workers=False, key=key
            )
            try:
                return f.result(timeout=REMOTE_READ_SECONDS)
            except TimeoutError:
                why = (
                    f"which did not read it within {REMOTE_READ_SECONDS:g} s "
                    f"({_doing(client, run.worker, f.key)})"
                )
                f.cancel()
                if asked or run.worker not in scheduler_identity(client)["workers"]:
                    raise OSError(f"{path} was on worker {run.worker}, {why}") from None
                logger.warning("%s asked of worker %s: %s; asked again", path, run.worker, why)


def scheduler_identity(client) -> dict:
    """The scheduler's identity (``"workers"``: every worker), fetched for this call alone. Not
    ``client.scheduler_info()``, which returns the client's shared copy: the client's periodic
    refresh replaces it with one that names no worker (distributed 2026.8's
    ``_update_scheduler_info`` asks for ``n_workers=0``), so a thread that reads it at that moment
    sees none, and took a live worker for gone (a frame merge on hosts that share nothing failed
    so, in CI and in 1 of 3 local runs)."""
    return client.sync(client.scheduler.identity, n_workers=-1)


def _doing(client, worker: str, key) -> str:
    """What ``worker`` says of task ``key`` and of its threads (a read that does not come: the
    reason it gives), in one line; asked in its event loop, so a worker whose threads are all busy
    answers."""

    def ask(dask_worker, key=key):
        import traceback

        st = dask_worker.state
        ts = st.tasks.get(key)
        frames = sys._current_frames()
        threads = [
            f"{t.name}: "
            + " < ".join(
                f"{f.name}:{f.lineno}" for f in traceback.extract_stack(frames[t.ident])[::-1][:4]
            )
            for t in threading.enumerate()
            if t.ident in frames
        ]
        return (
            f"its task {ts.state if ts else 'unknown there'}, {len(st.executing)} executing, "
            f"{len(st.long_running)} seceded, "
            f"{len(st.ready)} ready; threads: " + "; ".join(threads)
        )

    try:
        return client.sync(client._run, ask, workers=[worker], callback_timeout=10)[worker]
    except Exception as e:  # noqa: BLE001 (a diagnosis only)
        return f"it did not say: {type(e).__name__}: {e}"


# the topic of the events that name each run a merge had made again (FromGraph)
REMADE_TOPIC = "dsort-runs-remade"


class FromGraph(F.RunJob):
    """A job of a sort of dask collections: a run that cannot be read (its worker lost, say, and
    with it the GPU memory or the disk that held it) is made again through the dask scheduler,
    by the task that made it in the graph, run again (:func:`dsort.collections.tasks.run_again`:
    from its input chunks, made again too where they are lost), by a merge that finds it gone;
    its result stays while the run store that asked for it does. For the jobs' dataclasses, which
    hold ``inputs`` (how the graph named the run tasks' inputs; None: not made again) and say
    :meth:`run_task`."""

    def run_task(self, q: int) -> tuple:
        """``(function, *arguments)`` of run ``q``'s task in the graph."""
        raise NotImplementedError

    def remake_run(self, q: int, gpu):
        # no scheduler to ask (one process loses no worker)
        if self.inputs is None or this_worker() is None:
            return super().remake_run(q, gpu)
        # a task of its own, not the run's: dask keeps a run's handle (small) on the workers that
        # read it, and gives that again though the run itself went with its worker
        s = R.store(self.store)
        got, future = T.run_again(
            (T.name(T.REMADE, self.store.job), q, s.making(q)), *self.run_task(q)
        )
        s.keep(future)
        run = F.handle(got)
        this_worker().log_event(
            REMADE_TOPIC, {"job": self.store.job, "run": q, "tier": run.tier, "worker": run.worker}
        )
        return run

    def recovery(self, gpu):
        # nothing to ask: a failed read keeps its own error
        if self.inputs is None or this_worker() is None:
            return None
        return lambda q: self.remake(q, gpu)


# the topic of the events that say where a frame sort's tasks spent their time
STAGES = "dsort-stages"


def report_stages(task: str, watch: F.Stopwatch, **facts) -> None:
    """Send one task's seconds per stage (``watch``) to the dask scheduler as an event of topic
    :data:`STAGES` (``{"task": task, stage: seconds, ..., fact: text}``;
    ``client.get_events(STAGES)`` reads them), where the task runs on a distributed worker;
    elsewhere nothing. ``facts``: words that tell tasks apart (a run's tier, say), counted by the
    reader."""
    worker = this_worker()
    if worker is not None:
        worker.log_event(STAGES, {"task": task, **watch.times, **facts})
