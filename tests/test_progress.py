"""dsort.progress: which bar a task is shown under, the per-phase times, the embedded bars."""

import io
import subprocess
import sys

import pytest
from dask.base import tokenize

from dsort import progress


from dsort.collections import tasks

TOKEN = tokenize("a graph")


@pytest.mark.parametrize(
    "key,bar",
    [
        ((tasks.name(tasks.READ, TOKEN), 3), "read"),
        ((tasks.name(tasks.INFO, TOKEN), 2), "sort"),
        (tasks.name(tasks.PLAN, TOKEN), "sort"),
        ((tasks.name(tasks.CHECKSUM_INPUT, TOKEN), 0), "checksum"),
        ((tasks.name(tasks.RUN, "0123456789abcdef0123456789abcdef"), 7), "run"),
        (tasks.name(tasks.CUTS, TOKEN), "cuts"),
        ((tasks.name(tasks.SPLITTERS, TOKEN), 0, 1), "sort"),
        ((tasks.name(tasks.SORTED_VALUES, TOKEN), 2, 0), "sort"),
        ((tasks.name(tasks.MERGE, TOKEN), 1, 0, 4), "merge"),
        ((tasks.name(tasks.SORTED, TOKEN), 4), "merge"),
        ((tasks.name(tasks.WRITE, TOKEN), 0), "write"),
        ((tasks.name(tasks.CHECK, TOKEN), 9), "check"),
        (tasks.name(tasks.CHECK, TOKEN).encode(), "check"),
        # not a dsort phase: shown as itself (dask's key_split), not counted as the sort's
        (("array-" + TOKEN, 0), "array"),
        (("random_sample-" + TOKEN, 0, 0), "random_sample"),
        ("dsort-someday-" + TOKEN, "dsort-someday"),
    ],
)
def test_phase_of(key, bar):
    assert progress.make_phase_of()(key) == bar


def test_every_phase_has_a_bar_in_order():
    phases = {v for k, v in vars(tasks).items() if k.isupper() and isinstance(v, str)}
    assert set(progress.SHOWN_AS) == phases
    assert set(progress.SHOWN_AS.values()) <= set(progress.ORDER)
    assert sorted(["zeta", "merge", "array", "read"], key=progress._bar_order) == ["read", "merge", "array", "zeta"]


def test_phase_of_ships_to_a_scheduler_without_dsort():
    """The cluster's bars group keys on the scheduler, which need not have dsort installed."""
    import cloudpickle

    blob = cloudpickle.dumps(progress.make_phase_of())
    code = (
        "import sys, pickle, importlib.abc\n"
        "class NoDsort(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name.split('.')[0] == 'dsort': raise ImportError('no dsort here')\n"
        "sys.meta_path.insert(0, NoDsort())\n"
        "f = pickle.loads(sys.stdin.buffer.read())\n"
        f"print(f(('dsort-merge-{TOKEN}', 0)), f(('x-{TOKEN}', 0)), 'dsort' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().split() == ["merge", "x", "False"]


def test_phase_times_sum_busy_seconds_and_span_each_phase():
    def rec(key, *spans, action="compute"):
        return {"key": key, "startstops": [{"action": action, "start": a, "stop": b} for a, b in spans]}

    records = [
        rec((f"dsort-run-{TOKEN}", 0), (10.0, 12.0)),
        rec((f"dsort-run-{TOKEN}", 1), (11.0, 15.0)),
        rec((f"dsort-run-{TOKEN}", 1), (9.0, 30.0), action="transfer"),  # not compute: not counted
        rec(f"dsort-cuts-{TOKEN}", (15.0, 15.5)),
        rec((f"array-{TOKEN}", 0), (1.0, 2.0), (3.0, 3.5)),
        {"key": (f"dsort-merge-{TOKEN}", 0)},  # no startstops
    ]
    got = progress.phase_times(records)
    assert got == {"run": (6.0, 5.0), "cuts": (0.5, 0.5), "array": (1.5, 2.5)}
    assert progress.phase_times([]) == {}


def test_the_embedded_bars_count_tasks_and_time_phases():
    out = io.StringIO()  # not a terminal: one line at the end
    with progress.Progress({"run": 2, "cuts": 1, "merge": 0}, out, width=4) as bar:
        for phase in ("run", "run", "cuts"):
            bar.started(phase)
            bar.finished(phase)
        assert bar.line().startswith("run [####] 100% cuts [####] 100% merge [####] 100%")
    text = out.getvalue()
    assert text.count("\n") == 1 and text.startswith("run [####] 100%")
    assert set(bar.spans) == {"run", "cuts"} and all(a <= b for a, b in bar.spans.values())
    half = progress.Progress({"run": 4}, io.StringIO(), width=4)
    half.finished("run")
    assert half.line().startswith("run [#...]  25%")
    failed = io.StringIO()
    with pytest.raises(KeyError):
        with progress.Progress({"run": 1}, failed):
            raise KeyError("boom")
    assert failed.getvalue() == ""  # a failed run leaves no final bar line
