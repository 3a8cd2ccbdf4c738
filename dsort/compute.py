"""Running a sort's task graph: on dask's threaded scheduler in this process
(:func:`compute_threads`) or on a cluster (:func:`compute_client`), with progress bars, and a watch
that fails a job whose cluster has had no workers for ``dsort.no-workers-timeout``
(:func:`watch_workers`) rather than waiting forever."""

from __future__ import annotations

import threading
import time

from .collections import config
from .core.errors import JobFailed


def compute_threads(dsk, keys, threads: int, progress):
    """Compute ``keys`` of ``dsk`` on a pool of ``threads`` threads (dask's threaded scheduler),
    feeding ``progress`` (a :class:`dsort.progress.Progress`, or None)."""
    from concurrent.futures import ThreadPoolExecutor

    from dask.callbacks import Callback
    from dask.threaded import get

    from .progress import make_phase_of

    phase_of = make_phase_of()

    class _Bars(Callback):
        def _pretask(self, key, dsk, state):
            if progress is not None:
                progress.started(phase_of(key))

        def _posttask(self, key, result, dsk, state, id):
            if progress is not None:
                progress.finished(phase_of(key))

    pool = ThreadPoolExecutor(threads, thread_name_prefix="dsort")
    done, result = threading.Event(), []

    def schedule():
        try:
            with _Bars():
                result.append((True, get(dsk, keys, num_workers=threads, pool=pool)))
        except BaseException as e:
            result.append((False, e))
        finally:
            done.set()

    # dask's scheduler loop runs in a thread of its own and the caller's only waits for it: a
    # signal's exception (SIGTERM, Ctrl-C) raised in the caller's thread inside that loop's queue
    # calls could leave the queue's lock held, and every later put into it (the pool threads'
    # results, the cancels below) would wait forever (a `dsort sort` sent SIGTERM hung so)
    threading.Thread(target=schedule, name="dsort-scheduler", daemon=True).start()
    try:
        while not done.wait(0.5):
            pass
        ok, value = result[0]
        if not ok:
            raise value
        return value
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
        if not (result and result[0][0]):  # failed or interrupted: tasks may still be running
            _let_running_tasks_end(pool)


RUNNING_TASKS_SECONDS = 30.0  # how long a failed compute waits for its running tasks at most


def _let_running_tasks_end(pool) -> None:
    """Wait, up to :data:`RUNNING_TASKS_SECONDS`, for the tasks ``pool`` is running (none is
    started any longer): the caller removes the job's runs and staged output next, and a task
    still running would make them again (a run's file, a merge's write into the output), left
    behind after an interrupted `dsort sort`. In a thread of its own, joined with a timeout, so
    a signal still reaches the caller and a stuck task cannot hang it."""
    waiter = threading.Thread(target=pool.shutdown, kwargs={"wait": True}, daemon=True)
    waiter.start()
    waiter.join(RUNNING_TASKS_SECONDS)


def compute_client(client, dsk, keys, progress: bool):
    from distributed import wait

    from .progress import progress_bars

    futures = client.get(dsk, keys, sync=False)
    flat = [f for group in futures for f in group]
    lost = watch_workers(client, flat)
    try:
        if progress:
            progress_bars(flat, client)
        wait(flat)
        if lost:
            raise JobFailed(lost[0])
        return client.gather(futures)
    except BaseException as e:
        client.cancel(flat)
        if lost and not isinstance(e, (KeyboardInterrupt, SystemExit)):
            raise JobFailed(lost[0]) from None
        raise
    finally:
        lost.append(None)  # ends the watch


def watch_workers(client, futures) -> list:
    """Watch the cluster while ``futures`` run: when it has had no workers for
    ``dsort.no-workers-timeout`` seconds (all lost, say, with no nanny to restart them), cancel the
    futures (so nothing waits forever) and put the reason in the returned list."""
    from .collections.remote import scheduler_identity

    limit = config.seconds("no-workers-timeout")
    state: list = []

    def watch():
        since = None
        while not state:
            time.sleep(min(1.0, limit / 4))
            try:
                workers = len(scheduler_identity(client)["workers"])
            except Exception:  # the client is closing: the job is over
                return
            since = None if workers else since or time.monotonic()
            if since is not None and time.monotonic() - since >= limit and not state:
                state.append(
                    f"the cluster at {client.scheduler.address} has had no workers for {limit:.0f} "
                    "s (lost, with no nanny to restart them?)"
                )
                client.cancel(futures)
                return

    threading.Thread(target=watch, name="dsort-watch-workers", daemon=True).start()
    return state
