"""dsort.collections.graph: the in-memory sort's task graph, built and run on dask's synchronous scheduler (no
collection around it), against NumPy's stable sort of the whole."""

import dask
import dask.array as da
import numpy as np
import pandas as pd
import pytest
from dask.utils import key_split

from dsort.collections import graph, tasks


def _run(outputs, nchunks):
    """The output chunks of each ``(graph, name)`` of :func:`graph.sort_graph`, computed."""
    got = []
    for g, name in outputs:
        dsk = dict(g)
        keys = [next(k for k in dsk if isinstance(k, tuple) and k[0] == name and k[1] == i) for i in range(nchunks)]
        got.append(dask.get(dsk, keys))
    return got


def _order(keys, descending, na_position):
    return pd.Series(keys).sort_values(ascending=not descending, kind="stable", na_position=na_position).index.to_numpy()


@pytest.mark.parametrize("na_position", ["last", "first"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("strategy", ["multiway", "tree"])
@pytest.mark.parametrize("chunks", [(1,), (5, 0, 7), (4, 4, 4, 4, 3), (40,)])
def test_the_graph_sorts_stably_into_the_input_chunks(rng, chunks, strategy, descending, na_position):
    n = sum(chunks)
    keys = rng.integers(-3, 3, n).astype(np.float64)
    keys[rng.random(n) < 0.2] = np.nan
    x = da.from_array(keys, chunks=(chunks,))
    k_out, p_out = _run(graph.sort_graph(x, positions=True, descending=descending, na_position=na_position, strategy=strategy), len(chunks))
    assert [len(c) for c in k_out] == list(chunks)  # the input's chunk sizes, exactly
    order = _order(keys, descending, na_position)
    np.testing.assert_array_equal(np.concatenate(p_out), order)
    np.testing.assert_array_equal(np.concatenate(k_out), keys[order])


def test_values_ride_along_and_each_phase_is_named(rng):
    keys = rng.integers(0, 4, 30)
    values = rng.integers(0, 256, (30, 3), dtype=np.uint8)
    x, v = da.from_array(keys, chunks=7), da.from_array(values, chunks=(7, 3))
    outputs = graph.sort_graph(x, v, strategy="tree")
    k_out, v_out = _run(outputs, len(x.chunks[0]))
    order = np.argsort(keys, kind="stable")
    np.testing.assert_array_equal(np.concatenate(v_out), values[order])
    names = {key_split(k) for g, _ in outputs for k in dict(g) if isinstance(k, tuple) and str(k[0]).startswith("dsort-")}
    keys_only = {key_split(k) for k in dict(outputs[0][0]) if isinstance(k, tuple)}
    assert tasks.SORTED_VALUES not in keys_only  # each output's graph holds what its own chunks need
    assert names == {
        tasks.SORT,
        tasks.SAMPLE,
        tasks.BOUNDS,
        tasks.WINDOW,
        tasks.SPLITTERS,
        tasks.SLICE,
        tasks.MERGE,
        tasks.SORTED_KEYS,
        tasks.SORTED_VALUES,
    }


def test_one_chunk_needs_no_merge(rng):
    x = da.from_array(rng.integers(0, 9, 10), chunks=10)
    ((g, name),) = graph.sort_graph(x)
    phases = {key_split(k) for k in dict(g) if str(k[0]).startswith("dsort-")}
    assert phases == {tasks.SORT, tasks.SORTED_KEYS}


def test_options_are_checked_once_with_the_choices():
    x = da.from_array(np.arange(3), chunks=2)
    for kwargs, match in [
        (dict(strategy="bogus"), r"strategy must be one of \('auto'"),
        (dict(device="cpu"), "device must be None .* or 'gpu'"),
        (dict(na_position="middle"), "na_position must be 'last' or 'first'"),
    ]:
        with pytest.raises(ValueError, match=match):
            graph.sort_graph(x, **kwargs)
    graph.check_options("auto", None, "first")
    graph.check_options("external", "gpu", "last")


def test_a_run_knows_where_its_parts_start():
    run = graph._Run(parts=["a", "b", "c"], sizes=[3, 0, 5])
    assert run.offsets == [0, 3, 3] and run.size == 8
    assert all(type(o) is int for o in run.offsets)
