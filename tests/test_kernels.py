"""The kernel plans (``dsort.engine._kernels``), without a GPU: what is compiled is what is
launched, every name once, every size derived from the launch parameters and fitting the device."""

import re

import pytest

from dsort.engine import _kernels as P
from dsort.engine import _tuning, kernel_dir

# (compute capability, the most dynamic shared memory per CTA): H100, A100, RTX 30/40, T4.
TARGETS = [P.Target(90, 227 * 1024), P.Target(80, 163 * 1024), P.Target(86, 99 * 1024), P.Target(75, 64 * 1024)]
IDS = ["sm_90", "sm_80", "sm_86", "sm_75"]


def _kernels(target):
    return [k for plan in P.plans(target) for k in plan.kernels()]


def _source(name):
    return (kernel_dir() / name).read_text()


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_compiled_is_launched(target):
    """compile_all's modules hold exactly the kernels the plans launch, each kernel in one module."""
    modules = P.modules(target)
    assert len(set(modules)) == len(modules)
    compiled = [n for m in modules for n in m.names]
    assert len(compiled) == len(set(compiled)), "an instantiation in two modules or twice in one"
    launched = {(k.module, k.name) for k in _kernels(target)}
    assert launched == {(m, n) for m in modules for n in m.names}


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_shared_memory_fits_and_follows_the_tiles(target):
    for plan in P.plans(target):
        for k in plan.kernels():
            assert 0 <= k.smem <= target.smem_limit, k.name
            assert 32 <= k.threads <= 1024 and k.threads % 32 == 0, k.name
        if not isinstance(plan, P.SortPlan):
            continue
        t, kb = plan.tuning, plan.order.key_bytes
        assert plan.blocksort.tile == t.tile_sort == t.nt_blocksort * t.vt
        assert plan.merge_runs.tile == plan.merge_pair.tile == t.tile_merge == t.nt_merge * t.vt
        assert t.tile_sort % t.tile_merge == 0, "a merge tile would straddle two pairs of runs"
        assert (plan.blocksort.threads, plan.merge_runs.threads) == (t.nt_blocksort, t.nt_merge)
        keys = -(-t.tile_sort * kb // 16) * 16
        assert plan.blocksort.smem == keys + (t.tile_sort * 4 if plan.value_bytes else 0)
        keys = -(-t.tile_merge * kb // 16) * 16
        assert plan.merge_runs.smem == plan.merge_pair.smem == keys + t.tile_merge * plan.value_bytes
        for k in (plan.blocksort, plan.merge_runs, plan.merge_pair):  # the launch shape is in the name
            assert f", {k.threads}, {t.vt}, {'dsort::k' if plan.value_bytes else 'dsort::kNoValues'}" in k.name


def test_the_h100_runs_its_measured_tunings():
    target = TARGETS[0]
    for (kb, vb), t in P.tunings(target).items():
        assert t == _tuning.POLICIES[90][kb, vb]


@pytest.mark.parametrize("target", TARGETS[1:], ids=IDS[1:])
def test_smaller_devices_halve_the_threads(target):
    for (kb, vb), t in P.tunings(target).items():
        policy = _tuning.select(target.arch, kb, vb)
        assert t.vt == policy.vt and t.nt_merge <= policy.nt_merge and t.nt_blocksort <= policy.nt_blocksort
        mode = P.Mode.CARRY if vb else P.Mode.KEYS
        if t.nt_merge < policy.nt_merge:  # halved only because the next size up does not fit
            assert P.merge_smem(kb, vb, mode, 2 * t.tile_merge) > target.smem_limit
    assert P.tunings(P.Target(75, 64 * 1024))[16, 8] != _tuning.POLICIES[90][16, 8]


def test_each_plan_names_its_kernels():
    target = TARGETS[0]
    for order in P.orders():
        search = P.search_plan(order)
        assert search.check_sorted.name == f"dsort::k_check_sorted<{order.spelling}, {P.CHECK_THREADS}, {P.CHECK_ITEMS}>"
        assert search.check_sorted.tile == P.CHECK_THREADS * P.CHECK_ITEMS and search.check_sorted.threads == P.CHECK_THREADS
        assert search.searchsorted(True).name.endswith(", true>") and search.searchsorted(False).name.endswith(", false>")
        if order.key_bytes < 4:
            with pytest.raises(ValueError):
                P.sort_plan(order, 0, P.Mode.KEYS, target)
            continue
        keys = P.sort_plan(order, 0, P.Mode.KEYS, target)
        assert keys.partition is search.partition_runs and keys.merge_path is search.merge_path
        assert keys.blocksort_int64 is None and "dsort::NoValue" in keys.blocksort.name
        for vb, vtype in P.VALUE_TYPES.items():
            carry = P.sort_plan(order, vb, P.Mode.CARRY, target)
            iota = P.sort_plan(order, vb, P.Mode.IOTA, target)
            assert carry.blocksort.module == iota.blocksort.module != keys.blocksort.module  # one build per value type
            assert "dsort::kIota" in iota.blocksort.name and "dsort::kCarry" in iota.merge_runs.name
            assert iota.merge_runs == carry.merge_runs and iota.merge_pair != carry.merge_pair
            assert f"{vtype}, {vtype}>" in carry.blocksort.name
            if vb == 4:  # argsort's last write: 4-byte positions out as int64
                assert iota.blocksort_int64.name.endswith(f"{vtype}, long long>")
                assert iota.merge_runs_int64.name.endswith(f"{vtype}, long long>")
            else:
                assert iota.blocksort_int64 is None and iota.merge_runs_int64 is None
    with pytest.raises(ValueError):
        P.sort_plan(P.Order("int"), 4, P.Mode.KEYS, target)
    with pytest.raises(ValueError):
        P.sort_plan(P.Order("int"), 2, P.Mode.CARRY, target)


def test_names_are_templates_of_their_sources():
    for k in _kernels(TARGETS[0]):
        template = re.match(r"dsort::(k_\w+)(<|$)", k.name).group(1)  # a template, or a plain kernel
        assert any(re.search(rf"\b{template}\(", _source(s)) for s in k.module.sources), k.name


def test_value_modes_are_the_headers_enumerators():
    """Mode spells ValueMode's enumerators, whose numbers are in the header only."""
    header = _source("cta_merge.cuh")
    for mode in P.Mode:
        assert re.search(rf"\b{mode.value.removeprefix('dsort::')} = \d", header), mode


def test_orders_and_grids():
    assert P.Order("int", descending=1, na_first=True) == P.Order("int", True, False)  # no NaN in integers
    assert P.Order("double", na_first=True).spelling == "dsort::Order<double, false, true>"
    assert P.ctype_of("bool") == "unsigned char" and P.ctype_of("<f8") == "double"
    assert P.KEY_BYTES["dsort::Bytes16"] == 16 and P.KEY_BYTES["short"] == 2
    assert len(P.orders()) == len(set(P.orders())) == 26
    k = P.search_plan(P.Order("int")).merge_path
    assert (k.grid(0), k.grid(1), k.grid(P.QUERY_THREADS), k.grid(P.QUERY_THREADS + 1)) == (0, 1, 1, 2)
    check = P.search_plan(P.Order("int")).check_sorted
    assert check.grid(10**9, sms=132) == 132 * P.CHECK_CTAS_PER_SM  # persistent
    assert check.grid(5 * check.tile, sms=132) == 5 and check.grid(0, sms=132) == 1
    rows = P.rows_plan()
    assert rows.check[True].ctas_per_sm == P.ROWS_CHECK_CTAS_PER_SM
    assert rows.pack[16, 8].name == "dsort::k_pack_rows<dsort::Bytes16, unsigned long long>"


@pytest.mark.parametrize("target", TARGETS, ids=IDS)
def test_4_way_passes_follow_the_tunings_that_take_them(target):
    """A sort plan whose tuning merges 4 runs a pass is followed by its 4-way plan (compiled with
    the rest), of the sort plan's merge tiles and shared memory; one of 2 is not."""
    listed = P.plans(target)
    fours = 0
    for plan, after in zip(listed, listed[1:] + [None]):
        if not isinstance(plan, P.SortPlan):
            continue
        assert isinstance(after, P.Merge4Plan) == (plan.tuning.ways == 4), plan.merge_runs.name
        if plan.tuning.ways == 4:
            fours += 1
            assert (after.merge_runs.tile, after.merge_runs.smem) == (plan.merge_runs.tile, plan.merge_runs.smem)
            assert after.merge_runs.threads == plan.tuning.nt_merge
            assert after.partition.threads == after.partition.tile == P.QUERY_THREADS  # a thread a tile boundary
            assert (after.merge_runs_int64 is None) == (plan.merge_runs_int64 is None)
    assert fours, "the measured table takes 4-way passes for some keys"
