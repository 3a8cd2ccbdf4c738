"""Sorting dask arrays: ``sort``, ``argsort`` and ``sort_by_key``.

Semantics are those of NumPy's stable sort of the whole (concatenated) array, in the engine's
order (:mod:`dsort.engine.keys`): equal keys keep their input order, in descending order too; NaN
last (``na_position="last"``) or first; byte keys as unsigned bytes. Keys are 1-D dask arrays of
a supported dtype, or byte keys as 2-D ``uint8`` arrays of shape ``(n, width)`` ("byte rows").
Chunks may be NumPy (CPU workers) or CuPy (GPU workers) arrays.

Results are lazy dask arrays with exactly the input's chunks along axis 0, the input's dtype and
chunk type. Chunk sizes must be known to build the graph; unknown (NaN) sizes are computed first.

Each chunk is sorted by the engine of its type: NumPy chunks on the CPU, CuPy chunks on their
GPU. ``device="gpu"`` sorts NumPy chunks on the workers' GPUs (``LocalCUDACluster``): each chunk
is copied to its worker's GPU once, runs are sorted and merged there, and the output chunks come
back as NumPy arrays, so keys held in host memory need not be converted by hand.

>>> import dask.array as da, numpy as np, dsort
>>> x = da.from_array(np.array([3, 1, 2, 1]), chunks=2)
>>> dsort.sort(x).compute()
array([1, 1, 2, 3])
"""

from __future__ import annotations

import math

import dask.array as da
import numpy as np
from dask.array.utils import meta_from_array

from .. import engine as engines
from ..engine import keys as K
from ..engine.device import is_device_array
from . import stores
from .graph import check_options, sort_graph


def sort(
    x,
    *,
    descending=False,
    na_position="last",
    strategy="auto",
    device=None,
    local_directory=None,
    memory_limit="auto",
):
    """Stable sort of a dask array, as NumPy's stable sort of the whole array.

    Parameters
    ----------
    x : dask.array.Array
        1-D keys of a supported dtype, or 2-D ``uint8`` byte rows (compared as unsigned bytes);
        NumPy or CuPy chunks.
    descending : bool, default False
        Largest first. Equal keys keep their input order either way.
    na_position : {"last", "first"}, default "last"
        Where NaN goes (float keys).
    strategy : {"auto", "memory", "external"}, default "auto"
        ``"memory"``: sorted runs and merges in dask's memory; ``"external"``: runs kept outside
        it (on the GPUs, in host memory within ``memory_limit``, then in files under
        ``local_directory``), for arrays bigger than memory; ``"auto"`` chooses.
    device : {None, "gpu"}, default None
        ``"gpu"``: NumPy chunks sorted on the workers' GPUs and handed back as NumPy chunks;
        CuPy chunks are sorted on their GPU in any case.
    local_directory : str, optional
        Where an external sort's runs that do not fit in memory go (default: dask's
        ``temporary-directory``, else the system's).
    memory_limit : int, str or float, default "auto"
        Host memory an external sort's runs may hold in one process: bytes, a size (``"4GB"``), a
        fraction of the available memory, ``"auto"`` (a quarter of it) or 0 (files only).

    Returns
    -------
    dask.array.Array
        Lazy: ``x``'s values in order, with ``x``'s chunks, dtype and chunk type.

    Examples
    --------
    >>> import dask.array as da, numpy as np, dsort
    >>> dsort.sort(da.from_array(np.array([3, 1, 2]), chunks=2), descending=True).compute()
    array([3, 2, 1])
    """
    x = _check_keys(x)
    opts = _options(x, None, na_position, strategy, device, local_directory, memory_limit)
    ((graph, name),) = sort_graph(
        x, descending=descending, na_position=na_position, device=device, **opts
    )
    return da.Array(graph, name, x.chunks, meta=x._meta)


def argsort(
    x,
    *,
    descending=False,
    na_position="last",
    strategy="auto",
    device=None,
    local_directory=None,
    memory_limit="auto",
):
    """The positions that sort a dask array stably: ``x[argsort(x)]`` equals ``sort(x)``.

    Parameters
    ----------
    x : dask.array.Array
        Keys, as for :func:`sort`.
    descending, na_position, strategy, device, local_directory, memory_limit
        As for :func:`sort`.

    Returns
    -------
    dask.array.Array
        Lazy int64 positions into ``x``, with ``x``'s chunks along its first axis.
    """
    x = _check_keys(x)
    opts = _options(
        x, np.dtype(np.int64), na_position, strategy, device, local_directory, memory_limit
    )
    _, (graph, name) = sort_graph(
        x, positions=True, descending=descending, na_position=na_position, device=device, **opts
    )
    return da.Array(
        graph, name, (x.chunks[0],), meta=meta_from_array(x._meta, ndim=1, dtype=np.int64)
    )


def sort_by_key(
    keys,
    values,
    *,
    descending=False,
    na_position="last",
    strategy="auto",
    device=None,
    local_directory=None,
    memory_limit="auto",
):
    """Stable sort of ``keys``, carrying ``values`` along.

    Parameters
    ----------
    keys : dask.array.Array
        Keys, as for :func:`sort`.
    values : dask.array.Array
        One row per key, of any dtype, trailing dimensions allowed (``(n, 90)`` uint8 payloads,
        say); rechunked to the keys' chunks where they differ.
    descending, na_position, strategy, device, local_directory, memory_limit
        As for :func:`sort`.

    Returns
    -------
    (dask.array.Array, dask.array.Array)
        Lazy: the sorted keys, and the values in the keys' order, each with the keys' chunks.
    """
    keys = _check_keys(keys)
    values = _check_values(keys, values)
    opts = _options(keys, values, na_position, strategy, device, local_directory, memory_limit)
    (kg, kname), (vg, vname) = sort_graph(
        keys, values, descending=descending, na_position=na_position, device=device, **opts
    )
    out_values = da.Array(vg, vname, (keys.chunks[0],) + values.chunks[1:], meta=values._meta)
    return da.Array(kg, kname, keys.chunks, meta=keys._meta), out_values


def _options(keys, values, na_position, strategy, device, local_directory, memory_limit) -> dict:
    """Checked options, and the strategy ``"auto"`` stands for: ``"external"`` for keys sorted on
    the GPUs of several worker processes of one host (the runs stay on their GPUs and the merges
    copy their slices GPU to GPU through CUDA IPC, where the in-memory graph moves them between
    workers through host memory and TCP: BENCHMARKS.md section 7), and for NumPy chunks bigger
    than a quarter of the memory the sort runs in (keys, values and their sorted copies would not
    fit); else the in-memory graph's own choice."""
    check_options(strategy, device, na_position)
    one_process, memory = stores.where_it_runs()
    on_gpus = device == "gpu" or is_device_array(keys._meta)
    if strategy == "auto" and on_gpus and stores.gpu_workers_of_one_host():
        strategy = "external"
    if strategy == "auto" and isinstance(keys._meta, np.ndarray):
        nbytes = keys.nbytes + (
            values.itemsize * len(keys)
            if isinstance(values, np.dtype)
            else getattr(values, "nbytes", 0)
        )
        if nbytes > memory // 4:
            strategy = "external"
    budget = run_memory(memory_limit) if strategy == "external" else 0
    return dict(strategy=strategy, local_directory=local_directory, host_budget=budget)


def run_memory(memory_limit) -> int:
    """Bytes of host memory an external sort's runs may hold before they go to disk: 0 (files
    only) where the graph runs in several processes (a run in one worker's memory is not in
    another's) or ``memory_limit`` is 0; else ``memory_limit`` (bytes, a size, or a fraction of
    the available memory), ``"auto"`` a quarter of it."""
    one_process, memory = stores.where_it_runs()
    if not one_process or memory_limit == 0:
        return 0
    from .config import parse_size

    budget = parse_size(memory_limit, memory, "memory_limit")
    return memory // 4 if budget is None else budget


def _chunk_type(x, what):
    try:
        return engines.get(x._meta).name
    except TypeError as err:
        raise TypeError(f"{what} must have NumPy or CuPy chunks: {err}") from None


def _known_sizes(x):
    if any(math.isnan(c) for c in x.chunks[0]):
        x = x.compute_chunk_sizes()
    return x


def _check_keys(x):
    if not isinstance(x, da.Array):
        raise TypeError(
            f"dsort sorts dask arrays, got {type(x).__name__}; wrap it with dask.array.from_array"
        )
    _chunk_type(x, "keys")
    if x.ndim == 2 and x.dtype == np.uint8:
        if x.shape[1] == 0:
            raise ValueError("byte-row keys need at least one byte per row")
        if len(x.chunks[1]) > 1:
            x = x.rechunk({1: -1})
    elif x.ndim == 1:
        K.check_dtype(x.dtype)
    else:
        raise ValueError(
            f"keys must be a 1-D dask array (or 2-D uint8 byte rows), got shape {x.shape} of "
            f"{x.dtype}"
        )
    return _known_sizes(x)


def _check_values(keys, values):
    if not isinstance(values, da.Array):
        raise TypeError(f"values must be a dask array, got {type(values).__name__}")
    if values.ndim < 1:
        raise ValueError("values must have one row per key, got a 0-d array")
    if _chunk_type(values, "values") != _chunk_type(keys, "keys"):
        raise TypeError("keys and values must have the same chunk type (both NumPy or both CuPy)")
    values = _known_sizes(values)
    if values.shape[0] != keys.shape[0]:
        raise ValueError(
            f"values must have one row per key: {keys.shape[0]} keys, values of shape "
            f"{values.shape}"
        )
    if values.chunks[0] != keys.chunks[0] or any(len(c) > 1 for c in values.chunks[1:]):
        values = values.rechunk((keys.chunks[0],) + tuple(-1 for _ in values.shape[1:]))
    return values
