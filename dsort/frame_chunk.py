"""Per-partition functions of the dataframe sort: what one task does (as :mod:`dsort.chunk` is
for arrays). Plain functions on pandas frames, testable without a cluster.

A *sorted part* is one input partition sorted by its keys (:class:`Sorted`: its rows and their
keys, in order: byte rows encoded at the partition's own string widths, so no pass over the data
comes first; or, for one column of NumPy numbers sorted on the host, one uint64 word per row,
:meth:`dsort.frame_keys.KeySpec.words`, which NumPy sorts as numbers, with no bytes to pack).
The exact cuts come from the keys alone, as for arrays: a regular sample of every part, windows
around every cut, the keys inside them (:mod:`dsort.plan`); every key that travels is first brought
to the common widths (:func:`dsort.frame_keys.widen`). Each output partition then takes its slice
of every part and merges them by their keys: stable, ties in input order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from . import chunk, plan
from . import engine as engines
from .engine import device as dev
from .frame_keys import KeySpec, common_widths, widen


@dataclass
class Sorted:
    """One input partition sorted: its rows, and their keys (NumPy byte rows, or words) in the same order."""

    frame: pd.DataFrame
    keys: np.ndarray
    widths: tuple

    def __sizeof__(self) -> int:
        """Its rows' and keys' bytes, as dask measures a frame: the scheduler places the tasks
        that read a sorted part (its sample, windows and slices) by the bytes they would move; a
        size of a few bytes would let it move whole parts between workers instead."""
        from dask.sizeof import sizeof

        return sizeof(self.frame) + self.keys.nbytes + object.__sizeof__(self)


@dataclass(frozen=True)
class Plan:
    """What the cuts and merges need, once the parts are sorted: their sizes, the common string
    widths, the sample spacing and the output partitions' sizes (balanced to within one row)."""

    sizes: tuple
    widths: tuple
    spacing: int
    out_sizes: tuple

    @property
    def targets(self):
        return plan.interior_targets(self.out_sizes)


def _argsort(keys, device):
    if device == "gpu":
        g = chunk.on_gpu(keys)
        return dev.to_host(engines.get(g).argsort(g))
    return engines.get(keys).argsort(keys)


def sort_part(part: pd.DataFrame, spec: KeySpec, widths=None, device=None, words=False) -> Sorted:
    """Partition ``part`` sorted stably by its keys (on the worker's GPU with ``device="gpu"``:
    the keys go there and the order comes back; the rows stay on the host). ``words``: keyed by
    words, not byte rows, where the spec allows (:attr:`KeySpec.word`) and the sort is on the host."""
    if words and spec.word and device is None:
        keys, widths = spec.words(part), (0,)
    else:
        keys, widths = spec.encode(part, widths)
    order = _argsort(keys, device)
    return Sorted(part.iloc[order], engines.take_rows(keys, order), widths)


def info(part: Sorted) -> tuple:
    """``(rows, string widths)``: what the plan needs of a part."""
    return len(part.keys), part.widths


def make_plan(partitions: int, *infos) -> Plan:
    sizes = tuple(int(n) for n, _ in infos)
    out_sizes = plan.balanced(sum(sizes), partitions)
    widths = common_widths([w for _, w in infos])
    return Plan(sizes, widths, plan.sample_spacing(sizes, max(len(out_sizes) - 1, 1)), out_sizes)


def part_keys(spec, part: Sorted, p: Plan, lo=0, hi=None, step=1):
    return widen(spec, np.ascontiguousarray(part.keys[lo:hi:step]), part.widths, p.widths)


def key_bytes(keys) -> bytes:
    """Keys (byte rows, or words) as bytes in the same order (``memcmp``): words big-endian."""
    return keys.astype(">u8").tobytes() if keys.ndim == 1 else keys.tobytes()


def from_key_bytes(blobs, like) -> np.ndarray:
    """The keys of :func:`key_bytes` ``blobs`` (one key each), of the kind of the keys ``like``."""
    joined = b"".join(blobs)
    if like.ndim == 1:
        return np.frombuffer(joined, ">u8").astype(np.uint64)
    return np.frombuffer(joined, np.uint8).reshape(len(blobs), like.shape[1])


def sample(spec: KeySpec, part: Sorted, p: Plan):
    """The part's regular sample (keys at positions 0, s, 2s, ...) at the common widths."""
    return part_keys(spec, part, p, step=p.spacing)


def bounds(p: Plan, *samples):
    """Windows ``(lo, hi)`` of every part around every cut (:func:`dsort.plan.windows`)."""
    return plan.windows(list(samples), p.sizes, p.spacing, p.targets)


def window(spec: KeySpec, part: Sorted, p: Plan, windows, q: int) -> list:
    """Part ``q``'s keys inside its window around every cut."""
    lo, hi = windows
    return [part_keys(spec, part, p, a, b) for a, b in zip(lo[:, q], hi[:, q])]


def cuts(p: Plan, windows, *window_keys):
    """The exact cut rows ``(outputs + 1, parts)``: output ``t`` takes rows ``[b[t, q], b[t + 1, q])``
    of part ``q``."""
    if len(p.sizes) < 2 or not len(p.targets):  # one part: its cuts are the targets themselves
        exact = np.asarray(p.targets, np.int64).reshape(-1, len(p.sizes))
    else:
        exact = plan.exact_cuts([[w[t] for w in window_keys] for t in range(len(p.targets))], windows[0], p.targets)
    return plan.boundaries(p.sizes, exact)


def take(spec: KeySpec, part: Sorted, p: Plan, cut, t: int, q: int):
    """Output ``t``'s slice of part ``q``: ``(rows, keys at the common widths)``."""
    a, b = int(cut[t, q]), int(cut[t + 1, q])
    return part.frame.iloc[a:b], part_keys(spec, part, p, a, b)


def sliced(*pieces) -> int:
    """A part's marker: every one of its slices is made (their count). The merges wait for every
    part's marker, so no worker runs a merge while another still waits for its slices."""
    return len(pieces)


def merge_after(ready, meta, cut, t, ignore_index, device, *pieces) -> pd.DataFrame:
    """:func:`merge`, once the markers ``ready`` (:func:`sliced`) are there."""
    return merge(meta, cut, t, ignore_index, device, *pieces)


def merge(meta: pd.DataFrame, cut, t: int, ignore_index: bool, device, *pieces) -> pd.DataFrame:
    """Output partition ``t``: its slices of every part (in part order) merged by their keys; with
    ``ignore_index`` its index is its rows' positions in the whole result."""
    given, pieces = pieces, [(f, k) for f, k in pieces if len(f)]
    if not pieces:  # an empty slice of the data, not the meta: dask may have given the meta other dtypes
        out = given[0][0] if given else meta.iloc[:0]
    elif len(pieces) == 1:
        out = pieces[0][0]
    else:
        keys = [k for _, k in pieces]
        if device == "gpu":  # merge-path merges of the keys, their positions carried
            order = dev.to_host(chunk.merge_order([chunk.on_gpu(k) for k in keys], False, "last")[1])
        else:  # one stable sort of the sorted slices: NumPy's timsort merges the runs it finds
            order = engines.get(keys[0]).argsort(np.concatenate(keys))
        out = pd.concat([f for f, _ in pieces]).iloc[order]
    if ignore_index:
        start = int(cut[t].sum())
        out = out.set_axis(pd.RangeIndex(start, start + len(out)))
    return out
