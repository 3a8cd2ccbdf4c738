"""Kernels built ahead of time (dsort.engine._aot): NVRTC compiles cubins without a GPU, the
manifest names each module's file and mangled names, lookups miss on any change of source or
instantiation, and on a GPU the shipped cubins are what runs (no NVRTC), giving NumPy's results."""

import json

import numpy as np
import pytest

from dsort.engine import _aot
from dsort.engine import _kernels as P

from .conftest import HAS_GPU


def _nvrtc_or_skip():
    try:
        _aot.nvrtc()
    except _aot.NvrtcError as e:
        pytest.skip(str(e))


ROWS = P.rows_plan().module  # the smallest module: byte rows (packing, searches, checks)


def test_a_module_key_follows_its_code_and_instantiations():
    a = P.Module(("kernel_rows.cu",), ("dsort::k_unpack_rows<unsigned long long>",))
    b = P.Module(("kernel_rows.cu",), ("dsort::k_unpack_rows<dsort::Bytes16>",))
    c = P.Module(("kernel_search.cu",), a.names)
    assert len({_aot.key(a), _aot.key(b), _aot.key(c)}) == 3
    assert _aot.key(a) == _aot.key(P.Module(("kernel_rows.cu",), ("dsort::k_unpack_rows<unsigned long long>",)))
    assert _aot.digest() in _aot.code(a) and '#include "kernel_rows.cu"' in _aot.code(a)


def test_nothing_is_found_where_nothing_is_shipped(tmp_path, monkeypatch):
    monkeypatch.setattr(_aot, "aot_dir", lambda: tmp_path)
    _aot._manifest.cache_clear()
    try:
        assert _aot.find(ROWS, 90) is None
        assert not _aot.shipped_all(P.Target(90, _aot.ARCHS[90]))
    finally:
        _aot._manifest.cache_clear()


def test_older_minors_of_the_same_major_run_a_devices_cubins():
    assert _aot._candidates(89) == [89, 88, 87, 86, 85, 84, 83, 82, 81, 80]
    assert _aot._candidates(90) == [90] and _aot._candidates(100) == [100]


def test_build_without_a_gpu_and_find(tmp_path, monkeypatch):
    """One module for two architectures: ELF cubins, mangled names for every instantiation, found
    for its own architecture and a later minor of it, not for another major; a manifest of other
    sources (a stale digest) is ignored."""
    _nvrtc_or_skip()
    monkeypatch.setattr(_aot, "aot_dir", lambda: tmp_path)
    try:
        assert _aot.build([80, 90], jobs=2, only=lambda m: m == ROWS) == {80: 1, 90: 1}
        for arch in (80, 90):
            doc = json.loads((tmp_path / f"sm_{arch}" / "manifest.json").read_text())
            assert doc["digest"] == _aot.digest() and doc["arch"] == arch
            path, lowered = _aot.find(ROWS, arch)
            assert path.read_bytes()[:4] == b"\x7fELF"
            assert set(lowered) == set(ROWS.names) and all(v.startswith("_Z") for v in lowered.values())
        assert _aot.find(ROWS, 86)[0].parent.name == "sm_80"
        assert _aot.find(ROWS, 100) is None
        other = P.Module(ROWS.sources, ROWS.names[:1])
        assert _aot.find(other, 90) is None  # other instantiations: another key
        doc["digest"] = "0" * 16
        (tmp_path / "sm_90" / "manifest.json").write_text(json.dumps(doc))
        _aot._manifest.cache_clear()
        assert _aot.find(ROWS, 90) is None
    finally:
        _aot._manifest.cache_clear()


def test_an_unknown_architecture_is_refused():
    with pytest.raises(ValueError, match="sm_61"):
        _aot.build([61], out="/nonexistent")


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_GPU, reason="no CUDA device")
def test_shipped_cubins_are_loaded_not_compiled(tmp_path, monkeypatch, rng):
    """Cubins built for this device's architecture (by NVRTC, with no use of the GPU) are what the
    engine runs: CuPy is never asked to compile dsort's code, and sorts match NumPy's."""
    import cupy

    from dsort.engine import _cuda as C
    from dsort.engine import cupy_engine as ce

    _nvrtc_or_skip()
    arch = C.target().arch
    if arch not in _aot.ARCHS:
        pytest.skip(f"sm_{arch} is not a shipped architecture")
    monkeypatch.setattr(_aot, "aot_dir", lambda: tmp_path)
    order = P.Order("long long")
    plan = P.sort_plan(order, 0, P.Mode.KEYS, C.target())
    wanted = {plan.blocksort.module, P.search_plan(order).check_sorted.module}
    if plan.tuning.ways == 4:  # its passes' kernels too
        wanted |= {k.module for k in P.merge4_plan(order, 0, P.Mode.KEYS, C.target()).kernels()}
    real = cupy.RawModule

    def no_compile(*a, **k):
        assert "code" not in k, "dsort's kernels were compiled at run time"
        return real(*a, **k)

    for cache in (_aot._manifest, C._module, C._function):
        cache.cache_clear()
    try:
        _aot.build([arch], only=lambda m: m in wanted)
        monkeypatch.setattr(cupy, "RawModule", no_compile)
        for n in (0, 1, 1000, 100_003):
            x = rng.integers(-(2**62), 2**62, n)
            assert np.array_equal(cupy.asnumpy(ce.sort(cupy.asarray(x))), np.sort(x, kind="stable"))
        assert C._module.cache_info().currsize >= 1
    finally:
        for cache in (_aot._manifest, C._module, C._function):
            cache.cache_clear()
