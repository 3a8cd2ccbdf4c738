"""The tuning policies (``dsort.engine._tuning``): CUB's selector over compute capabilities."""

import pytest

from dsort.engine import _tuning
from dsort.engine._tuning import Tuning


@pytest.mark.parametrize("arch", sorted(_tuning.POLICIES))
def test_every_table_is_complete_and_well_shaped(arch):
    table = _tuning.POLICIES[arch]
    assert set(table) == {(kb, vb) for kb in (4, 8, 16) for vb in (0, 4, 8)}
    for t in table.values():
        assert t.vt % 2 == 1, "VT odd: conflict-free transposes through shared memory"
        for nt in (t.nt_blocksort, t.nt_merge):
            assert nt & (nt - 1) == 0 and 32 <= nt <= 1024
        assert t.nt_blocksort % t.nt_merge == 0, "the blocksort tile must be a multiple of the merge tile"
        assert (t.tile_sort, t.tile_merge) == (t.nt_blocksort * t.vt, t.nt_merge * t.vt)
        assert t.ways in (2, 4), "the passes merge 2 or 4 runs (kernel_mergesort.cu, kernel_merge4.cu)"


def test_h100_values():
    assert _tuning.select(90, 4, 0) == Tuning(512, 256, 21, 4)
    assert _tuning.select(90, 4, 4) == Tuning(512, 256, 21, 4)
    assert _tuning.select(90, 8, 0) == Tuning(512, 256, 17, 4)
    assert _tuning.select(90, 16, 8) == Tuning(256, 128, 17, 4)


def test_newest_measured_not_newer_than_the_device_else_the_oldest(monkeypatch):
    a, b = Tuning(128, 64, 7), Tuning(256, 128, 9)
    tables = {80: {(4, 0): a}, 90: {(4, 0): b}}
    monkeypatch.setattr(_tuning, "POLICIES", tables)
    assert [_tuning.policy_arch(x) for x in (70, 75, 80, 86, 89, 90, 100, 120)] == [80, 80, 80, 80, 80, 90, 90, 90]
    assert _tuning.select(86, 4, 0) is a and _tuning.select(100, 4, 0) is b
    with pytest.raises(KeyError):
        _tuning.select(90, 4, 2)
