"""dsort's kernels built ahead of time: cubins an installed dsort loads without compiling.

Every compile unit of the kernel plans (:func:`._kernels.modules`) is compiled by NVRTC, which needs
no GPU, for each shipped architecture into ``kernels/aot/sm_XX/``: one cubin per module and a
``manifest.json`` that maps each module's key (a digest of its code, options and instantiations, so
any change of a source or a tuning misses) to its file and its kernels' mangled names.
:mod:`._cuda` loads a module from there when the current device's architecture (or an older minor
of its major, whose cubins it runs) has it, and compiles through CuPy otherwise.

Pure Python and ctypes: building needs NVRTC's library (the ``nvidia-cuda-nvrtc`` wheel, CuPy's,
or a CUDA toolkit's), not CuPy and not a GPU.

    python -m dsort.engine._aot [--arch 80,90,100] [--jobs N]   # what the wheel and the image run
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from ._kernels import Module, Target, kernel_dir, modules

OPTIONS = ("-std=c++17",)  # with -I of the kernel directory and the architecture
# Shipped architectures: compute capability -> the shared memory one CTA may opt into there, which
# the plans' tiles are fitted to (A100; H100 and H200; B200). Other 8.x devices (A10, L4, L40S) run
# the sm_80 cubins wherever their plans name the same kernels.
ARCHS = {80: 166912, 90: 232448, 100: 232448}


@functools.cache
def digest() -> str:
    """A digest of every kernel source: part of each module's code, so that a changed source is a
    new module for CuPy's cache and for the shipped cubins alike."""
    h = hashlib.sha256()
    for path in sorted(kernel_dir().glob("*.cu*")):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def code(m: Module) -> str:
    """The source NVRTC compiles for module ``m``."""
    return f"// dsort kernels {digest()}\n" + "".join(f'#include "{s}"\n' for s in m.sources)


def key(m: Module) -> str:
    h = hashlib.sha256("\0".join((code(m), *OPTIONS, *m.names)).encode())
    return h.hexdigest()[:24]


def aot_dir() -> Path:
    return kernel_dir() / "aot"


# -- loading ---------------------------------------------------------------------------------------


@functools.cache
def _manifest(arch: int) -> dict:
    path = aot_dir() / f"sm_{arch}" / "manifest.json"
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return doc.get("modules", {}) if doc.get("digest") == digest() else {}


def _candidates(arch: int) -> list[int]:
    """Architectures whose cubins run on ``arch``: itself, then older minors of its major."""
    major, minor = divmod(arch, 10)
    return [major * 10 + m for m in range(minor, -1, -1)]


def find(m: Module, arch: int) -> tuple[Path, dict] | None:
    """``(cubin, {name expression: mangled name})`` of module ``m`` shipped for a device of
    compute capability ``arch``, or None."""
    k = key(m)
    for a in _candidates(arch):
        entry = _manifest(a).get(k)
        if entry:
            path = aot_dir() / f"sm_{a}" / entry["file"]
            if path.is_file():
                return path, entry["lowered"]
    return None


def shipped_all(target: Target) -> bool:
    """True when every module of ``target``'s plans is shipped: a sort compiles nothing."""
    return all(find(m, target.arch) for m in modules(target))


# -- building (NVRTC through ctypes) -------------------------------------------------------------


def _library_paths():
    if os.environ.get("DSORT_NVRTC"):
        yield os.environ["DSORT_NVRTC"]
    for entry in sys.path:  # the nvidia-cuda-nvrtc wheels
        for rel in ("nvidia/cu13/lib/libnvrtc.so.13", "nvidia/cuda_nvrtc/lib/libnvrtc.so.12"):
            if os.path.isfile(os.path.join(entry or ".", rel)):
                yield os.path.join(entry or ".", rel)
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib  # what CuPy 14 loads its NVRTC with

        found = load_nvidia_dynamic_lib("nvrtc").abs_path
        if found:
            yield found
    except Exception:
        pass
    for home in (os.environ.get("CUDA_PATH"), os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home:
            for name in ("libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"):
                yield os.path.join(home, "lib64", name)
    yield "libnvrtc.so"


class NvrtcError(RuntimeError):
    pass


@functools.cache
def nvrtc() -> ctypes.CDLL:
    """NVRTC's library: ``DSORT_NVRTC``, else the nvidia-cuda-nvrtc wheel, CuPy's, a toolkit's."""
    tried = []
    for path in _library_paths():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            tried.append(path)
            continue
        lib.nvrtcGetErrorString.restype = ctypes.c_char_p
        lib.nvrtcGetLoweredName.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_char_p),
        ]
        return lib
    raise NvrtcError(
        "NVRTC's library was not found (pip install nvidia-cuda-nvrtc, or set DSORT_NVRTC); tried "
        + ", ".join(tried)
    )


def nvrtc_version() -> str:
    major, minor = ctypes.c_int(), ctypes.c_int()
    nvrtc().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor))
    return f"{major.value}.{minor.value}"


def supported_archs() -> list[int]:
    lib, n = nvrtc(), ctypes.c_int()
    lib.nvrtcGetNumSupportedArchs(ctypes.byref(n))
    out = (ctypes.c_int * n.value)()
    lib.nvrtcGetSupportedArchs(out)
    return list(out)


def _check(lib, status: int, what: str, prog=None) -> None:
    if status == 0:
        return
    log = ""
    if prog is not None:
        size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        lib.nvrtcGetProgramLog(prog, buf)
        log = buf.value.decode(errors="replace")
    raise NvrtcError(f"NVRTC {what}: {lib.nvrtcGetErrorString(status).decode()}\n{log}")


def compile_module(m: Module, arch: int) -> tuple[bytes, dict]:
    """``(cubin, {name expression: mangled name})`` of module ``m`` for ``sm_{arch}``."""
    lib = nvrtc()
    prog = ctypes.c_void_p()
    _check(
        lib,
        lib.nvrtcCreateProgram(ctypes.byref(prog), code(m).encode(), b"dsort.cu", 0, None, None),
        "create",
    )
    try:
        for name in m.names:
            _check(lib, lib.nvrtcAddNameExpression(prog, name.encode()), "name expression", prog)
        opts = [*OPTIONS, f"-I{kernel_dir()}", f"--gpu-architecture=sm_{arch}"]
        argv = (ctypes.c_char_p * len(opts))(*(o.encode() for o in opts))
        _check(lib, lib.nvrtcCompileProgram(prog, len(opts), argv), f"compile for sm_{arch}", prog)
        size = ctypes.c_size_t()
        _check(lib, lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "cubin size", prog)
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib, lib.nvrtcGetCUBIN(prog, cubin), "cubin", prog)
        lowered = {}
        for name in m.names:
            out = ctypes.c_char_p()
            _check(
                lib,
                lib.nvrtcGetLoweredName(prog, name.encode(), ctypes.byref(out)),
                "lowered name",
                prog,
            )
            lowered[name] = out.value.decode()
        return cubin.raw, lowered
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))


def build(
    archs=None, jobs: int | None = None, out: Path | None = None, stream=None, only=None
) -> dict:
    """Compile every module for each of ``archs`` (default: :data:`ARCHS`) into ``out`` (default:
    :func:`aot_dir`), in ``jobs`` threads (NVRTC runs without the GIL); ``only``: a predicate on
    modules, to build some (tests). Returns ``{arch: modules built}``; each architecture's manifest
    is written last, so a build cut short ships nothing of it."""
    import concurrent.futures

    archs = [int(a) for a in (archs or ARCHS)]
    unknown = [a for a in archs if a not in ARCHS]
    if unknown:
        raise ValueError(
            f"no shared-memory size known for sm_{unknown[0]}: the shipped architectures are "
            f"{sorted(ARCHS)}"
        )
    out = Path(out or aot_dir())
    jobs = jobs or os.cpu_count() or 1
    done = {}
    for arch in archs:
        t = time.perf_counter()
        mods = [m for m in modules(Target(arch, ARCHS[arch])) if only is None or only(m)]
        d = out / f"sm_{arch}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "manifest.json").unlink(missing_ok=True)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            built = list(pool.map(compile_module, mods, [arch] * len(mods)))
        manifest = {}
        for m, (cubin, lowered) in zip(mods, built):
            k = key(m)
            (d / f"{k}.cubin").write_bytes(cubin)
            manifest[k] = {"file": f"{k}.cubin", "lowered": lowered}
        for stale in d.glob("*.cubin"):
            if stale.stem not in manifest:
                stale.unlink()
        doc = {
            "digest": digest(),
            "nvrtc": nvrtc_version(),
            "arch": arch,
            "options": list(OPTIONS),
            "modules": manifest,
        }
        (d / "manifest.json").write_text(json.dumps(doc, indent=1, sort_keys=True))
        done[arch] = len(mods)
        if stream:
            size = sum(len(c) for c, _ in built)
            print(
                f"sm_{arch}: {len(mods)} modules, {size / 2**20:.1f} MiB of cubins in "
                f"{time.perf_counter() - t:.1f} s",
                file=stream,
            )
    _manifest.cache_clear()
    return done


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(
        prog="python -m dsort.engine._aot",
        description="Build dsort's kernels ahead of time (no GPU needed).",
    )
    p.add_argument(
        "--arch", default=",".join(map(str, ARCHS)), help="compute capabilities, e.g. 80,90,100"
    )
    p.add_argument("--jobs", type=int, default=None, help="NVRTC compiles at once (default: CPUs)")
    p.add_argument("--out", default=None, help=f"where (default: {aot_dir()})")
    args = p.parse_args(argv)
    build([a for a in args.arch.split(",") if a], args.jobs, args.out, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
