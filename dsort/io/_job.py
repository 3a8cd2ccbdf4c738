"""What a format module hands the command line: the tasks of one sort, and how to finish it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from dask.base import tokenize
from dask.delayed import Delayed, delayed


@dataclass
class SortJob:
    """``inputs``/``outputs``: one task per chunk, each giving a :class:`dsort.check.Summary` (the
    outputs' tasks write their chunk first). Computing both lists together reads the input once.
    ``finish`` runs on the client after every write (a manifest, say)."""

    records: int
    nbytes: int
    inputs: list[Delayed] = field(default_factory=list)
    outputs: list[Delayed] = field(default_factory=list)
    finish: Callable[[list], None] = lambda summaries: None


def per_block(prefix: str, fn, blocks, *args, **kwargs) -> list[Delayed]:
    """``fn(block_i, *args_i...)`` for every block, as tasks named ``(prefix-token, i)`` so the
    progress bars and the phase times group them by ``prefix``."""
    blocks = list(blocks)
    name = f"{prefix}-{tokenize(prefix, fn, [b.key for b in blocks], args, kwargs)}"
    out = []
    for i, b in enumerate(blocks):
        extra = [a[i] if isinstance(a, _PerBlock) else a for a in args]
        out.append(delayed(fn, pure=True)(b, *extra, dask_key_name=(name, i), **kwargs))
    return out


class _PerBlock(list):
    """An argument of :func:`per_block` that takes the i-th item for the i-th block."""


def each(items) -> _PerBlock:
    return _PerBlock(items)
