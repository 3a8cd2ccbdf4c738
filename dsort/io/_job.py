"""What a format module hands the command line: the tasks of one sort, and how to finish it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from dask.base import tokenize
from dask.delayed import Delayed

from ..collections import tasks


@dataclass
class SortJob:
    """``inputs``/``outputs``: one task per chunk, each giving a :class:`dsort.core.valsort.Summary`
    (the outputs' tasks write their chunk first). Computing both lists together reads the input
    once. ``finish`` runs on the client after every write (a manifest, say); ``comparable`` makes
    the outputs' summaries ready for :func:`dsort.core.valsort.combine` (Parquet: the parts' end
    rows encoded at one width)."""

    records: int
    nbytes: int
    inputs: list[Delayed] = field(default_factory=list)
    outputs: list[Delayed] = field(default_factory=list)
    finish: Callable[[list], None] = lambda summaries: None
    # the outputs' summaries, ready for valsort.combine
    comparable: Callable[[list], list] = lambda summaries: summaries


def per_block(phase: str, fn, blocks, *args) -> list[Delayed]:
    """``fn(block_i, *args_i...)`` for every block (``Delayed`` partitions), as tasks named
    ``(phase-token, i)`` (:func:`dsort.collections.tasks.each`)."""
    blocks = list(blocks)
    token = tokenize(phase, fn, [b.key for b in blocks], args)
    rows = [
        (tasks.ref(b.key), *[a[i] if isinstance(a, _PerBlock) else a for a in args])
        for i, b in enumerate(blocks)
    ]
    return tasks.each(phase, token, fn, rows, dependencies=blocks)


class _PerBlock(list):
    """An argument of :func:`per_block` that takes the i-th item for the i-th block."""


def each(items) -> _PerBlock:
    return _PerBlock(items)
