"""dsort.cluster: connecting to a cluster fails fast and clearly; the session's summary line."""

import time

import pytest

from dsort import cluster
from dsort.io import InputError


@pytest.mark.parametrize(
    "address,match",
    [
        ("scheduler", "not a scheduler address"),
        ("http://host:8786", "not a scheduler address"),
        ("tcp://host", "not a scheduler address"),
        ("tls://127.0.0.1:1", "a TLS scheduler needs the deployment's certificates"),
    ],
)
def test_bad_addresses_are_refused_before_connecting(address, match):
    with pytest.raises(InputError, match=match):
        cluster.open_client(address)


def test_nothing_listening_is_one_error_within_the_timeout():
    t = time.monotonic()
    with pytest.raises(InputError, match="cannot reach a dask scheduler at tcp://127.0.0.1:1"):
        cluster.open_client("tcp://127.0.0.1:1", timeout=1)
    assert time.monotonic() - t < 15


def test_the_session_describes_itself():
    s = cluster.Session(None, "LocalCluster", False, 2, 4, 2 << 30, None, None)
    assert s.describe() == "LocalCluster: 2 workers, 4 threads, memory limit 2.00 GiB per worker"
    g = cluster.Session(None, "LocalCUDACluster", True, 1, 1, 0, 8 << 30, None)
    assert g.describe() == "LocalCUDACluster (GPU): 1 workers, 1 threads, memory limit no limit per worker, device memory limit 8.00 GiB"


def test_a_reconnect_cancelled_by_the_close_is_not_printed_other_errors_are(capsys):
    """distributed's client logs a reconnect that its own close cancels as an error with a
    traceback; within a session that is dropped (the job's own one line says what failed), any
    other error of the client still shows, and after the session the client logs as before."""
    import asyncio
    import logging

    log = logging.getLogger("distributed.client")

    def both(tag):
        for exc in (asyncio.CancelledError(), OSError(f"{tag}: a real problem")):
            try:
                raise exc
            except BaseException:
                log.exception(f"{tag}: {type(exc).__name__}")

    handler = logging.StreamHandler()
    log.addHandler(handler)
    try:
        with cluster.connect(n_workers=1, threads_per_worker=1, cpu=True, quiet=True, dashboard_address=None):
            both("inside")
        both("after")
    finally:
        log.removeHandler(handler)
    err = capsys.readouterr().err
    assert "inside: OSError" in err and "inside: CancelledError" not in err, err
    assert "after: OSError" in err and "after: CancelledError" in err, err
