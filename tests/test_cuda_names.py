"""Every name of CuPy's CUDA runtime and driver modules that dsort calls exists in the CuPy the
package pins, on a machine without a GPU: an error path that calls a missing name (a
``getLastError`` that CuPy does not wrap) fails only where the error happens, on a GPU box, and
turns a refusal that was meant to pass into a crash."""

from __future__ import annotations

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
MODULES = ("runtime", "driver")


def _dotted(node) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def called_names(tree: ast.AST) -> set[tuple[str, str]]:
    """``(module, name)`` for every ``cupy.cuda.runtime.NAME`` (or ``driver``) in ``tree``, also
    through a local alias (``rt = cupy.cuda.runtime``, ``from cupy.cuda import runtime``)."""
    aliases = {f"cupy.cuda.{m}": m for m in MODULES}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            dotted = _dotted(node.value)
            if dotted in aliases:
                aliases[node.targets[0].id] = aliases[dotted]
        elif isinstance(node, ast.ImportFrom) and node.module in ("cupy.cuda", "cupy_backends.cuda.api"):
            for a in node.names:
                if a.name in MODULES:
                    aliases[a.asname or a.name] = a.name
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = _dotted(node.value)
            if owner in aliases:
                found.add((aliases[owner], node.attr))
    return found


def test_finder_sees_every_spelling():
    tree = ast.parse(
        "import cupy\n"
        "from cupy.cuda import driver as drv\n"
        "rt = cupy.cuda.runtime\n"
        "rt.getLastError()\n"
        "cupy.cuda.runtime.memGetInfo()\n"
        "drv.ctxGetCurrent()\n"
        "x.runtime.other()\n"
    )
    assert called_names(tree) == {("runtime", "getLastError"), ("runtime", "memGetInfo"), ("driver", "ctxGetCurrent")}


def test_every_cuda_name_dsort_calls_exists_in_cupy():
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is part of the test extra")
    from cupy_backends.cuda.api import driver

    have = {"runtime": set(dir(runtime)), "driver": set(dir(driver))}
    used, missing = set(), []
    for path in sorted((ROOT / "dsort").rglob("*.py")):
        for module, name in called_names(ast.parse(path.read_text(), str(path))):
            used.add((module, name))
            if name not in have[module]:
                missing.append(f"{path.relative_to(ROOT)}: cupy.cuda.{module}.{name}")
    assert ("runtime", "deviceEnablePeerAccess") in used  # the finder reads the package, not nothing
    assert not missing, "names CuPy does not have:\n" + "\n".join(missing)
