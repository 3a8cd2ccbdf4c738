"""The wheel carries the CUDA sources, and an installed dsort finds them outside the source tree."""

import os
import subprocess
import sys
import zipfile

import pytest
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_ships_kernels(tmp_path):
    pytest.importorskip("hatchling", reason="the test extra installs hatchling; the GPU image lacks it")
    build = "import hatchling.build as b, sys; print(b.build_wheel(sys.argv[1]))"
    name = subprocess.run([sys.executable, "-c", build, str(tmp_path)], cwd=ROOT, check=True, capture_output=True, text=True).stdout.split()[-1]
    wheel = tmp_path / name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(tmp_path / "site")
    shipped = {n for n in names if n.startswith("dsort/kernels/")}
    expected = {f"dsort/kernels/{p.relative_to(ROOT / 'kernels')}" for p in (ROOT / "kernels").rglob("*") if p.is_file()}
    assert expected and expected <= shipped
    # Import from the unpacked wheel, far from the source tree.
    probe = "import dsort.engine as e; print(e.kernel_dir())"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env=env, check=True, capture_output=True, text=True).stdout.strip()
    assert Path(out) == tmp_path / "site" / "dsort" / "kernels"


def test_engine_needs_no_dask():
    """The engines are usable without dask (the GPU image, a kernel-only user): dsort's dask front
    end is imported on first use only."""
    probe = "import sys, dsort, dsort.engine; assert 'dask' not in sys.modules, 'dask imported'; dsort.sort; assert 'dask' in sys.modules"
    subprocess.run([sys.executable, "-c", probe], cwd=ROOT, check=True)
