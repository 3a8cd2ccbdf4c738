"""Progress bars and per-phase times of a running sort.

Tasks are named for their phase (:mod:`dsort.collections.tasks`); dask's ``key_split`` of a task key
gives that name back, and :data:`SHOWN_AS` says under which bar it is shown. A task of no dsort
phase (an input array's own tasks, say) is shown under its own ``key_split`` name.

Two kinds of bars, one line each: :class:`Progress` for the embedded (threaded) file sort, fed by
its scheduler's callbacks, and :func:`progress_bars` for a cluster, driven by the scheduler's
MultiProgress plugin. :func:`run` computes collections on a :class:`dsort.cluster.Session` with
the bars and records :func:`phase_times`.
"""

from __future__ import annotations

import sys
import threading
import time

from dask.utils import format_time, key_split

from .collections import tasks as T

# task-name prefix (a phase of :mod:`dsort.collections.tasks`) -> the bar it is shown under
SHOWN_AS = {
    T.READ: "read",
    T.WIRE: "read",  # an input partition with object columns, wrapped where it was read
    T.CHECKSUM_INPUT: "checksum",
    T.RUN: "run",
    T.REMADE: "merge",  # a lost run made again for a merge: part of its time
    T.CUTS: "cuts",
    T.ANCHOR: "run",  # a run's handle again, beside which the merges go
    T.GROUP_CUTS: "first pass",
    T.GROUP_MERGE: "first pass",
    T.CHAIN: "first pass",
    T.SORT: "sort",
    T.INFO: "sort",
    T.PLAN: "sort",
    T.SAMPLE: "sort",
    T.BOUNDS: "sort",
    T.WINDOW: "sort",
    T.SPLITTERS: "sort",
    T.SLICE: "sort",
    T.SLICED: "sort",
    T.SORTED_KEYS: "sort",
    T.SORTED_VALUES: "sort",
    T.MERGE: "merge",
    T.SLICES: "merge",
    T.SIZES: "sort",
    T.SORTED: "merge",
    T.WRITE: "write",
    T.CHECK: "check",
}
# of the bars
ORDER = ["read", "checksum", "run", "first pass", "cuts", "sort", "merge", "write", "check"]


def make_phase_of():
    """``key -> bar name``: :data:`SHOWN_AS` of the key's ``key_split``, else that name itself.
    Built as a closure over a copy of the table, so cloudpickle ships it by value to a scheduler
    that may not have dsort installed (the cluster's bars group keys on the scheduler); it
    refers to nothing of dsort's, only to ``dask.utils.key_split``."""
    table = dict(SHOWN_AS)
    split = key_split

    def phase_of(key):
        name = split(key)
        return table.get(name, name)

    return phase_of


def _bar_order(phase: str):
    """Sort key of the bars: dsort's phases in :data:`ORDER`, then any other by name."""
    return (ORDER.index(phase), "") if phase in ORDER else (len(ORDER), phase)


def _bar(phase: str, frac: float, width: int) -> str:
    fill = int(width * frac)
    return f"{phase} [{'#' * fill}{'.' * (width - fill)}] {int(100 * frac):3d}%"


class Progress:
    """One line of per-phase bars, redrawn on a terminal, printed once at the end elsewhere: the
    embedded file sort's, fed by :meth:`started` and :meth:`finished` per task."""

    def __init__(self, totals: dict, stream=None, width: int = 12):
        self.totals, self.done = dict(totals), {p: 0 for p in totals}
        self.stream, self.width = stream or sys.stdout, width
        self.t0 = time.perf_counter()
        self._stop = threading.Event()
        self._thread = None
        self.spans: dict = {}  # phase -> [first start, last end]

    def started(self, phase: str) -> None:
        now = time.perf_counter()
        span = self.spans.setdefault(phase, [now, now])
        span[0] = min(span[0], now)

    def finished(self, phase: str) -> None:
        now = time.perf_counter()
        self.done[phase] = self.done.get(phase, 0) + 1
        span = self.spans.setdefault(phase, [now, now])
        span[1] = max(span[1], now)

    def line(self) -> str:
        parts = [
            _bar(p, self.done.get(p, 0) / total if total else 1.0, self.width)
            for p, total in self.totals.items()
        ]
        return " ".join(parts) + f"  {time.perf_counter() - self.t0:.1f}s"

    def __enter__(self):
        if self.stream.isatty():

            def draw():
                while not self._stop.wait(0.25):
                    self.stream.write("\r\33[2K" + self.line())
                    self.stream.flush()

            self._thread = threading.Thread(target=draw, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if exc[0] is None:
            self.stream.write(("\r\33[2K" if self.stream.isatty() else "") + self.line() + "\n")
            self.stream.flush()
        elif self.stream.isatty():
            self.stream.write("\n")
        return False


def progress_bars(futures, client, width: int = 12, stream=None) -> None:
    """One progress bar per phase, on one line, until ``futures`` finish; driven by the scheduler's
    MultiProgress plugin (dask's own progress machinery, grouped by phase). On a terminal the line
    is redrawn; elsewhere only the final state is printed. Never fails the computation."""
    from distributed.diagnostics.progressbar import MultiProgressBar
    from distributed.utils import LoopRunner

    stream = stream or sys.stdout

    class Bars(MultiProgressBar):
        last = ""

        def _draw_bar(self, remaining, all, **kwargs):
            parts = []
            for phase in sorted(all, key=_bar_order):
                total = all[phase]
                parts.append(
                    _bar(phase, 1 - remaining.get(phase, 0) / total if total else 1.0, width)
                )
            self.last = " ".join(parts) + f"  {format_time(self.elapsed)}"
            if stream.isatty():
                stream.write("\r\33[2K" + self.last)
                stream.flush()

        def _draw_stop(self, **kwargs):
            if self.last:
                stream.write(("\r\33[2K" if stream.isatty() else "") + self.last + "\n")
                stream.flush()

    try:
        bars = Bars(
            futures,
            client.scheduler.address,
            group_by=make_phase_of(),
            complete=True,
            interval="200ms",
        )
        LoopRunner(loop=client.loop).run_sync(bars.listen)
    except Exception as e:
        print(f"(progress bars unavailable: {e!r})", file=sys.stderr)


def run(session, *collections, progress: bool = True):
    """Compute ``collections`` on ``session``'s cluster (a :class:`dsort.cluster.Session`) with
    phase bars; return the results and record per-phase times (task seconds and wall-clock span)
    in ``session.phases``."""
    from distributed import get_task_stream, wait

    client = session.client
    t0 = time.perf_counter()
    with get_task_stream(client=client) as ts:
        futures = client.compute(list(collections))
        try:
            if progress:
                progress_bars(futures, client)
            wait(futures)
            results = client.gather(futures)
        except BaseException:
            # a failed or interrupted run stops its tasks, also on a running (remote) cluster
            client.cancel(futures)
            raise
    session.phases = phase_times(ts.data)
    session.phases["_wall"] = time.perf_counter() - t0
    return results


def phase_times(records) -> dict:
    """``{phase: (task seconds, span seconds)}`` from task-stream records: the span runs from the
    phase's first task start to its last task end (phases overlap: the graph streams)."""
    phase_of = make_phase_of()
    acc: dict = {}
    for r in records:
        for ss in r.get("startstops", ()):
            if ss.get("action") != "compute":
                continue
            p = phase_of(r["key"])
            busy, lo, hi = acc.get(p, (0.0, float("inf"), float("-inf")))
            acc[p] = (busy + ss["stop"] - ss["start"], min(lo, ss["start"]), max(hi, ss["stop"]))
    return {p: (busy, hi - lo) for p, (busy, lo, hi) in acc.items()}
