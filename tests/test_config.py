"""dsort.collections.config: the dsort.* settings in dask's configuration."""

import os
import subprocess
import sys
from pathlib import Path

import dask
import pytest
import yaml

from dsort.collections import config

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.default_scale


def _leaves(d, prefix="dsort"):
    for k, v in d.items():
        if isinstance(v, dict):
            yield from _leaves(v, f"{prefix}.{k}")
        else:
            yield f"{prefix}.{k}", v


def test_defaults_are_registered_and_typed():
    with open(config.DEFAULTS_FILE) as f:
        defaults = yaml.safe_load(f)["dsort"]
    leaves = dict(_leaves(defaults))
    assert leaves["dsort.no-workers-timeout"] == "30s" and leaves["dsort.read-runs-where-they-are"] is False
    for key, value in leaves.items():
        assert dask.config.get(key) == value
    assert config.seconds("no-workers-timeout") == 30.0
    assert config.nbytes("file-sort.min-block") == 1 << 20 and config.nbytes("check.block") == 64 << 20
    assert config.nbytes("file-sort.gpu-block") == 128 << 20 and config.get("file-sort.max-runs") == 1024


def test_every_setting_is_documented_in_the_readme():
    with open(config.DEFAULTS_FILE) as f:
        leaves = dict(_leaves(yaml.safe_load(f)["dsort"]))
    readme = (ROOT / "README.md").read_text()
    for key in leaves:
        head, _, last = key.rpartition(".")
        assert f"`{key}`" in readme or (f"`{head}." in readme and f"`{last}`" in readme), key


def test_user_values_win_and_parse():
    with dask.config.set({"dsort.no-workers-timeout": 3, "dsort.check.block": "1 KiB"}):
        assert config.seconds("no-workers-timeout") == 3.0 and config.nbytes("check.block") == 1024
    with dask.config.set({"dsort.no-workers-timeout": "2 minutes"}):
        assert config.seconds("no-workers-timeout") == 120.0
    with pytest.raises(KeyError):
        config.get("no-such-setting")


def test_the_environment_overrides_a_default_and_import_dsort_registers_nothing():
    code = (
        "import sys, dsort; assert 'dask' not in sys.modules\n"
        "import dask, dsort.collections.graph\n"
        "from dsort.collections import config\n"
        "print(config.seconds('no-workers-timeout'), config.get('file-sort.gpu-threads'))\n"
    )
    env = dict(os.environ, DASK_DSORT__NO_WORKERS_TIMEOUT="7")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["7.0", "6"]
