"""dsort.io.gen: the test data's layout, determinism and skew."""

import numpy as np

from dsort.io import gen


def test_gen_records_layout_and_determinism(tmp_path):
    a = gen.record_chunk(0, 3000, seed=7)
    np.testing.assert_array_equal(a[1000:], gen.record_chunk(1000, 2000, seed=7))
    assert not np.array_equal(a, gen.record_chunk(0, 3000, seed=8))
    assert bytes(a[123, 10:26]) == b"%016X" % 123
    assert bytes(a[5, -2:]) == b"\r\n"
    gen.records(2500, tmp_path / "r.bin", seed=7)
    np.testing.assert_array_equal(np.fromfile(tmp_path / "r.bin", np.uint8).reshape(-1, 100), a[:2500])
    skew = gen.record_chunk(0, 5000, seed=1, skew=True)
    assert np.bincount(skew[:, 0]).max() > 0.3 * len(skew)  # uniform keys: about 1/256
    gen.npy(1000, tmp_path / "x.npy", dtype="int32", seed=3)
    x = np.load(tmp_path / "x.npy")
    assert x.dtype == np.int32 and len(x) == 1000
    np.testing.assert_array_equal(x, gen.array_chunk(0, 1000, seed=3, dtype="int32"))
