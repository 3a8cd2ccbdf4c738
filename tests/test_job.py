"""dsort.io._job: a format's sort job (its tasks and how to finish it), and tasks made per block
of a partitioned input; each task's result compared with calling the function in Python."""

import dask
import numpy as np
import pandas as pd
import pytest
from dask.base import key_split

from dsort.io._job import SortJob, each, per_block


def test_sort_job_defaults_are_fresh_and_finish_does_nothing(rng):
    n, nbytes = (int(v) for v in rng.integers(0, 10**9, 2))
    a, b = SortJob(n, nbytes), SortJob(records=n, nbytes=nbytes)
    assert (a.records, a.nbytes, a.inputs, a.outputs) == (n, nbytes, [], [])
    a.inputs.append(1)
    a.outputs.append(2)
    assert b.inputs == [] and b.outputs == []  # no list shared between jobs
    assert a.finish([object()]) is None and b.finish([]) is None


def _scale(block, factor, offset, label):
    return (label, [int(v) * factor + offset for v in block])


@pytest.mark.parametrize("parts", [0, 1, 2, 7])
def test_per_block_calls_the_function_on_each_block(rng, parts):
    """Plain arguments reach every task; an ``each`` list gives the i-th item to the i-th block."""
    blocks = [rng.integers(-100, 100, int(rng.integers(0, 20))) for _ in range(parts)]
    delayed = [dask.delayed(b, traverse=False) for b in blocks]
    offsets = [int(v) for v in rng.integers(-(10**6), 10**6, parts)]
    factor = int(rng.integers(2, 9))
    tasks = per_block("dsort-write", _scale, delayed, factor, each(offsets), "label")
    assert len(tasks) == parts
    assert [t.key for t in tasks] == [(tasks[0].key[0], i) for i in range(parts)]
    assert all(key_split(t.key) == "dsort-write" for t in tasks)
    got = dask.compute(*tasks, scheduler="sync")
    assert list(got) == [_scale(b, factor, o, "label") for b, o in zip(blocks, offsets)]


def test_per_block_names_follow_the_arguments(rng):
    blocks = [dask.delayed(rng.integers(0, 9, 5), traverse=False) for _ in range(3)]
    name = per_block("dsort-write", _scale, blocks, 2, each([0, 1, 2]), "x")[0].key[0]
    assert per_block("dsort-write", _scale, blocks, 2, each([0, 1, 2]), "x")[0].key[0] == name
    for other in (
        per_block("dsort-write", _scale, blocks, 3, each([0, 1, 2]), "x"),
        per_block("dsort-write", _scale, blocks, 2, each([0, 1, 3]), "x"),
        per_block("dsort-write", _scale, blocks, 2, each([0, 1, 2]), "y"),
        per_block("dsort-write", _scale, blocks[::-1], 2, each([0, 1, 2]), "x"),
        per_block("dsort-check", _scale, blocks, 2, each([0, 1, 2]), "x"),
    ):
        assert other[0].key[0] != name


def test_per_block_over_dataframe_partitions(rng):
    """The partitions of a dask dataframe (how the Parquet job uses it): each task sees its own."""
    import dask.dataframe as dd

    df = pd.DataFrame({"a": rng.integers(0, 100, int(rng.integers(1, 500)))})
    ddf = dd.from_pandas(df, npartitions=int(rng.integers(1, 6)))
    parts = ddf.to_delayed(optimize_graph=False)
    tasks = per_block("dsort-input-checksums", lambda p, k: (len(p), int(p["a"].sum()) * k), parts, 3)
    got = dask.compute(*tasks, scheduler="sync")
    want = [(len(p), int(p["a"].sum()) * 3) for p in dask.compute(*parts, scheduler="sync")]
    assert list(got) == want and sum(n for n, _ in got) == len(df) and sum(s for _, s in got) == 3 * int(df["a"].sum())


def test_each_is_a_list_of_its_items(rng):
    items = list(rng.integers(0, 9, int(rng.integers(0, 10))))
    e = each(items)
    assert isinstance(e, list) and list(e) == items and e is not items
    assert isinstance(each(np.arange(3)), list) and each(np.arange(3))[2] == 2
