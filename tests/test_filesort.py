"""The external file sort (:func:`dsort.service.sort_files`) on every engine and run tier, against
NumPy's and pandas' stable sorts: records and ``.npy``, sizes around the block and range sizes,
empty files among several, runs kept on the GPU, in host memory and on disk."""

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from dataclasses import replace
from pathlib import Path

from dsort.io import gen
from dsort.service import LimitError, sort_files

from .conftest import HAS_GPU

ENGINES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("gpu", id="gpu", marks=[pytest.mark.gpu, pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")]),
]
# (memory_limit, device_memory_limit): where the runs go
TIERS = {"memory": ("auto", None), "host": ("auto", "1B"), "disk": ("2kB", "1B")}


def _sort(src, out, engine, tier, chunk, **kw):
    mem, devmem = TIERS[tier]
    r = sort_files(
        src,
        out,
        cpu=engine == "cpu",
        memory_limit=mem,
        device_memory_limit=devmem if engine == "gpu" else None,
        chunk_size=chunk,
        progress=False,
        stream=open(os.devnull, "w"),
        **kw,
    )
    want = {"memory": "device" if engine == "gpu" else "host", "host": "host", "disk": "disk"}[tier]
    if r.bytes > 1000:  # more than the 1 kB that the small limits leave for runs in memory
        assert want in r.runs and (tier == "disk" or set(r.runs) == {want}), r.runs
    return r


def records_reference(data, key_size=10, descending=False):
    keys = pd.Series(list(map(bytes, data[:, :key_size])))
    return data[keys.sort_values(ascending=not descending, kind="stable").index.to_numpy()]


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("tier", list(TIERS))
@pytest.mark.parametrize(
    "n,chunk", [(0, 10_000), (1, 10_000), (99, 10_000), (100, 10_000), (101, 10_000), (5_003, 40_000), (20_000, 1_000_000)]
)
def test_records_every_tier(tmp_path, engine, tier, n, chunk, rng):
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(n, src, seed=int(rng.integers(1 << 30)), skew=bool(n % 2))
    r = _sort(src, out, engine, tier, chunk)
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), records_reference(data))
    assert r.records == n and r.input_summary.checksum == r.output_summary.checksum
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "out.bin"]  # no runs left


@pytest.mark.parametrize("ranked_on_gpu", [False, True])
@pytest.mark.parametrize("engine", ENGINES)
def test_cuts_ranked_on_the_host_or_the_gpu(tmp_path, monkeypatch, engine, ranked_on_gpu, rng):
    """The samples of many runs ranked on a GPU (from dsort.core.cuts.GPU_RANKED_SAMPLES on) or on
    the host: the same stable sort."""
    from dsort.core import cuts

    monkeypatch.setattr(cuts, "GPU_RANKED_SAMPLES", 0 if ranked_on_gpu else 1 << 62)
    monkeypatch.setattr(cuts, "GPU_RANKED_SAMPLES_COLD", 0 if ranked_on_gpu else 1 << 62)
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(30_000, src, seed=int(rng.integers(1 << 30)), skew=True)
    _sort(src, out, engine, "memory", 200_000)  # 15 runs
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), records_reference(data))


@pytest.mark.parametrize("trial", range(12))
@pytest.mark.parametrize("engine", ENGINES)
def test_cuts_settled_by_the_merges_are_the_cuts_tasks(tmp_path, rng, trial, engine):
    """The cuts each merge settles from the cuts task's windows (``settle_later``) equal the rows of
    the exact cuts the cuts task finds itself, for every range: runs of many equal keys, empty runs,
    NaN and infinities, both orders and NaN first or last, one range, ranges of one row and empty;
    runs in host memory, or on a GPU (the merge's windows read onto it and joined there)."""
    from types import SimpleNamespace

    from dsort.core import chunk, cuts, filesort, plan
    from dsort.core import runs as R
    from dsort.engine import device as dev

    dtype = ["int64", "float64"][trial % 2]
    descending, na_position = bool(trial & 2), ["last", "first"][trial // 4 % 2]
    sizes = [int(x) for x in rng.choice([0, 1, 7, 64, 300, 1001], int(rng.integers(2, 7)))]
    gpu = 0 if engine == "gpu" else None
    on_gpu = (1 << 30) if gpu == 0 else 0
    store = R.StoreConfig(f"settle-{engine}-{trial}", str(tmp_path / "runs"), 8, host_budget=1 << 30, device_budget=on_gpu)
    every = []  # each run's keys, sorted
    for n in sizes:
        keys = rng.integers(-3, 4, n).astype(dtype) if trial % 3 else rng.integers(-(1 << 40), 1 << 40, n).astype(dtype)
        if dtype == "float64" and n:
            keys[rng.random(n) < 0.1] = rng.choice([np.nan, np.inf, -np.inf])
        every.append(np.asarray(pd.Series(keys).sort_values(ascending=not descending, na_position=na_position, kind="stable")))
    total = sum(sizes)
    outputs = int(rng.integers(1, 9))
    range_rows = plan.balanced(total, outputs)
    targets = plan.interior_targets(range_rows)
    spacing = plan.sample_spacing(sizes, len(targets))
    s = R.store(store)
    try:
        rows = [k.view(np.uint8).reshape(len(k), 8) for k in every]
        rows = [r if gpu is None else chunk.on_gpu(r) for r in rows]
        runs = [s.put(i, r, sample=k[::spacing].copy()) for i, (r, k) in enumerate(zip(rows, every))]
        assert {r.tier for r in runs} == {"host" if gpu is None else "device"}
        lay = R.Layout(8, 8, dtype)
        job = SimpleNamespace(
            range_rows=range_rows, spacing=spacing, layout=lay, store=store, descending=descending, na_position=na_position
        )
        job.gpu, job.recovery = False, lambda gpu: None
        exact, bare = filesort.cut_runs(job, runs)
        windowed, _ = filesort.cut_runs(job, runs, settle_later=True)
        np.testing.assert_array_equal(cuts.range_starts(windowed), cuts.range_starts(exact))
        merged = []
        for t in range(len(range_rows)):
            if isinstance(windowed, cuts.Windowed):  # else one run or one range: the exact cuts
                np.testing.assert_array_equal(cuts.settled_slices(job, (windowed, bare), t, gpu)[0][0], exact[t : t + 2])
            got = filesort.merge_rows(job, (windowed, bare), t, filesort.Stopwatch(), gpu)
            merged.append(np.empty(0, dtype) if got is None else dev.to_host(got[0]))
        want = pd.Series(np.concatenate(every)).sort_values(ascending=not descending, na_position=na_position, kind="stable")
        np.testing.assert_array_equal(np.concatenate(merged), want.to_numpy())
        assert [len(m) for m in merged] == list(range_rows)
    finally:
        s.close()


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
@pytest.mark.parametrize("dtype", ["int64", "float64"])
def test_a_process_ranks_samples_on_the_gpu_once_its_kernels_are_loaded(monkeypatch, rng, dtype):
    """Samples neither few nor very many: a process's first cuts rank them on the host while a
    thread loads the GPU's ranking for their kind; once loaded, they are ranked on the GPU, with
    the same windows."""
    import time
    from types import SimpleNamespace

    from dsort.core import cuts, plan

    monkeypatch.setattr(cuts, "_ranking_warm", {})
    monkeypatch.setattr(cuts, "GPU_RANKED_SAMPLES", 0)
    spacing, per = 5, 300
    samples = [np.sort(rng.integers(-50, 50, per).astype(dtype)) for _ in range(3)]
    if dtype == "float64":
        samples[1][-7:] = np.nan
    job = SimpleNamespace(gpu=True, descending=False, na_position="last", spacing=spacing)
    runs = [SimpleNamespace(sample=x) for x in samples]
    first = cuts._samples(job, runs)
    assert all(isinstance(x, np.ndarray) for x in first), "the first ranking is the host's"
    deadline = time.monotonic() + 60
    while not cuts._ranking_warm[(np.dtype(dtype).str, False, "last")].is_set() and time.monotonic() < deadline:
        time.sleep(0.05)
    later = cuts._samples(job, runs)
    assert not any(isinstance(x, np.ndarray) for x in later), "once loaded, on the GPU"
    targets = plan.interior_targets([per * spacing] * 3)
    want = plan.windows(first, [per * spacing] * 3, spacing, targets)
    got = plan.windows(later, [per * spacing] * 3, spacing, targets)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


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
    from dsort.core import filesort

    def broken(*a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(filesort, "_write_at", broken)
    src = tmp_path / "in.bin"
    gen.records(50_000, src)
    with pytest.raises(OSError, match="No space"):
        sort_files(src, tmp_path / "out.bin", cpu=True, memory_limit="4MB", chunk_size=200_000, progress=False)
    assert os.listdir(tmp_path) == ["in.bin"]


def test_a_full_disk_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    from dsort.core import filesort
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
    from dsort.cli import main
    from dsort.core import run_tiers

    written = []

    def full(path, rows):
        written.append(path)
        raise OSError(28, "No space left on device", str(path))

    monkeypatch.setattr(run_tiers, "write_file", full)
    src, spill = tmp_path / "in.bin", tmp_path / "spill"
    spill.mkdir()
    gen.records(100_000, src)
    assert (
        main(
            [
                "sort",
                str(src),
                str(tmp_path / "out.bin"),
                "--cpu",
                "--memory-limit",
                "8MB",
                "--chunk-size",
                "1MB",
                "--local-directory",
                str(spill),
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert written, "the runs should have gone to disk"
    assert "No space left on device" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "spill"] and os.listdir(spill) == []


def _on_cluster(tmp_path, kill_when=None, everywhere=False):
    """Sort 300,000 skewed records (100 runs) with ``sort_files`` on a LocalCluster of two worker processes
    with nannies; ``kill_when(client)``: SIGKILL the first worker once it says so. With
    ``everywhere``, each worker reads the slices of the other's runs through it, as on two
    machines. Checks the output against the reference and that no runs are left anywhere."""
    import signal
    import threading
    import time

    import dask
    from distributed import Client, LocalCluster, get_task_stream

    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(300_000, src, skew=True)
    with (
        dask.config.set({"dsort.read-runs-where-they-are": everywhere}),
        LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        Client(cluster) as client,
    ):
        pids = list(client.run(os.getpid).values())
        done = {}
        t = threading.Thread(
            target=lambda: done.update(
                r=sort_files(src, out, client=client, chunk_size=300_000, progress=False, stream=open(os.devnull, "w"))
            )
        )
        with get_task_stream(client) as stream:
            t.start()
            deadline = time.time() + 60
            while kill_when and time.time() < deadline and t.is_alive():
                if kill_when(client):
                    os.kill(pids[0], signal.SIGKILL)
                    break
                time.sleep(0.01)
            killed = t.is_alive()
            t.join(300)  # a lost worker costs about 5 s of recovery on the 2-core machine, more under load
            assert not t.is_alive(), "the sort did not end within 300 s"
        left = client.run(lambda dask_worker: [str(p) for p in Path(dask_worker.local_directory).rglob("dsort-runs-*")])
    assert killed or not kill_when, "the job ended before the worker could be killed: make it longer"
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), records_reference(data))
    assert done["r"].input_summary.checksum == done["r"].output_summary.checksum
    assert sorted(os.listdir(tmp_path)) == ["in.bin", "out.bin"]
    assert not any(left.values()), left
    return done["r"], [str(task["key"]) for task in stream.data]


def _runs_on_workers(client) -> int:
    return sum(client.run(lambda dask_worker: len(list(Path(dask_worker.local_directory).rglob("dsort-runs-*/run-*")))).values())


def _merging(client) -> bool:
    return any("dsort-merge" in str(k) for keys in client.processing().values() for k in keys)


def test_on_a_cluster_runs_stay_on_each_workers_disk_and_slices_travel(tmp_path):
    """Runs on the workers' own local directories; with the files taken as invisible to other
    workers (two machines), every merge reads the other worker's slices through it."""
    report, keys = _on_cluster(tmp_path, everywhere=True)
    assert set(report.runs) == {"workers' disks"}
    assert any(k.startswith("dsort-slices-") for k in keys)  # slices read where their runs are


@pytest.mark.parametrize("moment", ["runs", "merges"])
def test_a_worker_killed_mid_job_costs_only_a_recomputation(tmp_path, moment):
    """On a cluster with nannies, a worker killed while the runs are written (its tasks run again
    elsewhere), or once the merges read its runs (those runs are made again from their input
    blocks by the merges that need them): the same stable sort, no runs left."""
    _on_cluster(tmp_path, (lambda c: _runs_on_workers(c) >= 5) if moment == "runs" else _merging, everywhere=True)


def test_slices_of_a_lost_workers_runs_are_made_again_once(tmp_path):
    """A merge that needs a run whose worker is gone (its file on that machine only) makes the run
    again (``recover``: its block sorted again) once, here, and reads its slices from that."""
    from distributed import Client, LocalCluster

    from dsort.collections import remote
    from dsort.core import runs as R

    rows = np.arange(80, dtype=np.uint8).reshape(10, 8)

    def merge_like_task():
        store = R.store(R.StoreConfig("lost-job", str(tmp_path / "fallback"), 8, local=True, cluster=remote.DASK))
        gone = R.Run("lost-job", 3, 10, "disk", path=str(tmp_path / "elsewhere" / "run-000003.bin"), worker="tcp://127.0.0.1:9")
        made = []

        def recover(q):
            made.append(q)
            return store.put(q, rows)

        got = store.read_many([(gone, 2, 5), (gone, 5, 9)], recover=recover)
        R.drop("lost-job")
        return made, [g.tolist() for g in got]

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster, Client(cluster) as client:
        made, got = client.submit(merge_like_task).result(timeout=60)
    assert made == [3]
    assert got == [rows[2:5].tolist(), rows[5:9].tolist()]
    assert not (tmp_path / "fallback").exists()


def test_a_merge_fetches_other_workers_slices_before_it_takes_its_gpu_slot(tmp_path, monkeypatch):
    """A merge that waits for slices from another worker (seceded) while holding its GPU slot
    deadlocks its worker: the thread it gave up runs other merges, which wait for that slot, and
    it never gets a thread back (seen on an H100: two worker processes, runs read where they are).
    So every merge fetches first, then takes the slot."""
    import contextlib
    import threading

    from dsort.core import filesort as F
    from dsort.core import runs as R

    state = threading.local()
    real_on, real_fetch = F._on, R.RunStore.fetch_remote

    @contextlib.contextmanager
    def on(gpu, job=None):
        state.slot = True
        try:
            with real_on(gpu, job):
                yield
        finally:
            state.slot = False

    holding = []

    def fetch(self, items, recover=None):
        holding.append(getattr(state, "slot", False))
        return real_fetch(self, items, recover)

    monkeypatch.setattr(F, "_on", on)
    monkeypatch.setattr(R.RunStore, "fetch_remote", fetch)
    src = tmp_path / "in.bin"
    gen.records(20_000, src, skew=True)
    sort_files(src, tmp_path / "out.bin", cpu=True, chunk_size=200_000, progress=False, stream=open(os.devnull, "w"))
    assert len(holding) >= 10 and not any(holding), holding


# -- which engine: small inputs on the CPU unless --gpu -------------------------------------------


def test_on_cpu_chooses_the_cpu_for_inputs_under_gpu_min_input():
    import dask

    from dsort.service import on_cpu

    with dask.config.set({"dsort.file-sort.gpu-min-input": "1MB", "dsort.file-sort.gpu-min-input-per-thread": 0}):
        assert on_cpu(None, 999_999) and not on_cpu(None, 1_000_000)
        assert on_cpu(True, 10**12) and not on_cpu(False, 0)  # --cpu and --gpu win
        assert not on_cpu(None, 10, device_memory_limit="1GB")  # a device limit asks for the GPU
        with dask.config.set({"dsort.file-sort.gpu-min-input-per-thread": "200kB"}):  # the CPU's share grows with its threads
            assert not on_cpu(None, 1_000_000, threads=5) and on_cpu(None, 1_999_999, threads=10)
            assert not on_cpu(None, 2_000_000, threads=10) and on_cpu(None, 999_999, threads=0)
    with dask.config.set({"dsort.file-sort.gpu-min-input": 0, "dsort.file-sort.gpu-min-input-per-thread": 0}):
        assert not on_cpu(None, 0)


def test_a_small_input_is_sorted_on_the_cpu_without_cuda(tmp_path):
    """The default engine for 1,000 records: the CPU, said in the "on ..." line, with CuPy never
    imported (starting CUDA costs more than the whole sort)."""
    import subprocess
    import sys

    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(1000, src, seed=3)
    code = (
        "import sys, io\n"
        "from dsort.service import sort_files\n"
        "s = io.StringIO()\n"
        f"r = sort_files({str(src)!r}, {str(out)!r}, progress=False, stream=s)\n"
        "print(r.where)\n"
        "print('cupy' in sys.modules)\n"
    )
    where, cupy = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()[-2:]
    assert "on the CPU" in where and "gpu-min-input" in where, where
    assert cupy == "False"
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    keys = pd.Series(list(map(bytes, data[:, :10])))
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), data[keys.sort_values(kind="stable").index.to_numpy()])


def test_cpu_and_gpu_are_exclusive_and_gpu_needs_a_device(tmp_path, capsys):
    from dsort.cli import main

    src = tmp_path / "in.bin"
    gen.records(100, src)
    with pytest.raises(SystemExit) as e:
        main(["sort", str(src), str(tmp_path / "out.bin"), "--cpu", "--gpu"])
    assert e.value.code == 2 and "not allowed with argument" in capsys.readouterr().err
    if not HAS_GPU:
        assert main(["sort", str(src), str(tmp_path / "out.bin"), "--gpu"]) == 2
        assert "--gpu: no CUDA device is visible" in capsys.readouterr().err
    assert os.listdir(tmp_path) == ["in.bin"]


@pytest.mark.parametrize("apart", [True, False])
def test_the_cpu_sorts_checksums_are_summed_from_the_files_by_a_process_of_their_own(tmp_path, monkeypatch, apart, rng):
    """The embedded CPU sort of a large input (checksums.worth_apart) has its checksums summed from the input and
    output files by the checksum process (numba never loads in the sorting process); the input's
    checksum is valsort's either way (the sum of every record's zlib CRC-32), and a record lost or
    changed on the way is still caught."""
    import zlib

    from dsort import engine
    from dsort.core import filesort
    from dsort.core import checksums
    from dsort.service import CheckFailed

    monkeypatch.setattr(checksums, "worth_apart", lambda nbytes, threads: apart)
    src, out = tmp_path / "in.bin", tmp_path / "out.bin"
    gen.records(3_000, src, seed=int(rng.integers(1 << 30)))
    r = _sort(src, out, "cpu", "memory", 50_000)  # 6 blocks
    data = np.fromfile(src, np.uint8).reshape(-1, 100)
    assert r.input_summary.checksum == sum(zlib.crc32(row.tobytes()) for row in data) == r.output_summary.checksum
    assert ("checksums" in r.phases) == apart
    if apart:
        assert checksums._apart and checksums._apart[0].proc.poll() is None  # the process, alive for the next job
    np.testing.assert_array_equal(np.fromfile(out, np.uint8).reshape(-1, 100), records_reference(data))
    real = filesort.sort_and_keep
    monkeypatch.setattr(filesort, "sort_and_keep", lambda job, i, rows, *a, **k: real(job, i, rows[1:] if i == 2 else rows, *a, **k))
    with pytest.raises(CheckFailed):
        _sort(src, tmp_path / "lost.bin", "cpu", "memory", 50_000)
    assert not (tmp_path / "lost.bin").exists()
    monkeypatch.setattr(filesort, "sort_and_keep", real)
    take_rows = engine.take_rows

    def changing(values, positions):  # one payload byte changed in the merges: still in order, counts equal
        got = take_rows(values, positions)
        if got.ndim == 2 and got.shape[1] > 10 and len(got):
            got[0, 50] ^= 1
        return got

    monkeypatch.setattr(filesort.engines, "take_rows", changing)
    with pytest.raises(CheckFailed, match="checksum"):
        _sort(src, tmp_path / "changed.bin", "cpu", "memory", 50_000)
    assert not (tmp_path / "changed.bin").exists()


def test_the_sorting_process_never_loads_numba_where_the_checksums_are_apart(tmp_path):
    """In a fresh process: a CPU sort whose checksums the checksum process sums leaves numba unloaded
    (its import holds the GIL a second and more, slowing every thread of the sort)."""
    code = (
        "import sys\n"
        "from dsort.core import checksums\n"
        "checksums.worth_apart = lambda nbytes, threads: True\n"
        "from dsort.io import gen\n"
        "from dsort.service import sort_files\n"
        f"gen.records(2000, {str(tmp_path / 'in.bin')!r})\n"
        f"r = sort_files({str(tmp_path / 'in.bin')!r}, {str(tmp_path / 'out.bin')!r}, cpu=True, progress=False, stream=sys.stderr)\n"
        "print('checksums' in r.phases, 'numba' in sys.modules, r.output_summary.checksum == r.input_summary.checksum > 0)\n"
    )
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["True", "False", "True"]


def test_a_jobs_token_is_its_fields_hashed_once(tmp_path, monkeypatch):
    """Every task of a file sort holds the same job; dask hashes each task's arguments when the
    graph is sent. The job is hashed once (its fields field by field, in every task, cost 24 s for
    1,000 runs), and its token still follows every field."""
    from dask.base import tokenize

    from dsort.core import filesort as F, plan, runs as R

    n = 5_000
    blocks = tuple((str(tmp_path / "in.bin"), 100 * i, 1) for i in range(n))
    store = R.StoreConfig("job", str(tmp_path / "runs"), 100)
    job = F.Job("job", blocks, str(tmp_path / "out"), 0, layout=R.Layout(100, 10), range_rows=plan.ranges(n, 7), spacing=7, store=store)
    dumps = []
    real = F.pickle.dumps

    def counted(obj, *a, **k):
        if isinstance(obj, tuple) and obj and obj[0] == "Job":  # the job's fields, as __dask_tokenize__ hashes them
            dumps.append(1)
        return real(obj, *a, **k)

    monkeypatch.setattr(F.pickle, "dumps", counted)
    graph = [(F.Stopwatch, job, i) for i in range(n)]
    token = tokenize(graph)
    assert len(dumps) == 1 and tokenize(graph) == token
    same = F.Job("job", blocks, str(tmp_path / "out"), 0, layout=R.Layout(100, 10), range_rows=plan.ranges(n, 7), spacing=7, store=store)
    assert tokenize(same) == tokenize(job)
    for other in (replace(job, descending=True), replace(job, blocks=blocks[:-1]), replace(job, range_rows=plan.ranges(n, 8))):
        assert tokenize(other) != tokenize(job)
