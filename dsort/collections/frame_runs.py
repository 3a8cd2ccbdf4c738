"""The external sort of dask dataframes whose rows vary in width (strings, objects): runs of
pickled blocks beside their sort keys.

A partition's run is two things: its sorted rows in a file of pickled blocks of at most
:data:`BLOCK_ROWS` rows (pickle keeps every pandas dtype, the index and the column labels as they
are; a slice reads only the blocks it overlaps), and its sort keys (fixed-width byte rows whose
unsigned order is the wanted order) in the run store, where the cuts and merges find them as for
arrays (:mod:`dsort.collections.external`). The graph is
:func:`dsort.collections.passes.merge_tasks`'s.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

import numpy as np

from ..core import cuts, plan
from ..core import frame_chunk as FC
from ..core import filesort as F
from ..core import runs as R
from ..core.frame_wire import unwire, wire
from . import remote

BLOCK_ROWS = 1 << 16


@dataclass(frozen=True)
class FrameJob(F.RunJob):
    """What the tasks of one external dataframe sort need: a :class:`~dsort.core.filesort.RunJob`
    (no ``layout``: rows vary; its ``spacing`` is the chains' too, their pieces sampled at its
    multiples; its ``group_ranges`` zeros, sized by the group cuts), and the frame's."""

    spec: object  # the sort's :class:`~dsort.core.frame_keys.KeySpec`
    widths: tuple | None  # string widths for every partition's keys; None: each its own
    partitions: int  # output partitions, balanced to within one row
    ignore_index: bool = False
    device: str | None = None
    starts: tuple = (0,)  # the first output of every merge group
    first_piece: int = 0


def _rows_path(job: FrameJob, run) -> str:
    """A run's (or piece's) pickled rows: beside its keys' file where it has one (on the disk of
    the worker that made it), else in this process's store directory; named for its making."""
    where = os.path.dirname(run.path) if run.path else R.store(job.store).directory
    return os.path.join(where, f"frame-{run.index:06d}-{run.made}.pickles")


def frame_run(job: FrameJob, p: int, *parts) -> tuple:
    """Consecutive partitions ``parts`` as run ``p``: their keys, a stable sort of their rows by
    them, the rows written in blocks beside the run store's files (:func:`_write_rows`), the keys
    kept as run ``p``; ``(run, the keys' string widths, their kinds)`` (the kinds: the types of
    the object columns' values, which the cuts check across runs: :func:`frame_cuts`)."""
    s = FC.sort_part(list(parts), job.spec, job.widths, job.device)
    made = _write_rows(job, p, s.frame)
    return (
        R.store(job.store).put(p, s.keys, sample=s.keys[:: job.spacing].copy(), made=made),
        s.widths,
        s.kinds,
    )


def _write_rows(job: FrameJob, p: int, frame) -> str:
    """Run (or piece) ``p``'s sorted rows as a file of pickled blocks (:func:`block_rows` rows
    each), the blocks' byte offsets and their count and rows last; the making's name (its
    keys are put in the run store under it)."""
    import pickle

    made = R.new_making()
    block = block_rows(len(frame), len(job.starts))
    offsets = [0]
    with open(R.store(job.store).file_for(p, made, "frame", ".pickles"), "wb") as f:
        for b in range(0, len(frame), block):
            # arrays in object columns as Arrow
            f.write(pickle.dumps(wire(frame.iloc[b : b + block]), protocol=5))
            offsets.append(f.tell())
        f.write(np.asarray(offsets, "<i8").tobytes())
        f.write(np.asarray([len(offsets), block], "<i8").tobytes())
    return made


def block_rows(rows: int, outputs: int) -> int:
    """Rows per pickled block of a partition's run: about one output's share of it (a slice then
    reads at most two blocks: unpickling a block costs its whole size), at most :data:`BLOCK_ROWS`,
    at least 1024 (or 1 where BLOCK_ROWS is smaller)."""
    return int(max(min(BLOCK_ROWS, 1024), min(BLOCK_ROWS, -(-rows // max(outputs, 1)))))


def _read_rows(path: str, lo: int, hi: int):
    """Rows ``[lo, hi)`` of a run's rows file: the blocks they lie in, unpickled, then cut."""
    import pickle

    with open(path, "rb") as f:
        f.seek(-16, os.SEEK_END)
        count, block = (int(x) for x in np.frombuffer(f.read(16), "<i8"))
        f.seek(-16 - 8 * count, os.SEEK_END)
        offsets = np.frombuffer(f.read(8 * count), "<i8")
        first, last = lo // block, (hi - 1) // block
        f.seek(offsets[first])
        data = f.read(int(offsets[last + 1] - offsets[first]))
    blocks, at = [], 0
    for b in range(first, last + 1):
        size = int(offsets[b + 1] - offsets[b])
        blocks.append(unwire(pickle.loads(data[at : at + size])))
        at += size
    rows = FC.concat(blocks)  # pandas' or cudf's (unpickled onto this worker's GPU)
    return wire(rows.iloc[lo - first * block : hi - first * block])  # it may travel to the merge


def _run_rows(job: FrameJob, run, lo: int, hi: int):
    """Rows ``[lo, hi)`` of a run's sorted rows, or of a chain's (read from the pieces they
    span)."""
    if not isinstance(run, R.Chain):
        return unwire(remote.read_where_it_is(run, _rows_path(job, run), _read_rows, lo, hi))
    return FC.concat(
        [
            unwire(remote.read_where_it_is(p, _rows_path(job, p), _read_rows, a, b))
            for p, a, b in run.spans(lo, hi)
        ]
    )


def frame_cuts(job: FrameJob, *made):
    """The cuts of ``job.partitions`` balanced output partitions: ``(cut rows, runs, the keys'
    string widths per run, the common widths, the runs' kinds joined)``, from the runs' samples and
    the keys in their windows (every key brought to the common widths first); runs whose keys do
    not compare are refused first (:func:`dsort.core.frame_keys.join_kinds`). ``made``: the runs'
    (or chains') ``(handle, string widths, kinds)``."""
    from ..core.frame_keys import common_widths, join_kinds, widen

    kinds = join_kinds(job.spec, [k for _, _, k in made])
    runs = [r for r, _, _ in made]
    have = [w for _, w, _ in made]
    sizes = [r.rows for r in runs]
    p = FC.Plan(
        tuple(sizes),
        common_widths(have),
        job.spacing,
        plan.balanced(sum(sizes), job.partitions),
        starts=job.starts,
    )
    if len(runs) > 1 and len(p.targets):
        samples = [widen(job.spec, r.sample, w, p.widths) for r, w in zip(runs, have)]
        p = replace(p, windows=FC.bounds(p, *samples))
        # [t][q], each run's keys at its own widths
        found = cuts.read_windows(R.store(job.store), None, runs, *p.windows)
        windows = [
            [widen(job.spec, found[t][q], have[q], p.widths) for t in range(len(p.targets))]
            for q in range(len(runs))
        ]
        cut = FC.cuts(p, *windows)
    else:
        cut = FC.cuts(p)
    return cut, [R.bare(r) for r in runs], have, p.widths, kinds


def _frame_slices(job: FrameJob, cut, t: int) -> list:
    """Range ``t``'s slices of every run (or chain) of ``cut`` (:func:`frame_cuts`): ``(rows,
    keys at the common widths)`` of each run that has rows in it, in run order."""
    from ..core.frame_keys import widen

    bounds, runs, have, want, _ = cut
    pieces = [
        (q, run, int(bounds[t, q]), int(bounds[t + 1, q]))
        for q, run in enumerate(runs)
        if bounds[t + 1, q] > bounds[t, q]
    ]
    keys = R.store(job.store).read_many([(run, lo, hi) for _, run, lo, hi in pieces])
    return [
        (_run_rows(job, run, lo, hi), widen(job.spec, np.ascontiguousarray(k), have[q], want))
        for (q, run, lo, hi), k in zip(pieces, keys)
    ]


def frame_merge(job: FrameJob, cut, t: int, meta):
    """Merge group ``t``: its slices of every run's sorted rows, merged by their keys."""
    out = FC.merge(meta, cut[0], t, job.ignore_index, job.device, *_frame_slices(job, cut, t))
    R.finish(job.store, t, len(job.starts), cut[1])
    return out


# A frame's first merge pass (more runs than one pass takes): each group of runs is cut into as many
# ranges as it has runs (frame_group_cuts), each range's slices merged into one piece of the group's
# chain, its rows pickled as a run's are and its keys (at the group's common widths) kept in the run
# store (frame_group_merge), and the chain handed on with those widths and the group's kinds
# (frame_chain).


def frame_group_cuts(job: FrameJob, g: int, made):
    """:func:`frame_cuts` of group ``g``'s runs (``made``) into its first-pass ranges."""
    n = len(job.group_ranges[g])
    return frame_cuts(replace(job, partitions=n, starts=tuple(range(n))), *made)


def frame_group_merge(job: FrameJob, cut, g: int, t: int, meta):
    """Range ``t`` of group ``g``: its slices merged by their keys and kept as piece ``t`` of the
    group's chain (rows pickled, keys in the run store with the chain's sample positions):
    ``(piece, the keys' string widths, the group's kinds)``."""
    slices = [(f, k) for f, k in _frame_slices(job, cut, t) if len(f)]
    want = cut[3]
    if not slices:
        frame, keys = meta.iloc[:0], np.empty((0, job.spec.width(want)), np.uint8)
    elif len(slices) == 1:
        frame, keys = slices[0]
    else:
        order = FC.merge_order([k for _, k in slices], job.device)
        frame = FC.gather([f for f, _ in slices], order)
        keys = np.concatenate([k for _, k in slices])[order]
    p = job.piece_index(g, t)
    made = _write_rows(job, p, frame)
    start, step = plan.sample_positions(int(cut[0][t].sum()), job.spacing)
    return R.store(job.store).put(p, keys, sample=keys[start::step].copy(), made=made), want, cut[4]


def frame_chain(job: FrameJob, g: int, results):
    """Group ``g``'s chain from its pieces (the group merges' ``results``): ``(Chain, string
    widths, kinds)``, as a run's. In the embedded sort (one process) the group's runs are freed,
    every piece being made (see :func:`dsort.core.filesort.chain_task`)."""
    s = R.store(job.store)
    if s.address is None:
        a, b = job.groups[g]
        s.free(range(a, b))  # their rows' files too
    _, widths, kinds = results[0]
    return (
        R.Chain(
            job.store.job, g, tuple(r for r, _, _ in results), row_bytes=job.spec.width(widths)
        ),
        widths,
        kinds,
    )


def output_sizes(job, cut) -> tuple:
    """Rows of every output partition of an external frame sort (balanced), from its cuts."""
    return plan.balanced(int(cuts.range_starts(cut[0])[-1]), job.partitions)
