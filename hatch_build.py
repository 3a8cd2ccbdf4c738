"""The wheel's build hook: with ``DSORT_CUBINS`` set (compute capabilities, e.g. ``80,90,100``, or
``default``), dsort's kernels are compiled ahead of time by NVRTC (no GPU needed) into
``kernels/aot/``, which the wheel ships as ``dsort/kernels/aot/``; an installed dsort then loads
them instead of compiling on first use (dsort/engine/_aot.py). Without it the wheel ships what
``kernels/aot/`` already holds (``python -m dsort.engine._aot`` fills it), or only the sources.

    DSORT_CUBINS=default python -m build --wheel
"""

import os
import subprocess
import sys

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CubinsHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def dependencies(self):
        # what building cubins needs in an isolated build environment: NVRTC, and what importing
        # dsort.engine needs
        return ["numpy>=1.26", "nvidia-cuda-nvrtc"] if os.environ.get("DSORT_CUBINS") else []

    def initialize(self, version, build_data):
        archs = os.environ.get("DSORT_CUBINS")
        if not archs or self.target_name != "wheel":
            return
        cmd = [sys.executable, "-m", "dsort.engine._aot"] + (
            [] if archs == "default" else ["--arch", archs]
        )
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([self.root, os.environ.get("PYTHONPATH", "")])
        )
        subprocess.run(cmd, cwd=self.root, env=env, check=True)
