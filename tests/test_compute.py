"""Running a sort's graph in this process (:func:`dsort.compute.compute_threads`): results and
errors as dask's threaded scheduler gives them, and a caller interrupted by a signal at any moment
gets the signal's exception at once, the scheduler's queue left usable (a `dsort sort` sent SIGTERM
once hung there, its queue's lock held by the interrupted caller)."""

import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from dsort.compute import compute_threads


def _inc(x):
    return x + 1


def _fail(x):
    raise ValueError(f"task failed at {x}")


def _chain(n):
    dsk = {("a", 0): 0}
    for i in range(1, n):
        dsk[("a", i)] = (_inc, ("a", i - 1))
    return dsk


def test_results_and_errors_as_dask_gives_them():
    dsk = _chain(500)
    assert compute_threads(dsk, [[("a", 499)], [("a", 7), ("a", 0)]], 2, None) == ((499,), (7, 0))
    dsk[("b", 0)] = (_fail, ("a", 3))
    with pytest.raises(ValueError, match="task failed at 3"):
        compute_threads(dsk, [("b", 0)], 2, None)


def _slow_mark(started, path, x):
    started.set()
    time.sleep(0.5)
    Path(path).write_text("done")
    return x


def _fail_once_started(started, x):
    assert started.wait(10), "the slow task never started"
    raise ValueError(f"task failed at {x}")


def test_a_failed_compute_returns_once_its_running_tasks_end(tmp_path):
    """A task fails while another runs: the caller gets the error only once the running task has
    ended, so that its cleanup (the job's runs, the staged output) is not undone by that task
    writing afterwards; tasks not yet started never start."""
    mark, never = tmp_path / "mark", tmp_path / "never"
    started, unused = threading.Event(), threading.Event()
    dsk = {
        ("s", 0): (_slow_mark, started, str(mark), 1),
        ("f", 0): (_fail_once_started, started, 0),
        ("n", 0): (_slow_mark, unused, str(never), ("s", 0)),
    }
    with pytest.raises(ValueError, match="task failed at 0"):
        compute_threads(dsk, [[("n", 0)], [("f", 0)]], 2, None)
    assert mark.exists(), "returned while a task was still running"
    time.sleep(0.7)
    assert not never.exists(), "a task started after the failure"


def test_the_scheduler_loop_runs_apart_from_the_caller(monkeypatch):
    """dask's loop (its queue calls) never runs in the caller's thread, where a signal's exception
    would land."""
    import dask.local

    seen = []
    real = dask.local.queue_get
    monkeypatch.setattr(dask.local, "queue_get", lambda q: seen.append(threading.current_thread()) or real(q))
    assert compute_threads(_chain(50), [("a", 49)], 2, None) == (49,)
    assert seen and threading.current_thread() not in seen


STRESS = """
import random, signal, sys
sys.path.insert(0, {root!r})
from dsort.compute import compute_threads

class Stop(Exception):
    pass

def stop(signum, frame):
    raise Stop

def inc(x):
    return x + 1

signal.signal(signal.SIGALRM, stop)
dsk = {{("a", 0): 0}}
for i in range(1, 2000):
    dsk[("a", i)] = (inc, ("a", i - 1))
random.seed({seed})
stopped = 0
for trial in range({trials}):
    signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0005, 0.03))
    try:
        compute_threads(dsk, [("a", 1999)], 2, None)
    except Stop:
        stopped += 1
    signal.setitimer(signal.ITIMER_REAL, 0)
print(stopped)
"""


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers here")
def test_a_caller_interrupted_at_any_moment_never_hangs():
    """A hundred computes each interrupted by a signal at a random moment (its handler raises, as
    dsort's SIGTERM handler does): each raises the handler's exception, and all end in seconds."""
    root = str(Path(__file__).resolve().parents[1])
    code = STRESS.format(root=root, seed=random.randrange(1 << 30), trials=100)
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.split()[-1]) > 0, done.stdout  # the signals did land inside the computes
    assert time.perf_counter() - t < 120
