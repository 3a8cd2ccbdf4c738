"""dsort.service without running a sort: block and range sizes from the limits and settings, the
limits' parser, the report's lines (sorts themselves: tests/test_cli.py, tests/test_filesort.py)."""

from pathlib import Path

import dask
import pytest

from dsort import service

from dsort.core import valsort
from dsort.service import LimitError, Resources

GIB, MIB = 1 << 30, 1 << 20


def test_cpu_blocks_are_capped_and_half_the_memory_holds_runs():
    res = Resources(threads=4, host_budget=4 * GIB)
    assert service.sizes(res, 100, None) == (16 * MIB // 100, 16 * MIB // 100, 2 * GIB, 0, 0)
    assert service.sizes(res, 100, 1000)[:2] == (10, 10)  # --chunk-size is the user's call
    with dask.config.set({"dsort.file-sort.cpu-block": "1MiB"}):
        assert service.sizes(res, 100, None)[0] == MIB // 100


def test_out_of_core_on_the_cpu_the_tasks_get_most_of_the_memory():
    """Input larger than half the budget: its runs go to disk anyway; runs keep an eighth, so the
    blocks (and the output ranges) are larger: fewer runs, fewer and longer slices to merge."""
    res = Resources(threads=16, host_budget=715 * MIB)
    fits = service.sizes(res, 100, None, nbytes=300 * MIB)
    spills = service.sizes(res, 100, None, nbytes=3000 * MIB)
    assert fits[2] == res.host_budget // 2 and spills[2] == res.host_budget // 8
    assert fits[0] == (res.host_budget - res.host_budget // 2) // 16 // 3 // 100
    assert spills[0] == (res.host_budget - res.host_budget // 8) // 16 // 3 // 100
    n = 3000 * MIB // 100
    assert service.bounded_fan_in(n, 100, spills[0], res, None, 0) == (spills[0], spills[1])
    gpu = Resources(threads=16, host_budget=715 * MIB, gpus=(0,), device_budget=4 * GIB)
    assert service.sizes(gpu, 100, None, nbytes=3000 * MIB)[2] == gpu.host_budget // 2  # the GPU's runs: unchanged


def test_a_memory_limit_too_small_for_one_block_names_the_smallest_workable():
    res = Resources(threads=4, host_budget=10 * MIB)
    with pytest.raises(LimitError, match=r"--memory-limit: 10.00 MiB is too small .* smallest workable total is 24.00 MiB in all for 4"):
        service.sizes(res, 100, None)
    # an input larger than half the budget keeps an eighth for runs: the tasks get more of it
    big = 10**9
    with pytest.raises(LimitError, match=r"--memory-limit: 10.00 MiB is too small .* smallest workable total is 13.71 MiB in all for 4"):
        service.sizes(res, 100, None, nbytes=big)
    for total, works in [(int(12 * MIB * 8 / 7) + 8, True), (int(12 * MIB * 8 / 7) - 8 * 1024, False)]:
        try:
            service.sizes(Resources(threads=4, host_budget=total), 100, None, nbytes=big)
            assert works, total
        except LimitError:
            assert not works, total


def test_blocks_grow_to_merge_in_one_pass():
    res = Resources(threads=4, host_budget=4 * GIB)
    n = 10**6
    need = -(-n // 1024)  # dsort.file-sort.max-runs
    # ranges: at most max-slices (65536) run x range pairs: 1024 runs, 64 ranges
    assert service.bounded_fan_in(n, 100, 100, res, None, 0) == (need, -(-n // 64))
    assert service.bounded_fan_in(n, 100, 5000, res, None, 0)[0] == 5000
    # the user's --chunk-size makes 10,000 runs: merged in two passes (tests/test_two_pass.py)
    assert service.bounded_fan_in(n, 100, 100, res, 10_000, 0)[0] == 100
    with dask.config.set({"dsort.file-sort.max-runs": 10}):
        assert service.bounded_fan_in(n, 100, 100, res, None, 0)[0] == n // 10


def test_the_report_says_where_the_time_went():
    s = valsort.Summary(records=1000, checksum=0xABC, duplicates=7)
    r = service.SortReport(
        "in",
        Path("out"),
        "records",
        1000,
        100_000,
        2.0,
        s,
        s,
        "4 threads",
        None,
        {"run": 1.5, "merge": 0.5},
        {"sort": 3.0, "read": 1.0},
        {"disk": 2},
    )
    lines = service.format_report(r).splitlines()
    assert lines[0] == "sorted 1,000 records (97.66 kiB), duplicate keys 7"
    assert lines[1] == "wall time 2.00 s, throughput 48.83 kiB/s (500 records/s)"
    assert lines[2:] == [
        "phases (wall, each from its first task to its last: they overlap): run 1.50 s, merge 0.50 s",
        "stages (busy, all threads): sort 3.00 s (75%), read 1.00 s (25%)",
        "runs: 2 on disk",
    ]
    assert r.throughput == 50_000.0


@pytest.mark.parametrize(
    "per, nbytes, visible, expected",
    [
        (0, 10**12, 4, 1),  # the default: one GPU at any size
        (0, 10**6, 0, 0),  # no GPU: none
        ("1GB", 10**8, 4, 1),  # under one step: one
        ("1GB", 10**9, 4, 2),  # each whole step of input: one more
        ("1GB", 3 * 10**9 + 1, 4, 4),
        ("1GB", 10**11, 4, 4),  # never more than are visible
        ("1GB", None, 4, 1),  # size unknown: one
    ],
)
def test_an_embedded_sort_takes_one_gpu_unless_its_input_pays_for_more(monkeypatch, per, nbytes, visible, expected):
    from dsort import limits

    with dask.config.set({"dsort.file-sort.input-per-extra-gpu": per}):
        assert limits.default_gpus(visible, nbytes) == expected


def test_the_gpus_of_an_embedded_sort_by_default_and_as_named(monkeypatch):
    import sys
    import types

    from dsort import limits

    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(Device=lambda d: types.SimpleNamespace(mem_info=(60 << 30, 80 << 30)))
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr("dsort.engine.device.gpu_count", lambda: 4)
    assert limits.resources(nbytes=10**10).gpus == (0,)
    assert "4 visible: --n-workers 4 for all" in limits.resources(nbytes=10**10).described
    assert limits.resources(n_workers=3, nbytes=10**10).gpus == (0, 1, 2)
    with dask.config.set({"dsort.file-sort.input-per-extra-gpu": "4GB"}):
        assert limits.resources(nbytes=10**10).gpus == (0, 1, 2)
    with pytest.raises(LimitError, match="--n-workers 5"):
        limits.resources(n_workers=5)


def test_the_limits_are_one_object_whoever_makes_them(tmp_path, monkeypatch, rng):
    """The command line, ``sort_files``' keywords and its ``limits=`` make the same request (one
    :class:`~dsort.collections.config.Limits`), whose sort sees it whole; both at once are refused."""
    from dsort import fixed_sort
    from dsort.cli import main
    from dsort.collections.config import Limits
    from dsort.io import gen

    seen = []

    class Stop(Exception):
        pass

    def sort(req, *args, **kwargs):
        seen.append((req.limits, req.chunk_size))
        raise Stop

    monkeypatch.setattr(fixed_sort, "sort", sort)
    src, spill = tmp_path / "in.bin", tmp_path / "spill"
    gen.records(int(rng.integers(1, 500)), src)
    mem, threads = f"{int(rng.integers(64, 512))}MB", int(rng.integers(1, 5))
    words = dict(threads_per_worker=threads, memory_limit=mem, local_directory=str(spill), cpu=True)
    with pytest.raises(Stop):
        service.sort_files(src, tmp_path / "a.bin", chunk_size=1 << 20, progress=False, **words)
    with pytest.raises(Stop):
        service.sort_files(src, tmp_path / "b.bin", chunk_size=1 << 20, progress=False, limits=Limits(**words))
    args = ["sort", str(src), str(tmp_path / "c.bin"), "--cpu", "--threads-per-worker", str(threads), "--memory-limit", mem]
    with pytest.raises(Stop):
        main([*args, "--local-directory", str(spill), "--chunk-size", "1MiB"])
    want = Limits(threads_per_worker=threads, memory_limit=mem, local_directory=str(spill), cpu=True)
    assert seen[0] == seen[1] == (want, 1 << 20)
    assert seen[2][0].local_directory == str(spill) and seen[2][0].threads_per_worker == threads and seen[2][0].cpu
    with pytest.raises(TypeError, match="either limits= or memory_limit"):
        service.sort_files(src, tmp_path / "d.bin", memory_limit="1GB", limits=Limits())
