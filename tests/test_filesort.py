"""The external file sort (:func:`dsort.service.sort_files`) on every engine and run tier, against
NumPy's and pandas' stable sorts: records and ``.npy``, sizes around the block and range sizes,
empty files among several, runs kept on the GPU, in host memory and on disk."""

import os

import numpy as np
import pandas as pd
import pytest

from dsort import gen
from dsort.service import LimitError, sort_files

from .conftest import HAS_GPU

ENGINES = [pytest.param("cpu", id="cpu"),
           pytest.param("gpu", id="gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")])]
# (memory_limit, device_memory_limit): where the runs go
TIERS = {"memory": ("auto", None), "host": ("auto", "1B"), "disk": ("2kB", "1B")}


def _sort(src, out, engine, tier, chunk, **kw):
    mem, devmem = TIERS[tier]
    r = sort_files(src, out, cpu=engine == "cpu", memory_limit=mem, device_memory_limit=devmem if engine == "gpu" else None,
                   chunk_size=chunk, progress=False, stream=open(os.devnull, "w"), **kw)
    want = {"memory": "device" if engine == "gpu" else "host", "host": "host", "disk": "disk"}[tier]
    if r.bytes > 1000:  # more than the 1 kB that the small limits leave for runs in memory
        assert want in r.runs and (tier == "disk" or set(r.runs) == {want}), r.runs
    return r


def records_reference(data, key_size=10, descending=False):
    keys = pd.Series(list(map(bytes, data[:, :key_size])))
    return data[keys.sort_values(ascending=not descending, kind="stable").index.to_numpy()]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("tier", list(TIERS))
@pytest.mark.parametrize("n,chunk", [(0, 10_000), (1, 10_000), (99, 10_000), (100, 10_000), (101, 10_000), (5_003, 40_000), (20_000, 1_000_000)])
def test_records_every_tier(tmp_path, engine, tier, n, chunk, rng):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(n, src, seed=int(rng.integers(1 << 30)), skew=bool(n % 2))
    r = _sort(src, out, engine, tier, chunk)
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), records_reference(data))
    assert r.records == n and r.input_summary.checksum == r.output_summary.checksum
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "out.bin"]  # no runs left


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("record_size,key_size", [(100, 10), (20, 20), (24, 3), (40, 17)])
@pytest.mark.parametrize("descending", [False, True])
def test_records_shapes_and_directions(tmp_path, engine, record_size, key_size, descending, rng):
    """Keys that are the whole record, short keys with many ties, keys wider than 16 bytes;
    several files (one empty) as one input; ties keep their input order in both directions."""
    d = tmp_path / "in"
    d.mkdir()
    parts = []
    for i, n in enumerate([3000, 0, 1777]):
        rows = rng.integers(0, 4, (n, record_size), dtype=np.uint8)  # few distinct bytes: many equal keys
        rows[:, key_size:] = rng.integers(0, 256, (n, record_size - key_size), dtype=np.uint8)
        rows.tofile(d / f"p{i}.bin")
        parts.append(rows)
    out = tmp_path / "out.bin"
    _sort(d, out, engine, "memory", 8000, record_size=record_size, key_size=key_size, descending=descending)
    got = np.fromfile(out, np.uint8).reshape(-1, record_size)
    np.testing.assert_array_equal(got, records_reference(np.concatenate(parts), key_size, descending))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("tier", list(TIERS))
@pytest.mark.parametrize("dtype", ["int64", "float64", "float32", "uint8", "int16", "bool", "uint64"])
@pytest.mark.parametrize("descending", [False, True])
def test_npy_every_dtype_and_tier(tmp_path, engine, tier, dtype, descending, rng):
    n = 7001
    if dtype == "bool":
        x = rng.random(n) < 0.5
    elif dtype.startswith("float"):
        x = rng.choice([-np.inf, -1.5, -0.0, 0.0, 2.5, np.inf, np.nan], n).astype(dtype)
        x[::13] = rng.standard_normal(len(x[::13]))
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
        x[::3] = x[0]  # ties
    src, out = tmp_path / "x.npy", tmp_path / "y.npy"
    np.save(src, x)
    _sort(src, out, engine, tier, 3000 * x.itemsize, descending=descending)
    want = pd.Series(x).sort_values(ascending=not descending, kind="stable", na_position="last").to_numpy()
    y = np.load(out)
    assert y.dtype == x.dtype
    u = f"u{x.itemsize}" if dtype != "bool" else "u1"
    np.testing.assert_array_equal(y.view(u), want.astype(x.dtype).view(u))  # -0.0 and NaN bits kept where they were


def test_limits_are_checked_before_any_work(tmp_path):
    src = tmp_path / "in.bin"
    gen.records(100, src)
    with pytest.raises(LimitError, match="smallest workable total"):
        sort_files(src, tmp_path / "o", cpu=True, memory_limit="100kB", progress=False)
    for bad in (dict(n_workers=0), dict(threads_per_worker=0), dict(memory_limit="banana"), dict(chunk_size=0)):
        with pytest.raises(LimitError):
            sort_files(src, tmp_path / "o", cpu=True, progress=False, **bad)
    assert os.listdir(tmp_path) == ["in.bin"]


def test_a_failing_merge_leaves_no_output_and_no_runs(tmp_path, monkeypatch):
    from dsort import filesort

    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(filesort, "_write_at", broken)
    src = tmp_path / "in.bin"
    gen.records(50_000, src)
    with pytest.raises(OSError, match="No space"):
        sort_files(src, tmp_path / "out.bin", cpu=True, memory_limit="4MB", chunk_size=200_000, progress=False)
    assert os.listdir(tmp_path) == ["in.bin"]


def test_a_full_disk_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from dsort import filesort
    from dsort.cli import main

    def full(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(filesort, "_write_at", full)
    src = tmp_path / "in.bin"
    gen.records(5000, src)
    assert main(["sort", str(src), str(tmp_path / "out.bin"), "--cpu"]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert os.listdir(tmp_path) == ["in.bin"]


def test_a_full_local_directory_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    """Runs that do not fit in memory go to --local-directory; when that disk is full the sort
    stops at once with one line (it used to stall), leaving neither output nor runs."""
    from dsort import runs
    from dsort.cli import main

    written = []

    def full(path, rows):
        written.append(path)
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(runs, "write_file", full)
    src, spill = tmp_path / "in.bin", tmp_path / "spill"
    spill.mkdir()
    gen.records(100_000, src)
    assert main(["sort", str(src), str(tmp_path / "out.bin"), "--cpu", "--memory-limit", "8MB", "--chunk-size", "1MB",
                 "--local-directory", str(spill)]) == 2
    err = capsys.readouterr().err
    assert written, "the runs should have gone to disk"
    assert "No space left on device" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "spill"] and os.listdir(spill) == []


def test_a_worker_killed_mid_job_costs_only_a_recomputation(tmp_path):
    """On a cluster with nannies, a worker killed while the runs are being written: its tasks run
    again elsewhere (runs are files every worker can read, rewritten whole), and the output is
    the same stable sort, with no runs left."""
    import signal
    import threading
    import time

    from distributed import Client, LocalCluster

    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(300_000, src, skew=True)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster, Client(cluster) as client:
        pids = list(client.run(os.getpid).values())
        done = {}
        t = threading.Thread(target=lambda: done.update(r=sort_files(src, out, client=client, chunk_size=30_000, progress=False,
                                                                        stream=open(os.devnull, "w"))))
        t.start()
        deadline = time.time() + 60
        while time.time() < deadline and t.is_alive():
            runs = [p for p in tmp_path.glob(".out.bin.dsort-runs-*/run-*")]
            if len(runs) >= 20:
                os.kill(pids[0], signal.SIGKILL)
                break
            time.sleep(0.01)
        killed = t.is_alive()
        t.join(120)
    assert killed, "the job ended before the worker could be killed: make it longer"
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), records_reference(data))
    assert done["r"].input_summary.checksum == done["r"].output_summary.checksum
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "out.bin"]
