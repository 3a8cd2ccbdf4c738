"""The memory pools and streams a GPU task works with where cudf works too: CuPy's own pool
(:func:`own_pool`) or RMM's (:func:`cudf_owned`), and cudf's work on the default stream ordered
with this thread's (:func:`after_default_stream`, :func:`on_default_stream`). Imports no CuPy
until a function needs it.
"""

from __future__ import annotations

import contextlib


def own_pool():
    """A context in which this thread's CuPy arrays come from CuPy's own memory pool. Importing
    cudf makes RMM's allocator CuPy's, and RMM's default resource calls cudaMalloc and cudaFree
    for every array: each free waits for the whole GPU, so every worker thread's work on it waits
    for every other's. Where RMM has a pool (dask-cuda's ``rmm_pool_size``, ``rmm_async``), or
    CuPy's allocator is another, that allocator stays."""
    import cupy

    allocator = cupy.cuda.get_allocator()
    if getattr(allocator, "__name__", "") != "rmm_cupy_allocator":
        return contextlib.nullcontext()
    import rmm

    if not isinstance(rmm.mr.get_current_device_resource(), rmm.mr.CudaMemoryResource):
        return contextlib.nullcontext()
    return cupy.cuda.using_allocator(cupy.get_default_memory_pool().malloc)


def cudf_owned():
    """A context in which this thread's CuPy arrays come from RMM, cudf's allocator: arrays that
    become the memory of cudf columns (which wrap, not copy, a CuPy array), so that cudf frees
    them to RMM, never to CuPy's pool of :func:`own_pool`, where this thread's stream would take
    them again at once while cudf's stream may still read them."""
    import cupy
    from rmm.allocators.cupy import rmm_cupy_allocator

    return cupy.cuda.using_allocator(rmm_cupy_allocator)


def after_default_stream(fn, *args):
    """``fn(*args)`` with the CUDA default stream current, where cudf works (so its CuPy work on
    cudf's arrays follows cudf's in order), then this thread's current stream made to wait for it
    there: no host wait, no wait for other threads' streams, as a device synchronize would."""
    import cupy

    null = cupy.cuda.Stream.null
    with null:
        out = fn(*args)
    done = cupy.cuda.Event(disable_timing=True)
    done.record(null)
    cupy.cuda.get_current_stream().wait_event(done)
    return out


def on_default_stream(fn, *args):
    """``fn(*args)`` with the CUDA default stream current, waited for: cudf's work there on this
    thread's arrays done before the temporary ones go back to CuPy's pool."""
    import cupy

    null = cupy.cuda.Stream.null
    with null:
        out = fn(*args)
    null.synchronize()
    return out
