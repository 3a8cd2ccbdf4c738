"""``strategy="external"`` for dask arrays: runs outside dask's memory, bounded memory, nothing left.

The order itself is checked against the reference for every dtype, case and chunking by
``tests/test_array.py`` (it runs each test for every strategy); here are the external sort's own
promises.
"""

import os
import subprocess
import sys
import tracemalloc

import dask
import dask.array as da
import numpy as np
import pytest

import dsort
from dsort import array as A
from dsort import runs as R


def _graph_keys(result, prefix):
    return [k for k in dict(result.__dask_graph__()) if isinstance(k, tuple) and str(k[0]).startswith(prefix)]


def test_runs_on_disk_are_removed_when_the_sort_is_done(tmp_path, rng):
    a = rng.integers(-1000, 1000, 20_000)
    x = da.from_array(a, chunks=3_000)
    s = dsort.sort(x, strategy="external", memory_limit=0, local_directory=tmp_path)
    runs = dask.get(dict(s.__dask_graph__()), sorted(_graph_keys(s, "dsort-run-")))
    assert {r.tier for r in runs} == {"disk"} and all(os.path.isfile(r.path) for r in runs)
    R.drop(runs[0].job)  # those runs were only looked at: start afresh
    got = s.compute(scheduler="threads")
    assert np.array_equal(got, np.sort(a, kind="stable"))
    assert os.listdir(tmp_path) == []


def test_runs_in_memory_within_the_budget(tmp_path, rng):
    a = rng.random(20_000)
    x = da.from_array(a, chunks=5_000)
    budget = 2 * 5_000 * 8  # two runs' worth: the other two go to disk
    s = dsort.sort(x, strategy="external", memory_limit=budget, local_directory=tmp_path)
    runs = dask.get(dict(s.__dask_graph__()), sorted(_graph_keys(s, "dsort-run-")))
    assert sorted(r.tier for r in runs) == ["disk", "disk", "host", "host"]
    R.drop(runs[0].job)
    assert np.array_equal(s.compute(scheduler="sync"), np.sort(a))
    assert os.listdir(tmp_path) == []


def test_stores_of_dead_processes_are_removed_and_live_ones_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    left = tmp_path / f"dsort-runs-{dead.pid}-0123456789abcdef"
    live = tmp_path / f"dsort-runs-{os.getppid()}-0123456789abcdef"
    other = tmp_path / "dsort-runs-notapid-x"
    for d in (left, live, other):
        d.mkdir()
        (d / "run-000000.bin").write_bytes(b"x" * 10)
    dsort.sort(da.arange(10, chunks=5), strategy="external", local_directory=tmp_path)
    assert not left.exists() and live.exists() and other.exists()


def _peak_of_store(n, chunk, tmp_path):
    """Peak traced memory of ``da.store`` of the external sort of ``n`` random int64 (never
    held whole anywhere: generated per chunk, written to a memory-mapped .npy)."""
    x = da.random.default_rng(1).integers(0, 1 << 62, n, chunks=chunk)
    out = np.lib.format.open_memmap(tmp_path / f"out-{n}.npy", mode="w+", dtype=np.int64, shape=(n,))
    tracemalloc.start()
    try:
        with dask.config.set(scheduler="threads", num_workers=2):
            da.store(dsort.sort(x, strategy="external", memory_limit=0, local_directory=tmp_path), out, lock=False)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert np.all(out[1:] >= out[:-1])
    assert np.array_equal(out[:: n // 97], np.sort(x.compute())[:: n // 97])
    return peak


def test_store_of_a_large_sort_runs_in_bounded_memory(tmp_path):
    """Memory follows the chunk size, not the array's: three times the data, about the same peak
    (what the threads happen to hold at once varies), well under the data's size (the in-memory
    graph's peak is above it)."""
    chunk = 250_000
    small = _peak_of_store(16 * chunk, chunk, tmp_path)
    large = _peak_of_store(48 * chunk, chunk, tmp_path)
    assert large < 48 * chunk * 8 / 3
    assert large < 2.2 * small
    assert sorted(os.listdir(tmp_path)) == ["out-12000000.npy", "out-4000000.npy"]


def test_auto_chooses_external_when_the_array_does_not_fit(monkeypatch):
    x = da.arange(100_000, chunks=10_000)
    monkeypatch.setattr(A, "_where", lambda: (True, 1 << 40))
    assert not _graph_keys(dsort.sort(x), "dsort-run-")
    monkeypatch.setattr(A, "_where", lambda: (True, 4 * x.nbytes - 1))
    s = dsort.sort(x, descending=True)
    assert _graph_keys(s, "dsort-run-")
    assert np.array_equal(s.compute(), np.arange(100_000)[::-1])


def test_on_worker_processes_runs_are_files_all_workers_read(tmp_path, rng):
    distributed = pytest.importorskip("distributed")
    a = rng.integers(0, 50, 30_000)  # many ties: the stable order shows
    x = da.from_array(a, chunks=4_000)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster):
            order = dsort.argsort(x, strategy="external", memory_limit="1GB", local_directory=tmp_path)
            assert order.__dask_graph__()  # built on a multi-process cluster: no memory tier
            got = order.compute()
    assert np.array_equal(got, np.argsort(a, kind="stable"))
    assert os.listdir(tmp_path) == []


def test_bad_memory_limit_is_refused_at_call_time():
    with pytest.raises(ValueError, match="memory_limit"):
        dsort.sort(da.arange(10, chunks=5), strategy="external", memory_limit="banana")
