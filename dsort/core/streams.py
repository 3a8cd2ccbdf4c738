"""Where a task's time goes, and the CUDA stream it works on.

* :class:`Stopwatch` – seconds per stage of one task, summed over all tasks in the end.
* :func:`on_stream` – a block run on a GPU with this thread's own stream there (tasks on threads
  overlap), waited for at its end; :func:`sync` waits for this thread's work on a GPU.
"""

from __future__ import annotations

import contextlib
import threading
import time

from ..engine import pools


class Stopwatch:
    """Seconds per stage of one task (read, copy in, sort, ...), summed over all tasks in the
    end."""

    def __init__(self):
        self.times: dict[str, float] = {}
        self._t = time.perf_counter()

    def lap(self, stage: str) -> None:
        t = time.perf_counter()
        self.times[stage] = self.times.get(stage, 0.0) + t - self._t
        self._t = t


_local = threading.local()


@contextlib.contextmanager
def on_stream(gpu):
    """Run the block on CUDA device ``gpu`` with this thread's own stream there (tasks on threads
    overlap; one stream per thread and device, reused, so CuPy's memory pool reuses its blocks)
    and CuPy's pool (:func:`~dsort.engine.pools.own_pool`), waiting for its work at the end; on
    the CPU where ``gpu`` is None."""
    if gpu is None:
        yield
        return
    import cupy

    with cupy.cuda.Device(gpu):
        streams = _local.__dict__.setdefault("streams", {})
        stream = streams.get(gpu)
        if stream is None:
            stream = streams[gpu] = cupy.cuda.Stream(non_blocking=True)
        with stream, pools.own_pool():
            yield
            stream.synchronize()


def sync(gpu):
    """Wait for this thread's work on GPU ``gpu`` (its current stream); nothing where ``gpu`` is
    None."""
    if gpu is not None:
        import cupy

        cupy.cuda.get_current_stream().synchronize()
