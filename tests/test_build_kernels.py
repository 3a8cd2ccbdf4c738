"""``dsort build-kernels``: the GPU kernels compiled ahead of time, so no sort compiles on first use."""

import os
import subprocess
import sys

import pytest

from dsort import cli
from dsort.engine import device


def test_build_kernels_without_a_gpu_is_a_clear_error(capsys, monkeypatch):
    monkeypatch.setattr(device, "has_gpu", lambda: False)
    assert cli.main(["build-kernels"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no CUDA device" in err[0]


@pytest.mark.gpu
def test_build_kernels_fills_the_cache_and_the_first_sort_compiles_nothing(tmp_path):
    pytest.importorskip("cupy")
    if not device.has_gpu():
        pytest.skip("no CUDA device")
    env = dict(os.environ, CUPY_CACHE_DIR=str(tmp_path / "cache"))

    def run(*a):
        return subprocess.run([sys.executable, "-m", "dsort", *a], env=env, capture_output=True, text=True, timeout=600)

    src, dst = tmp_path / "in.bin", tmp_path / "out.bin"
    assert run("gen", "records", "5000", str(src)).returncode == 0
    first = run("sort", str(src), str(dst), "--gpu")  # a small input: on the CPU by default
    assert first.returncode == 0, first.stderr
    from dsort.engine import _aot, _cuda

    shipped = _aot.shipped_all(_cuda.target())  # cubins built ahead of time: nothing of dsort's compiles
    assert ("first use of dsort's kernels" in first.stdout) != shipped  # else an empty cache: this run compiles
    built = run("build-kernels", "--jobs", "4")
    assert built.returncode == 0 and "built" in built.stdout, built.stderr
    again = run("sort", str(src), str(dst), "--overwrite", "--gpu")
    assert again.returncode == 0, again.stderr
    assert "first use" not in again.stdout
    assert run("check", str(dst)).returncode == 0
