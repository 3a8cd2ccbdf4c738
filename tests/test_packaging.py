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
    name = subprocess.run(
        [sys.executable, "-c", build, str(tmp_path)], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout.split()[-1]
    wheel = tmp_path / name
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        z.extractall(tmp_path / "site")
    shipped = {n for n in names if n.startswith("dsort/kernels/")}
    expected = {f"dsort/kernels/{p.relative_to(ROOT / 'kernels')}" for p in (ROOT / "kernels").rglob("*") if p.is_file()}
    assert expected and expected <= shipped
    assert "dsort/dsort.yaml" in names  # the dsort.* settings' defaults (dsort.collections.config)
    assert "dsort-drop-in.pth" in names  # site-packages' root: DASK_DSORT__DATAFRAME__DROP_IN without an import
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


def test_the_embedded_sort_does_not_import_distributed(tmp_path):
    """The default `dsort sort` runs on threads in its own process: importing distributed (a
    quarter of a second) would only lengthen every command."""
    import subprocess
    import sys

    from dsort.io import gen

    gen.records(1000, tmp_path / "in.bin")
    code = (
        "import sys; from dsort.cli import main; "
        f"assert main(['sort', {str(tmp_path / 'in.bin')!r}, {str(tmp_path / 'out.bin')!r}, '--cpu']) == 0; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'distributed'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
