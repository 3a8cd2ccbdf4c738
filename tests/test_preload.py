"""dsort.preload: a dask worker started with ``--preload dsort.preload`` allocates Arrow's arrays
from glibc's heaps (a plain one from mimalloc, Arrow's default), and sorts Parquet as any other."""

from __future__ import annotations

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")
distributed = pytest.importorskip("distributed")


def _backend():
    import pyarrow

    return pyarrow.default_memory_pool().backend_name


@pytest.mark.parametrize("preload", [True, False])
def test_a_preloaded_worker_allocates_from_glibc_and_sorts(tmp_path, rng, preload):
    from dsort.service import sort_files

    n = 5000
    src = tmp_path / "t.parquet"
    pq.write_table(pa.table({"k": rng.integers(0, 100, n), "row": np.arange(n)}), src, row_group_size=900)
    kw = {"preload": ["dsort.preload"]} if preload else {}
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None, **kw) as cluster:
        with distributed.Client(cluster) as client:
            backends = set(client.run(_backend).values())
            assert (backends == {"system"}) if preload else ("system" not in backends), backends
            sort_files(src, tmp_path / "out", by=["k"], client=client, progress=False, stream=open("/dev/null", "w"))
    got = pq.read_table(tmp_path / "out").to_pandas()
    want = pq.read_table(src).to_pandas().sort_values("k", kind="stable").reset_index(drop=True)
    assert got.equals(want)
