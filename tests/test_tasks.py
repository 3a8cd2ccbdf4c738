"""dsort.collections.tasks: the one way dsort builds tasks, and its phase names."""

import dask
import numpy as np
from dask.utils import key_split

from dsort.collections import tasks


def test_references_resolve_at_any_depth_and_plain_data_stays_data():
    dsk = {
        "a": tasks.task("a", int, "3"),
        "b": tasks.task("b", lambda x, y: x * y, tasks.ref("a"), 4),
        "c": tasks.task(
            "c",
            lambda xs, d, t, arr: (xs, d, t, arr),
            [[tasks.ref("a")], [tasks.ref("b"), 5]],
            {"k": tasks.ref("b")},
            (1, [2]),
            np.arange(2),
        ),
    }
    xs, d, t, arr = dask.get(dsk, "c")
    assert xs == [[3], [12, 5]] and d == {"k": 12} and t == (1, [2])
    np.testing.assert_array_equal(arr, [0, 1])
    assert dsk["c"].dependencies == {"a", "b"} and dsk["a"].dependencies == frozenset()


def test_each_gives_one_named_task_per_row_as_delayed_handles():
    parts = tasks.each(tasks.READ, "tok", lambda i: list(range(i)), [(i,) for i in range(4)])
    sums = tasks.each(tasks.CHECK, "tok2", sum, [(tasks.ref(p.key),) for p in parts], dependencies=parts)
    assert [p.key for p in sums] == [("dsort-check-tok2", i) for i in range(4)]
    assert dask.compute(*sums, scheduler="sync") == (0, 0, 1, 3)
    assert tasks.each(tasks.CHECK, "none", sum, []) == []


def test_phase_names_are_distinct_and_key_split_gives_them_back():
    phases = [v for k, v in vars(tasks).items() if k.isupper() and isinstance(v, str)]
    assert len(phases) == len(set(phases)) and all(p.startswith("dsort-") for p in phases)
    token = dask.base.tokenize("anything")
    for p in phases:
        assert key_split((tasks.name(p, token), 0, 1)) == p
        assert key_split(tasks.name(p, token)) == p


def test_only_this_module_imports_the_private_task_spec():
    from pathlib import Path

    root = Path(tasks.__file__).parent
    users = sorted(str(p.relative_to(root)) for p in root.rglob("*.py") if "_task_spec" in p.read_text() and p.name != "tasks.py")
    assert users == [], users


def test_tasks_beside_runs_spread_over_them_and_drop_their_values():
    """Task t of n goes beside run t * runs // n (every run gets its share, in order); the run is
    a dependency whose value the task drops; without runs it is a plain task."""
    runs = [("run", i) for i in range(4)]
    for n in (1, 3, 4, 8, 9):
        got = [tasks.beside(runs, t, n) for t in range(n)]
        counts = [got.count(r) for r in runs]
        assert got == sorted(got) and max(counts) - min(c for c in counts if c) <= 1 and (n < 4 or min(counts) > 0)
    assert tasks.beside([], 0, 3) is None
    dsk = {r: tasks.task(r, lambda i=i: 10 * i) for i, r in enumerate(runs)}
    dsk["m"] = tasks.task_beside("m", runs[2], lambda a, b: a + b, 1, tasks.ref(runs[1]))
    dsk["p"] = tasks.task_beside("p", None, lambda a: -a, 5)
    assert dsk["m"].dependencies == {runs[2], runs[1]} and not dsk["p"].dependencies
    assert dask.get(dsk, ["m", "p"]) == (11, -5)


def test_anchors_give_each_chosen_run_again_once_under_a_name_of_its_own():
    """The anchors of the runs merges go beside: one task per distinct run (a run no merge goes
    beside gets none), its value the run's, its key the run's numbers under the anchor phase;
    None (no run to go beside) stays None."""
    tok = "0123456789abcdef0123456789abcdef"
    runs = [(f"dsort-run-{tok}", i) for i in range(4)]
    dsk = {r: tasks.task(r, lambda i=i: 10 * i) for i, r in enumerate(runs)}
    near = [runs[1], runs[1], runs[3], None]
    got = tasks.anchors(dsk, tok, near)
    assert got == [(f"dsort-anchor-{tok}", 1), (f"dsort-anchor-{tok}", 1), (f"dsort-anchor-{tok}", 3), None]
    added = [k for k in dsk if key_split(k[0]) == "dsort-anchor"]
    assert sorted(added) == [(f"dsort-anchor-{tok}", 1), (f"dsort-anchor-{tok}", 3)]
    assert dsk[got[0]].dependencies == {runs[1]} and dask.get(dsk, got[2]) == 30
