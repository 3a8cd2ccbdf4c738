"""dsort.io.records: fixed-width binary records, their sizes checked, read in bounded blocks, and
checked block by block against a plain Python count (``summary_reference``)."""

import numpy as np
import pytest

from dsort.io import gen
from dsort.io import InputError
from dsort.io import records as recio

from .summary_reference import combined, expected


def test_record_sizes_are_checked(tmp_path):
    (tmp_path / "r.bin").write_bytes(bytes(250))
    with pytest.raises(InputError, match="not a multiple of the record size 100"):
        recio.lengths([tmp_path / "r.bin"], 100)
    assert recio.lengths([tmp_path / "r.bin"], 50) == [5]
    with pytest.raises(InputError, match="--key-size"):
        recio.check_sizes(100, 0)


def test_read_blocks_are_bounded(tmp_path):
    data = gen.record_chunk(0, 1000, seed=1)
    data.tofile(tmp_path / "a.bin")
    data[:300].tofile(tmp_path / "b.bin")
    x = recio.read([tmp_path / "a.bin", tmp_path / "b.bin"], 100, 256)
    assert x.chunks[0] == (256, 256, 256, 232, 256, 44)
    np.testing.assert_array_equal(x.compute(scheduler="sync"), np.concatenate([data, data[:300]]))


def test_lengths_of_random_files(tmp_path, rng):
    size = int(rng.integers(1, 120))
    counts = [0, 1, *(int(v) for v in rng.integers(0, 500, 4))]
    for i, c in enumerate(counts):
        (tmp_path / f"f{i}").write_bytes(bytes(c * size))
    files = [tmp_path / f"f{i}" for i in range(len(counts))]
    assert recio.lengths(files, size) == counts
    assert recio.lengths([], size) == []
    for bad in (0, -size):
        with pytest.raises(InputError, match=f"--record-size must be positive, got {bad}"):
            recio.lengths(files, bad)
    extra = int(rng.integers(1, size)) if size > 1 else None
    if extra:
        (tmp_path / "odd").write_bytes(bytes(counts[-1] * size + extra))
        with pytest.raises(InputError, match=f"{counts[-1]:,} records and {extra} bytes left over"):
            recio.lengths([*files, tmp_path / "odd"], size)


def test_key_size_bounds(rng):
    record = int(rng.integers(1, 200))
    for key in (1, record, int(rng.integers(1, record + 1))):
        recio.check_sizes(record, key)
    for key in (0, -1, record + 1, record + int(rng.integers(1, 100))):
        with pytest.raises(InputError, match=rf"between 1 and --record-size \({record}\), got {key}"):
            recio.check_sizes(record, key)


@pytest.mark.parametrize("record_size, key_size", [(100, 10), (12, 12), (7, 1), (1, 1)])
def test_read_is_the_records_of_the_files(tmp_path, rng, record_size, key_size):
    counts = [int(v) for v in rng.integers(0, 300, int(rng.integers(1, 4)))]
    parts = [rng.integers(0, 256, (c, record_size), dtype=np.uint8) for c in counts]
    files = []
    for i, p in enumerate(parts):
        files.append(tmp_path / f"f{i}.bin")
        files[-1].write_bytes(p.tobytes())
    for rows_per_block in (1, int(rng.integers(2, 100)), 10**6):
        x = recio.read(files, record_size, rows_per_block)
        assert x.dtype == np.uint8 and x.shape == (sum(counts), record_size)
        assert max(x.chunks[0]) <= rows_per_block
        np.testing.assert_array_equal(x.compute(scheduler="sync"), np.concatenate(parts))


def _records(rng, n, record_size, key_size, case):
    """Records whose keys come from a small alphabet (many ties), then put in ``case``'s order."""
    recs = rng.integers(0, 256, (n, record_size), dtype=np.uint8)
    recs[:, :key_size] = rng.choice(np.array([0, 1, 0x7F, 0xFF], np.uint8), (n, key_size))
    if case == "equal" and n:
        recs[:, :key_size] = recs[0, :key_size]
    if case in ("sorted", "reverse"):
        keys = [bytes(r[:key_size]) for r in recs]
        order = sorted(range(n), key=keys.__getitem__, reverse=case == "reverse")
        recs = recs[np.array(order, dtype=np.int64)] if n else recs
    return recs


@pytest.mark.parametrize("case", ["random", "sorted", "reverse", "equal"])
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("n", [0, 1, 2, 257, "random"])
def test_check_tasks_count_like_python(tmp_path, rng, case, descending, n):
    n = int(rng.integers(3, 3000)) if n == "random" else n
    record_size = int(rng.integers(1, 40))
    key_size = int(rng.integers(1, min(record_size, 3) + 1))
    recs = _records(rng, n, record_size, key_size, case)
    cut = int(rng.integers(0, n + 1))  # two files: blocks never straddle them, the check does
    (tmp_path / "a").write_bytes(recs[:cut].tobytes())
    (tmp_path / "b").write_bytes(recs[cut:].tobytes())
    want = expected([bytes(r[:key_size]) for r in recs], [bytes(r) for r in recs], descending)
    for rows_per_block in (int(rng.integers(1, 8)), int(rng.integers(8, 200)), 10**6):
        files = [tmp_path / "a", tmp_path / "b"]
        tasks = recio.check_tasks(files, record_size=record_size, key_size=key_size, rows_per_block=rows_per_block, descending=descending)
        assert combined(tasks, descending) == want
    if case == ("reverse" if descending else "sorted"):
        assert want[2] == 0  # the reference itself: records in the order checked are in order
    with pytest.raises(InputError, match="--key-size"):
        recio.check_tasks([tmp_path / "a"], record_size=record_size, key_size=record_size + 1, rows_per_block=10)
