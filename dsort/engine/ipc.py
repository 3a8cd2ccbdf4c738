"""Device arrays shared between the processes of one host (CUDA IPC).

A worker process keeps the run it sorted on its GPU; the other worker processes of the machine
open it by its handle and copy the slices they need device to device (over NVLink where the GPUs
differ): no file, no host copy. A handle names its GPU by PCI bus id, which every process agrees
on, whatever its CUDA_VISIBLE_DEVICES says. An opened array is closed as soon as its reader has
copied out of it, or kept open by a reader that reads it again and again (a worker's store of a
sort, until the sort is over): the owner frees it only once no reader maps it.

Another GPU's array is mapped into the reading thread's own GPU (CUDA enables peer access for
that mapping), not opened on the GPU that holds it: a process that opened there made a CUDA context,
and took memory, on every other GPU it read from (BENCHMARKS.md section 7: the first sort on two
GPUs, and what an IPC read costs).

* :func:`share` – a device array copied into an allocation of its own, and its handle
  (:class:`Shared`).
* :func:`opened` – other processes' shared arrays opened here, counted per process.
* :func:`shortfall` – how far a GPU's used memory (every process's) is from room for more.

Imports no CuPy until a function needs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import os
import threading
import uuid

import numpy as np

from .device import gpu_count


@dataclasses.dataclass(frozen=True)
class Shared:
    """What another process needs to open a device array: its allocation's IPC handle, shape,
    dtype, its GPU's PCI bus id, the machine (:func:`host_id`: bus ids repeat across machines), and
    the owning process (:data:`PROCESS`: it reads the array directly, as CUDA does not let a
    process open its own handles; process ids repeat across containers)."""

    handle: bytes
    shape: tuple
    dtype: str
    bus: str
    host: str
    owner: str


PROCESS = uuid.uuid4().hex  # this process, among all that may share device arrays


@functools.cache
def host_id() -> str:
    """This machine: its name and, where Linux tells it, its boot id."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot = f.read().strip()
    except OSError:
        boot = ""
    return f"{os.uname().nodename}/{boot}"


def bus_id(device: int) -> str:
    """The PCI bus id of GPU ``device`` (this process's numbering): the same GPU in every
    process."""
    import cupy

    return cupy.cuda.Device(device).pci_bus_id


@functools.cache
def _buses() -> dict:
    return {bus_id(d): d for d in range(gpu_count())}


def local_device(shared: Shared) -> int | None:
    """This process's number of the GPU that holds ``shared``; None where that GPU is not visible
    here (another machine's, or hidden by CUDA_VISIBLE_DEVICES)."""
    return _buses().get(shared.bus) if shared.host == host_id() else None


def total_memory(device: int) -> int:
    """GPU ``device``'s memory in bytes."""
    import cupy

    with cupy.cuda.Device(device):
        return int(cupy.cuda.runtime.memGetInfo()[1])


def shortfall(device: int, nbytes: int, fraction: float) -> int:
    """How many bytes ``nbytes`` more on GPU ``device`` would take its used memory past
    ``fraction`` of the whole (0 or less: room): every process's memory, less the blocks that this
    process's CuPy pool holds free (they are room: :func:`share` gives them back to CUDA where it
    needs them). Counted as used, a worker's blocks cached from its last sort sent a repeated
    sort's runs off the GPU."""
    import cupy

    with cupy.cuda.Device(device):
        free, total = cupy.cuda.runtime.memGetInfo()
        cached = cupy.get_default_memory_pool().free_bytes()
    return int(total - free - cached + nbytes - fraction * total)


def share(x):
    """``(copy, Shared)``: device array ``x`` copied into an allocation of its own (CuPy's pool
    hands out pieces of larger ones, which IPC cannot name), and that copy's handle; None where
    the GPU has no room for the copy. The owner keeps ``copy`` alive for as long as other
    processes may open it."""
    import cupy

    with x.device:
        mem = _allocation(x.nbytes)
        if mem is None:
            return None
        own = cupy.ndarray(x.shape, x.dtype, cupy.cuda.MemoryPointer(mem, 0))
        own[...] = x
        cupy.cuda.get_current_stream().synchronize()  # the copy is whole before any reader opens it
        handle = cupy.cuda.runtime.ipcGetMemHandle(mem.ptr)
        return own, Shared(
            bytes(handle), tuple(x.shape), x.dtype.str, bus_id(x.device.id), host_id(), PROCESS
        )


def _allocation(nbytes: int):
    """A CUDA allocation of its own on the current GPU, the pool's free blocks given back to CUDA
    first where CUDA has too little left; None where it has no room even then."""
    import cupy

    for attempt in range(2):
        try:
            return cupy.cuda.memory.Memory(nbytes)
        except (cupy.cuda.memory.OutOfMemoryError, cupy.cuda.runtime.CUDARuntimeError):
            pass  # CuPy cleared CUDA's last error as it raised: no error of later calls
        if attempt == 0:
            cupy.get_default_memory_pool().free_all_blocks()
    return None


class SharedGone(OSError):
    """A shared device array that could not be opened (its process has ended, say)."""


# how opening a handle whose allocation is gone fails (its process ended: invalid resource handle
# on the H200s; an invalid value or a failed mapping on other drivers)
GONE = ("cudaErrorInvalidResourceHandle", "cudaErrorInvalidValue", "cudaErrorMapBufferObjectFailed")


# handle -> [device pointer, device it is mapped in, readers]: one mapping per process, counted
_opened: dict = {}
_opened_lock = threading.Lock()


@functools.cache
def _reads_directly(here: int, d: int) -> bool:
    """Whether GPU ``here`` can map GPU ``d``'s memory (NVLink or PCIe peer access); asks no
    context."""
    import cupy

    return bool(cupy.cuda.runtime.deviceCanAccessPeer(here, d))


def mapping_device(d: int) -> int:
    """The GPU this thread maps another process's array of GPU ``d`` into: its current GPU where
    that one reads ``d``'s memory directly, else ``d`` itself."""
    import cupy

    here = cupy.cuda.Device().id
    return here if here == d or _reads_directly(here, d) else d


def _open(s: Shared, d: int, kept: set | None = None) -> tuple:
    """``(device pointer, the GPU it is mapped in)`` of ``s`` (on GPU ``d``), counted; counted once
    for ``kept`` (a reader's set of mappings it keeps open: :func:`opened`)."""
    import cupy

    with _opened_lock:
        got = _opened.get(s.handle)
        if got is None:
            at = mapping_device(d)
            with cupy.cuda.Device(at):
                try:
                    # peer access enabled lazily, for this mapping
                    ptr = cupy.cuda.runtime.ipcOpenMemHandle(s.handle)
                except cupy.cuda.runtime.CUDARuntimeError as e:
                    if not any(why in str(e) for why in GONE):  # out of memory, say: not a lost run
                        raise
                    raise SharedGone(
                        f"a device array shared on GPU {s.bus} could not be opened: {e}"
                    ) from None
            got = _opened[s.handle] = [ptr, at, 0]
        if kept is None or s.handle not in kept:
            got[2] += 1
            if kept is not None:
                kept.add(s.handle)
        return got[0], got[1]


def _close(handle: bytes) -> None:
    import cupy

    with _opened_lock:
        got = _opened[handle]
        got[2] -= 1
        if got[2] == 0:
            del _opened[handle]
            with cupy.cuda.Device(got[1]):
                cupy.cuda.runtime.ipcCloseMemHandle(got[0])


def close_kept(kept: set) -> None:
    """Close the mappings a reader kept open (:func:`opened` with ``kept``), emptying ``kept``.
    Only then may their owners free them: CUDA leaves a mapping of freed memory undefined."""
    with _opened_lock:
        handles = list(kept)
        kept.clear()
    for h in handles:
        _close(h)


@contextlib.contextmanager
def opened(shares, kept: set | None = None):
    """``[(array, device)]``: each of another process's ``shares`` mapped into this thread's GPU
    (:func:`mapping_device`; ``device`` as this process numbers it), or ``(None, None)`` where the
    GPU that holds it is not visible here. Copy out of them inside the block, on each array's
    device or into host memory; every such device's current stream is synchronized at its end.
    Threads of one process opening the same array share one mapping, closed by the last of them;
    with ``kept`` (a set of handles) the mappings stay open, counted once in ``kept``, until
    :func:`close_kept`: an open costs many times a merge's copy of its slice, and every merge of a
    sort reads every run (BENCHMARKS.md section 7)."""
    if not shares:  # nothing to open: no CuPy needed
        yield []
        return
    import cupy

    out, handles, devices = [], [], set()
    try:
        for s in shares:
            d = local_device(s)
            if d is None:
                out.append((None, None))
                continue
            ptr, at = _open(s, d, kept)
            if kept is None:
                handles.append(s.handle)
            devices.add(at)
            nbytes = int(np.prod(s.shape)) * np.dtype(s.dtype).itemsize
            mem = cupy.cuda.UnownedMemory(ptr, nbytes, None, at)
            out.append((cupy.ndarray(s.shape, s.dtype, cupy.cuda.MemoryPointer(mem, 0)), at))
        yield out
    finally:
        for d in devices | ({cupy.cuda.Device().id} if devices else set()):
            with cupy.cuda.Device(d):
                cupy.cuda.get_current_stream().synchronize()
        for h in handles:
            _close(h)
