"""dsort.core.runs: the run store (memory and disk tiers, slices read back), layouts, file helpers."""

import contextlib
import os
import subprocess
import sys
import uuid
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from dsort.collections import remote
from dsort.core import diskio
from dsort.core import run_lifetime as L
from dsort.core import runs as R
from dsort.core.run_handles import Local
from dsort.engine import ipc


class _OnWorker(Local):
    """A cluster whose worker is ``where``: a store made in a task on a worker."""

    def __init__(self, where):
        self.where = where

    def worker(self):
        return self.where


def _config(tmp_path, row_bytes, host_budget=0):
    return R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), row_bytes, host_budget=host_budget)


def test_layout_keys_of_records_and_of_numbers(rng):
    rows = rng.integers(0, 256, (50, 12), dtype=np.uint8)
    lay = R.Layout(12, 4)
    keys = lay.keys(rows)
    assert lay.payload and keys.shape == (50, 4) and keys.flags.c_contiguous
    np.testing.assert_array_equal(keys, rows[:, :4])
    x = rng.normal(size=20)
    num = R.Layout(8, 8, x.dtype.str)
    as_rows = num.rows_of(x)
    assert not num.payload and as_rows.shape == (20, 8)
    np.testing.assert_array_equal(num.keys(as_rows), x)


@pytest.mark.parametrize("host_budget", [0, 1 << 20])
def test_runs_go_to_memory_while_the_budget_lasts_then_disk(tmp_path, rng, host_budget):
    cfg = _config(tmp_path, 10, host_budget)
    store = R.RunStore(cfg)
    blocks = [rng.integers(0, 256, (n, 10), dtype=np.uint8) for n in (0, 1, 500, 70000)]  # the last: 700 kB
    handles = [store.put(i, b, sample=b[::7, :2].copy()) for i, b in enumerate(blocks)]
    tiers = [h.tier for h in handles]
    if host_budget:
        assert tiers[:3] == ["host"] * 3 and tiers[3] == "host"
        assert store.put(4, blocks[3]).tier == "disk"  # the budget is spent
    else:
        # an empty run fits any budget; the others go to files
        assert tiers == ["host"] + ["disk"] * 3 and all(os.path.exists(h.path) for h in handles[1:])
    assert [h.rows for h in handles] == [0, 1, 500, 70000]
    for h, b in zip(handles, blocks):
        for lo, hi in [(0, len(b)), (0, 0), (len(b) // 3, len(b) // 2)]:
            np.testing.assert_array_equal(store.read(h, lo, hi), b[lo:hi])
    got = store.read_many([(handles[2], 5, 9), (handles[3], 100, 101), (handles[1], 0, 1)])
    for g, (b, lo, hi) in zip(got, [(blocks[2], 5, 9), (blocks[3], 100, 101), (blocks[1], 0, 1)]):
        np.testing.assert_array_equal(g, b[lo:hi])
    store.close()
    assert os.listdir(cfg.directory) == [], "the store's files removed (the job's directory is the last reader's to remove)"


def test_many_slices_of_disk_runs_read_in_one_batch(tmp_path, rng):
    """Thousands of windows of a few disk runs (what the cuts read) in one read_many: each slice
    equals the run's rows, empty and whole ones too, whatever their order."""
    store = R.RunStore(_config(tmp_path, 6))
    blocks = [rng.integers(0, 256, (int(rng.integers(1, 3000)), 6), dtype=np.uint8) for _ in range(4)]
    handles = [store.put(i, b) for i, b in enumerate(blocks)]
    assert {h.tier for h in handles} == {"disk"}
    items = []
    for _ in range(2000):
        q = int(rng.integers(0, 4))
        lo, hi = np.sort(rng.integers(0, len(blocks[q]) + 1, 2))
        items.append((q, int(lo), int(hi)))
    items += [(q, 0, len(b)) for q, b in enumerate(blocks)]
    got = store.read_many([(handles[q], lo, hi) for q, lo, hi in items])
    for g, (q, lo, hi) in zip(got, items):
        np.testing.assert_array_equal(g, blocks[q][lo:hi])
    store.close()


@pytest.mark.parametrize("dtype", [None, "<i8"])
def test_windows_of_runs_read_as_one_gather_equal_their_slices(tmp_path, rng, dtype):
    """The cuts' windows (dsort.core.cuts.read_windows): runs in memory, in files and a chain
    (read slice by slice) give the same keys, cut by cut and run by run, empty windows and empty
    runs too."""
    from dsort.core import cuts

    lay = R.Layout(12, 8, dtype) if dtype else R.Layout(12, 10)
    store = R.RunStore(_config(tmp_path, 12, host_budget=40_000))
    blocks = [rng.integers(0, 256, (n, 12), dtype=np.uint8) for n in (3000, 0, 2500, 4000, 10, 700)]
    runs = [store.put(i, b) for i, b in enumerate(blocks[:5])]
    runs.append(R.Chain("job", 0, (store.put(20, blocks[5][:300]), store.put(21, blocks[5][300:]))))
    assert {r.tier for r in runs} == {"host", "disk", "chain"}
    lo = np.stack([np.sort(rng.integers(0, len(b) + 1, 7)) for b in blocks], axis=1)
    hi = np.minimum(lo + rng.integers(0, 40, lo.shape), [len(b) for b in blocks])
    got = cuts.read_windows(store, lay, runs, lo, hi)
    assert len(got) == len(lo)
    for t in range(len(lo)):
        keys, lengths = got.of(t)
        want = [lay.keys(np.ascontiguousarray(b[lo[t, q] : hi[t, q]])) for q, b in enumerate(blocks)]
        np.testing.assert_array_equal(lengths, [len(w) for w in want])
        np.testing.assert_array_equal(keys, np.concatenate(want))
    store.close()


def _rss_file_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("RssFile:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads RssFile from /proc (Linux)")
def test_released_slices_of_run_files_leave_the_process_and_read_the_same(tmp_path):
    """A merge done with its slices releases their mapped pages: the process's resident file pages
    fall by the run's size, and the slices (views) still read the same bytes."""
    store = R.RunStore(_config(tmp_path, 64))
    rows = np.arange(64 << 20, dtype=np.uint8).reshape(-1, 64)  # 64 MiB, one run on disk
    run = store.put(0, rows)
    assert run.tier == "disk"
    items = [(run, 0, len(rows) // 2), (run, len(rows) // 2, len(rows))]
    before = _rss_file_kib()
    got = store.read_many(items)
    total = sum(int(g.sum(dtype=np.int64)) for g in got)  # every page touched
    touched = _rss_file_kib()
    store.release(items)
    after = _rss_file_kib()
    assert touched - before > 48 << 10 and touched - after > 48 << 10, (before, touched, after)
    assert total == int(rows.sum(dtype=np.int64)) == sum(int(g.sum(dtype=np.int64)) for g in got)
    store.close()


def test_one_store_per_job_and_the_last_reader_removes_it(tmp_path, rng):
    cfg = _config(tmp_path, 4)
    assert R.store(cfg) is R.store(cfg)
    R.store(cfg).put(0, rng.integers(0, 256, (10, 4), dtype=np.uint8))
    assert os.listdir(cfg.directory)
    R.finish(cfg, 0, 2)
    R.finish(cfg, 0, 2)  # the same reader twice counts once
    assert os.path.exists(cfg.directory)
    R.finish(cfg, 1, 2)
    assert not os.path.exists(cfg.directory) and cfg.job not in L._stores


def test_a_gone_run_of_another_process_is_made_again_once_by_recover(tmp_path, rng, monkeypatch):
    """A run another process kept on a GPU that cannot be opened (its process gone) fails a read
    that names it; given ``recover``, the read has it made again, once in this process, and reads
    that instead (then and later)."""
    from dsort.engine import ipc

    cfg = _config(tmp_path, 4, host_budget=1 << 20)
    s = R.store(cfg)
    rows = rng.integers(0, 256, (10, 4), dtype=np.uint8)
    mine = s.put(0, rows[::-1].copy())
    gone = R.Run(cfg.job, 3, 10, "shared", device=0, shared=ipc.Shared(b"h", (10, 4), "|u1", "bus", "host", "another process"))

    def opened(shares, kept=None):
        raise ipc.SharedGone("cudaErrorInvalidResourceHandle")

    monkeypatch.setattr(ipc, "opened", opened)
    with pytest.raises(R.RunsGone, match="runs 3 .* gone"):
        s.read_many([(gone, 2, 5)])
    made = []

    def recover(i):
        made.append(i)
        return s.put(i, rows)

    got = s.read_many([(mine, 0, 2), (gone, 2, 5)], recover=recover)
    np.testing.assert_array_equal(got[0], rows[::-1][:2])
    np.testing.assert_array_equal(got[1], rows[2:5])
    np.testing.assert_array_equal(s.read_many([(gone, 0, 10)], recover=recover)[0], rows)
    assert made == [3]
    R.drop(cfg.job, cfg.directory)


def test_a_worker_reading_runs_of_other_processes_forgets_its_store_when_the_job_is_gone(tmp_path, monkeypatch):
    """A worker process that only reads a job's runs (they are another process's, whose last
    reader removes the job's directory) drops its own store of the job once the directory is
    gone; the store of a job whose directory is not there (a process that has not made runs yet)
    is not watched."""
    import time
    from types import SimpleNamespace

    here = _OnWorker(SimpleNamespace(address="tcp://here:1", local_directory=str(tmp_path)))
    cfg, early = (replace(_config(d, 4), cluster=here) for d in (tmp_path, tmp_path / "other"))
    os.makedirs(cfg.directory)  # another process's runs are there
    R.store(cfg), R.store(early)
    assert cfg.job in L._watched and early.job not in L._watched
    os.rmdir(cfg.directory)  # that process's last reader: the job is over
    deadline = time.monotonic() + 10
    while cfg.job in L._stores and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cfg.job not in L._stores and cfg.job not in L._watched and early.job in L._stores
    R.drop(early.job)


def test_a_new_compute_keeps_one_store_while_the_watcher_follows_the_last(tmp_path):
    """A job computed again (its directory removed by the last compute's last reader, the watcher
    still following it): the new compute's store is made with the directory, so the watcher never
    drops it before its first run is put, which would leave that compute's runs in two stores."""
    import time

    cfg = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), 4, shared_fraction=0.5)
    first = R.store(cfg)
    L.watch(first)  # a shared run put: the watcher follows the job
    R.drop(cfg.job, cfg.directory)  # the last reader of that compute
    again = R.store(cfg)  # the next compute's first task
    assert os.path.isdir(cfg.directory) and again is not first
    time.sleep(4 * L.WATCH_SECONDS)  # the watcher looks at the directory meanwhile
    assert R.store(cfg) is again
    R.drop(cfg.job, cfg.directory)
    deadline = time.monotonic() + 10
    while cfg.job in L._watched and time.monotonic() < deadline:
        time.sleep(0.05)
    assert cfg.job not in L._stores and cfg.job not in L._watched


def test_a_store_found_after_its_job_directory_went_is_made_anew(tmp_path, rng):
    """Another process's last reader removed the job's directory (its compute is over) before this
    process's watcher dropped its store: the next compute gets a new store, not the old one with
    the last compute's runs and reservations; a run put again holds its bytes once."""
    import shutil

    cfg = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), 4, host_budget=100, shared_fraction=0.5)
    old = R.store(cfg)
    rows = rng.integers(0, 256, (10, 4), dtype=np.uint8)
    assert old.put(0, rows).tier == "host" and old.put(0, rows).tier == "host"
    assert old.budget.used("host") == rows.nbytes  # put twice, held once
    shutil.rmtree(cfg.directory)  # the job's last reader, elsewhere
    new = R.store(cfg)
    assert new is not old and os.path.isdir(cfg.directory) and not old.host.arrays and new.budget.used("host") == 0
    R.drop(cfg.job, cfg.directory)


def test_a_closed_store_of_the_last_compute_removes_only_its_own_files(tmp_path, rng):
    """The watcher closes a worker's store of the last compute once the job's directory is gone;
    another process may meanwhile have begun the next compute in a new directory of that name.
    The old store's close removes its own files only: every run of the new compute stays
    readable, on disk and beside it (a frame's rows), in the same index as an old one."""
    cfg = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), 4)
    rows = rng.integers(0, 256, (10, 4), dtype=np.uint8)
    old = R.RunStore(cfg)
    gone = old.put(0, rows)
    R.drop(cfg.job, cfg.directory)  # the last compute's last reader, in another process
    assert not os.path.exists(gone.path)
    new = R.RunStore(cfg)  # the next compute, in another process
    made = R.new_making()
    beside = new.file_for(0, made, "frame", ".pickles")
    beside.write_bytes(b"rows")
    runs = [new.put(0, rows[::-1], made=made), new.put(1, rows)]
    old.close()  # this process's watcher, late
    assert beside.exists() and beside.name.endswith(f"{runs[0].made}.pickles") and runs[0].path != gone.path
    np.testing.assert_array_equal(new.read_many([(runs[0], 0, 10), (runs[1], 2, 5)])[0], rows[::-1])
    new.free([0])  # a run freed: its files go with it
    assert not beside.exists() and not os.path.exists(runs[0].path) and os.path.exists(runs[1].path)
    new.close()
    assert os.listdir(cfg.directory) == [], "a store's close removes its files"
    # and leaves the job's directory, which says that a compute of the job is under way
    R.drop(cfg.job, cfg.directory)
    assert not os.path.exists(cfg.directory)


def test_a_run_made_again_in_a_store_keeps_both_makings_until_it_is_freed(tmp_path, rng):
    """A run put again under its index (made again: a lost piece's group sorted again here) gets
    files of its own making; readers of the first making (other merges) still read theirs, until
    the run is freed."""
    cfg = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), 4)
    rows = rng.integers(0, 256, (6, 4), dtype=np.uint8)
    s = R.RunStore(cfg)
    first, again = s.put(3, rows), s.put(3, rows[::-1])
    assert first.path != again.path
    np.testing.assert_array_equal(s.read(again, 0, 6), rows[::-1])
    np.testing.assert_array_equal(s.read(first, 1, 4), rows[1:4])
    s.free([3])
    assert os.listdir(cfg.directory) == []


def test_leftovers_of_dead_processes_only_are_removed(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = int(done.stdout)
    assert L.alive(os.getpid()) and not L.alive(dead)
    for name in (f"dsort-runs-{dead}-abc", f"dsort-runs-{os.getpid()}-abc", "dsort-runs-x-abc", "other-1-abc"):
        (tmp_path / name).mkdir()
    assert L.remove_leftovers(tmp_path, "dsort-runs") == [str(tmp_path / f"dsort-runs-{dead}-abc")]
    assert sorted(os.listdir(tmp_path)) == sorted([f"dsort-runs-{os.getpid()}-abc", "dsort-runs-x-abc", "other-1-abc"])
    assert L.remove_leftovers(tmp_path / "missing", "dsort-runs") == []


def test_files_are_read_and_written_whole(tmp_path, rng):
    rows = rng.integers(0, 256, (300, 7), dtype=np.uint8)
    path = tmp_path / "f.bin"
    diskio.write_file(path, rows)
    np.testing.assert_array_equal(diskio.read_file(path, 7 * 10, 20, 7), rows[10:30])
    fd = os.open(path, os.O_RDWR)
    try:
        diskio.pwrite_all(fd, np.zeros(14, np.uint8), 7)
        buf = np.empty(21, np.uint8)
        diskio.pread_into(fd, buf, 0)
        diskio.start_writeback(fd, 0, 21)
    finally:
        os.close(fd)
    assert list(buf[7:21]) == [0] * 14 and list(buf[:7]) == list(rows[0])
    with pytest.raises(OSError, match="end of file"):
        diskio.read_file(path, 7 * 299, 2, 7)


def test_a_file_run_is_visible_where_its_file_is(tmp_path):
    path = tmp_path / "run-000000.bin"
    run = R.Run("job", 0, 1, "disk", path=str(path))
    assert not R.visible(run)
    path.write_bytes(b"x")
    assert R.visible(run)


@pytest.mark.gpu
def test_shared_runs_are_read_in_place_and_freed_when_the_job_is_over(tmp_path, rng):
    """On a GPU, with room, a run is kept there as a shared run (its owner reads it in place, onto
    its GPU or into host memory); past the room it goes to a file; the last reader's finish frees it."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import time

    import cupy

    config = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), 6, shared_fraction=1.0)
    store = R.store(config)
    rows = rng.integers(0, 256, (1000, 6), dtype=np.uint8)
    run = store.put(0, cupy.asarray(rows))
    assert run.tier == "shared" and run.shared.owner == ipc.PROCESS and os.path.isdir(config.directory)
    on_gpu, on_host = store.read_many([(run, 10, 400)], 0)[0], store.read_many([(run, 10, 400), (run, 990, 1000)])
    np.testing.assert_array_equal(cupy.asnumpy(on_gpu), rows[10:400])
    np.testing.assert_array_equal(on_host[0], rows[10:400])
    np.testing.assert_array_equal(on_host[1], rows[990:])
    full = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "full"), 6, shared_fraction=1e-12)
    assert R.store(full).put(0, cupy.asarray(rows)).tier == "disk"
    R.drop(full.job, full.directory)
    R.finish(config, 0, 1, [run])  # the only reader: the job is over
    assert config.job not in L._stores and not os.path.exists(config.directory)
    deadline = time.monotonic() + 10
    while config.job in L._watched and time.monotonic() < deadline:
        time.sleep(0.05)
    assert config.job not in L._watched


@pytest.mark.gpu
def test_a_run_waits_for_the_shared_runs_of_a_job_just_over(tmp_path, monkeypatch):
    """Sorts back to back: the last job's shared runs, its directory gone but its store not yet
    closed by the watcher (held off here by its lock), are freed by the next run that needs their
    room, which then stays on the GPU. Where another process still maps the runs of a job that is
    over, a run waits RECLAIM_SECONDS for them, then goes on to a file; the store's later runs go on
    at once, and so does a run of another store that those runs, freed, would not make room for."""
    from .conftest import HAS_GPU

    if not HAS_GPU:
        pytest.skip("no CUDA device")
    import shutil
    import time

    import cupy

    nbytes = 1 << 28
    rows = [cupy.full((nbytes // 8, 8), i, np.uint8) for i in range(3)]  # the runs' rows, made first
    big = cupy.full((3 * nbytes // 8, 8), 3, np.uint8)
    cupy.cuda.Device().synchronize()
    free, total = cupy.cuda.runtime.memGetInfo()
    used = total - free - cupy.get_default_memory_pool().free_bytes()
    fraction = (used + 1.5 * nbytes) / total  # room for one shared copy of nbytes, not for two
    names = ("last", "next", "held", "big")
    configs = [R.StoreConfig(uuid.uuid4().hex, str(tmp_path / name), 8, shared_fraction=fraction) for name in names]
    last, nxt, held, large = configs
    mark = None
    try:
        with L.watch_lock:  # the watcher thread waits: only the put can free the last job's run
            assert R.store(last).put(0, rows[0]).tier == "shared"
            shutil.rmtree(last.directory)  # the last job is over: its store still holds its run
            assert last.job in L._stores
            assert R.store(nxt).put(0, rows[1]).tier == "shared"
            assert last.job not in L._stores
            # the next job is over too, but another living process maps its run: it stays, and a run
            # of a third job waits for it, then goes to a file
            mark = Path(f"{nxt.directory}.holds") / f"{os.getpid()}-another"
            mark.parent.mkdir(parents=True, exist_ok=True)
            mark.touch()
            shutil.rmtree(nxt.directory)
            monkeypatch.setattr(L, "RECLAIM_SECONDS", 0.3)
            since = time.monotonic()
            assert R.store(held).put(0, rows[2]).tier == "disk"
            assert time.monotonic() - since >= 0.3
            monkeypatch.setattr(L, "RECLAIM_SECONDS", 20.0)  # a wait now would show (the files take a second at most)
            since = time.monotonic()
            assert R.store(held).put(1, rows[2]).tier == "disk"  # its wait ran out once: no second
            assert R.store(large).put(0, big).tier == "disk"  # short by more than the held run frees
            assert time.monotonic() - since < 10
    finally:
        if mark is not None:
            mark.unlink(missing_ok=True)
        for c in configs:
            R.drop(c.job, c.directory)


def test_run_files_are_mapped_once_and_forgotten_when_a_run_is_written_again(tmp_path):
    """A run file read through the store's mapping (read-only views), then written again as a new
    file at the same path (a run made again): the next read sees the new rows, never the old
    file's, and a view taken before keeps the old ones. Reads past the end fail with the path."""
    from dsort.core.diskio import Handles

    h = Handles()
    path = str(tmp_path / "run")
    old = np.arange(40, dtype=np.uint8).reshape(10, 4)
    old.tofile(path)
    before = h.read(path, 8, 3, 4)
    np.testing.assert_array_equal(before, old[2:5])
    assert not before.flags.writeable
    os.unlink(path)  # the file replaced by a new one at the same path
    new = old[::-1].copy()
    h.forget(path)
    new.tofile(path)
    np.testing.assert_array_equal(h.read(path, 8, 3, 4), new[2:5])
    np.testing.assert_array_equal(before, old[2:5])
    diskio.write_file(path, old)  # written again in place (a run made again): a new file, the views keep theirs
    np.testing.assert_array_equal(before, old[2:5])
    np.testing.assert_array_equal(h.read(path, 8, 3, 4), new[2:5])  # still mapped: forget() comes first
    h.forget(path)
    np.testing.assert_array_equal(h.read(path, 8, 3, 4), old[2:5])
    diskio.write_file(path, new)
    h.forget(path)
    buf = np.zeros(6, np.uint8)
    h.pread_into(path, buf, 34)
    np.testing.assert_array_equal(buf, new.reshape(-1)[34:])
    assert h.read(path, 40, 0, 4).shape == (0, 4)
    with pytest.raises(OSError, match="run: unexpected end of file"):
        h.read(path, 32, 3, 4)
    h.close()
    assert not h._maps


@pytest.mark.parametrize("host_budget", [0, 1 << 20])
def test_a_chain_reads_as_one_run_across_its_pieces(tmp_path, rng, host_budget):
    """A chained run (pieces of a first merge pass): any slice, across pieces or inside one, empty
    or whole, reads as the same slice of the pieces end to end; its sample is theirs, in order;
    freeing the pieces gives their memory back and removes their files."""
    store = R.RunStore(_config(tmp_path, 6, host_budget))
    parts = [rng.integers(0, 256, (n, 6), dtype=np.uint8) for n in (5, 1, 40000, 3)]
    pieces = tuple(store.put(10 + i, p, sample=p[::2, :1].copy()) for i, p in enumerate(parts))
    chain = R.Chain("job", 0, pieces)
    whole = np.concatenate(parts)
    assert chain.rows == len(whole) and chain.made == pieces[0].made
    np.testing.assert_array_equal(chain.sample, np.concatenate([p[::2, :1] for p in parts]))
    bounds = [(0, 0), (0, 5), (3, 7), (5, 6), (4, 40006), (6, 40009), (0, len(whole)), (40009, 40009), (2, 1)]
    got = store.read_many([(chain, lo, hi) for lo, hi in bounds] + [(pieces[2], 1, 4)])
    for (lo, hi), g in zip(bounds, got):
        np.testing.assert_array_equal(g, whole[lo : max(lo, hi)])
    np.testing.assert_array_equal(got[-1], parts[2][1:4])
    assert R.bare(chain).sample is None and R.bare(chain).rows == chain.rows
    store.free([p.index for p in pieces])
    assert store.budget.used("host") == 0 and not store.host.arrays
    assert not list((tmp_path / "runs").glob("run-*")) if (tmp_path / "runs").exists() else True


def test_mapped_run_files_are_capped_oldest_dropped_first(tmp_path, monkeypatch):
    """Each mapping holds a file handle: a store of more run files than the cap keeps at most the
    cap mapped (the oldest dropped first), and every read stays right."""
    from dsort.core import diskio

    h = diskio.Handles()
    h._cap = 5
    paths = []
    for i in range(12):
        paths.append(str(tmp_path / f"run-{i}"))
        np.full((4, 3), i, np.uint8).tofile(paths[-1])
    for _ in range(2):
        for i, path in enumerate(paths):
            assert (h.read(path, 3, 2, 3) == i).all()
            assert len(h._maps) <= 5
    assert list(h._maps) == paths[-5:]
    assert diskio.open_file_limit() >= 1024


def test_freed_runs_give_back_only_what_they_held(tmp_path, rng):
    """Freeing runs gives their bytes back to the budget they were held in; a run held within no
    budget (a run shared with other processes) gives nothing; files are removed."""
    store = R.RunStore(_config(tmp_path, 10, host_budget=1000))
    a = store.put(0, rng.integers(0, 256, (50, 10), dtype=np.uint8))
    b = store.put(1, rng.integers(0, 256, (80, 10), dtype=np.uint8))  # over the budget: a file
    assert (a.tier, b.tier) == ("host", "disk") and store.budget.used("host") == 500
    store.shared.arrays[7] = np.zeros((30, 10), np.uint8)  # as a shared run is held: no budget
    store.free([0, 1, 7])
    assert store.budget.used("host") == 0 and not store.host.arrays and not store.shared.arrays and not os.path.exists(b.path)
    assert store.put(2, rng.integers(0, 256, (100, 10), dtype=np.uint8)).tier == "host"  # the whole budget again


def test_a_lost_run_is_made_again_once_however_many_ask(tmp_path):
    import threading
    import time

    store = R.RunStore(_config(tmp_path, 4))
    made = []

    def recover(q):
        made.append(q)
        time.sleep(0.05)
        return store.put(q, np.full((3, 4), q, np.uint8))

    got = []
    threads = [threading.Thread(target=lambda: got.append(store.recover_once(9, recover))) for _ in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert made == [9] and len({id(g) for g in got}) == 1


@contextlib.contextmanager
def _reading_across(tmp_path, monkeypatch, read):
    """Two in-process workers whose remote reads are ``read`` (and late after 1 s): ``(client,
    a, b, cfg, a run of b's)``."""
    distributed = pytest.importorskip("distributed")
    import dask

    monkeypatch.setattr(remote, "REMOTE_READ_SECONDS", 1.0)
    monkeypatch.setattr(R, "read_slices", read)
    cfg = R.StoreConfig(uuid.uuid4().hex, str(tmp_path / "runs"), 4, cluster=remote.DASK)
    with (
        dask.config.set({"dsort.read-runs-where-they-are": True}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        a, b = sorted(client.scheduler_info()["workers"])
        yield client, a, b, cfg, R.Run(cfg.job, 3, 10, "disk", path=str(tmp_path / "theirs"), worker=b)
    R.drop(cfg.job, cfg.directory)


def test_a_remote_read_that_never_comes_back_is_made_again_here(tmp_path, monkeypatch):
    """A merge's slices of another worker's run, read there: where that read does not come back
    within REMOTE_READ_SECONDS (the worker alive), the run is made again here and read, as for a
    lost worker; the sort goes on rather than waiting for ever."""
    rows = np.arange(40, dtype=np.uint8).reshape(10, 4)
    with _reading_across(tmp_path, monkeypatch, _read_too_late) as (client, a, b, cfg, theirs):

        def merge_on_a():
            s = R.store(cfg)
            return s.fetch_remote([(theirs, 2, 5)], recover=lambda q: s.put(q, rows))

        got = client.submit(merge_on_a, workers=[a], pure=False).result(timeout=60)
    np.testing.assert_array_equal(got[0], rows[2:5])


@pytest.mark.parametrize("read", ["late", "fails"])
def test_a_remote_read_that_cannot_be_made_again_says_why(tmp_path, monkeypatch, read):
    """A remote read with no way to make its run again (``recover`` None) fails with an OSError
    that names the worker and why: the read's own error, or, when it does not come back (asked
    once more first), what that worker was doing (the task's state, its threads)."""
    with _reading_across(tmp_path, monkeypatch, _read_too_late if read == "late" else _read_fails) as (client, a, b, cfg, theirs):
        f = client.submit(lambda: R.store(cfg).fetch_remote([(theirs, 2, 5)]), workers=[a], pure=False)
        with pytest.raises(OSError, match=f"run 3 was on worker {b}") as e:
            f.result(timeout=60)
    if read == "late":  # asked twice, then failed with what the worker was doing
        said = str(e.value)  # the first read still holds the worker's one thread: the second waits for it
        assert "did not read it within 1 s (its task ready, 1 executing" in said and "_read_too_late" in said
    else:
        assert "read failed: FileNotFoundError: no such run" in str(e.value)


@pytest.mark.parametrize("read", ["in time", "late"])
def test_a_file_read_where_it_is_comes_back_or_says_why(tmp_path, monkeypatch, read):
    """A frame's rows read on the worker whose disk holds them (the file not visible here): the
    read's value, or, where it does not come back within REMOTE_READ_SECONDS (asked twice), an
    OSError that names the file, the worker and what it was doing; never a wait for ever."""
    with _reading_across(tmp_path, monkeypatch, _read_too_late) as (client, a, b, cfg, theirs):
        path = str(tmp_path / "elsewhere" / "rows")  # seen by no process here: read as on another host
        f = client.submit(remote.read_where_it_is, theirs, path, _slow_read if read == "late" else _quick_read, 7, workers=[a], pure=False)
        if read == "in time":
            assert f.result(timeout=60) == (path, 7)
            return
        with pytest.raises(OSError, match=f"{path} was on worker {b}, which did not read it within 1 s") as e:
            f.result(timeout=60)
    assert "_slow_read" in str(e.value)


def _quick_read(path, x):
    return path, x


def _slow_read(path, x):
    import time

    time.sleep(4)
    return path, x


def test_the_workers_named_for_one_call_never_miss_a_live_one():
    """``scheduler_identity`` names every live worker on every call, however often the client's
    own refresh runs. ``client.scheduler_info()`` does not: the refresh puts a copy with no
    workers in its place, and a read of it took a live worker for gone (hosts that share nothing,
    in CI). Counted in the same loop, with the refresh every millisecond: the race is real where
    scheduler_info misses, never for ours."""
    distributed = pytest.importorskip("distributed")
    import time

    import dask

    with (
        dask.config.set({"distributed.client.scheduler-info-interval": "1ms"}),
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster) as client,
    ):
        theirs = ours = 0
        end = time.monotonic() + 3
        while time.monotonic() < end:
            theirs += len(client.scheduler_info()["workers"]) < 2
            ours += len(remote.scheduler_identity(client)["workers"]) < 2
    assert ours == 0, f"scheduler_identity missed a live worker {ours} times (scheduler_info: {theirs})"


def _read_too_late(config, items):
    import time

    time.sleep(4)  # past REMOTE_READ_SECONDS: the reader has made the run again meanwhile
    return [np.full((3, 4), 255, np.uint8) for _ in items]  # not the rows: a reader that waited would take these


def _read_fails(config, items):
    raise FileNotFoundError("no such run")


def test_shared_runs_are_freed_only_once_no_other_process_maps_them(tmp_path):
    """An owner lets its shared runs go at once where no other process holds the job; while
    another living process's mark is there (it keeps the runs mapped) they wait, and the watcher
    frees them once that mark is gone; marks of ended processes are removed and hold nothing."""
    import gc
    import time
    import weakref

    class Arr:  # stands for a shared run's allocation
        pass

    directory = str(tmp_path / "runs")
    free, kept, late = Arr(), Arr(), Arr()
    gone_free, gone_kept, gone_late = weakref.ref(free), weakref.ref(kept), weakref.ref(late)
    mine = L.hold(directory)  # this process maps others' runs too: its own mark holds nothing of its own
    L.free_shared(directory, [free])
    del free
    gc.collect()
    assert gone_free() is None and not L._pending
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    (tmp_path / "runs.holds" / f"{dead.stdout.strip()}-{uuid.uuid4().hex}").touch()  # an ended process's mark
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        theirs = tmp_path / "runs.holds" / f"{other.pid}-{uuid.uuid4().hex}"
        theirs.touch()
        L.free_shared(directory, [kept])
        L.free_shared(directory, [late])
        del kept, late
        gc.collect()
        assert gone_kept() is not None and gone_late() is not None and len(L._pending) == 2
        time.sleep(3 * L.WATCH_SECONDS)
        assert gone_kept() is not None  # the other process still maps them
        L.unhold(theirs)  # its mappings closed
        deadline = time.monotonic() + 10
        while L._pending and time.monotonic() < deadline:
            time.sleep(0.05)
        gc.collect()
        assert gone_kept() is None and gone_late() is None and not L._pending
        assert sorted(os.listdir(tmp_path / "runs.holds")) == [mine.name]  # the ended process's mark removed
    finally:
        other.kill()
        other.wait()
    L.unhold(mine)
    assert not os.path.exists(tmp_path / "runs.holds")


def test_a_run_put_again_in_another_tier_leaves_nothing_in_the_first(tmp_path, rng):
    """A run put again (made again, or by a new compute of the job) that lands in another tier:
    the first tier lets its old rows go and its budget is whole again; the new handle reads the
    new rows."""
    store = R.RunStore(_config(tmp_path, 4, host_budget=100))
    small, big = (rng.integers(0, 256, (n, 4), dtype=np.uint8) for n in (10, 50))
    first, again = store.put(0, small), store.put(0, big)
    assert (first.tier, again.tier) == ("host", "disk")
    assert not store.host.holds(0) and store.budget.used("host") == 0
    np.testing.assert_array_equal(store.read(again, 0, 50), big)
    assert store.put(1, small).tier == "host" and store.budget.used("host") == small.nbytes
    store.close()
