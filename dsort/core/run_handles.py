"""Handles of sorted runs, small enough to travel through a task graph, and how a store keeps them.

* :class:`Layout` – fixed-width rows, and where their key is.
* :class:`Run` – one sorted run: where it is (its tier), how many rows, its regular sample.
* :class:`Chain` – consecutive sorted pieces read as one run (a first merge pass's group).
* :class:`StoreConfig` – a job's budgets per tier, its directory, and the cluster it runs on.
* :class:`Cluster` – what a store asks of the cluster: this worker, letting go of the thread,
  and slices of runs on other machines' disks. :data:`LOCAL` is one process; dask's is
  :mod:`dsort.collections.remote`.
"""

from __future__ import annotations

import contextlib
import uuid
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from .. import engine as engines


@dataclass(frozen=True)
class Layout:
    """Fixed-width rows and where their key is: the first ``key_bytes`` bytes of a row, one
    element of ``dtype`` where it is set (a ``.npy`` element, a dask array's key) or else
    compared as unsigned bytes (a record's key); any bytes after the key are its payload."""

    row_bytes: int
    key_bytes: int
    dtype: str | None = None

    def keys(self, rows):
        """The sort keys of ``rows`` (``(n, row_bytes)`` uint8, NumPy or CuPy) in the engines'
        spelling: a 1-D array of ``dtype``, or C-contiguous byte rows ``(n, key_bytes)``."""
        if self.key_bytes < self.row_bytes:
            rows = engines.contiguous(rows[:, : self.key_bytes])
        return rows if self.dtype is None else rows.view(self.dtype).reshape(-1)

    def rows_of(self, keys):
        """Rows whose bytes are the keys (only where the key is the whole row)."""
        return keys.view(np.uint8).reshape(len(keys), self.row_bytes)

    @property
    def payload(self) -> bool:
        """True when rows carry bytes beyond the key (they then follow the key's order)."""
        return self.key_bytes < self.row_bytes


def new_making() -> str:
    """A new making's name: a run's (:attr:`Run.made`), and the files made for it carry it."""
    return uuid.uuid4().hex[:16]


@dataclass(frozen=True)
class Run:
    """A handle to one sorted run: small enough to travel through the task graph."""

    job: str
    index: int
    rows: int
    tier: str
    path: str | None = None
    device: int | None = None
    # keys at run positions 0, s, 2s, ... (NumPy)
    sample: object = field(default=None, repr=False, compare=False)
    worker: str | None = None  # the dask worker whose own disk holds it (a store with ``local``)
    # its rows' width where the store's differs (a dataframe's keys at its own string widths)
    row_bytes: int | None = None
    shared: object = None  # a shared run's handle (:class:`dsort.engine.ipc.Shared`)
    # this making of it (a compute of the job)
    made: str = field(default_factory=new_making, compare=False)

    def __sizeof__(self) -> int:
        """Its sample's bytes too: dask places the tasks beside a run by them (see
        :func:`dsort.collections.tasks.task_beside`)."""
        return object.__sizeof__(self) + (
            self.sample.nbytes if isinstance(self.sample, np.ndarray) else 0
        )


@dataclass(frozen=True)
class Chain:
    """Consecutive sorted pieces read as one run: a group of runs merged by a first pass (more runs
    than one merge pass takes, :mod:`dsort.core.filesort`). A slice of it is read from the pieces
    it spans, joined; its sample is theirs, end to end."""

    job: str
    index: int
    pieces: tuple  # the pieces' Run handles, in order
    tier: str = "chain"
    worker: None = None  # its pieces say where they are
    row_bytes: int | None = None

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.pieces)

    @property
    def made(self) -> str:
        return self.pieces[0].made if self.pieces else ""

    @property
    def sample(self):
        got = [p.sample for p in self.pieces if p.sample is not None]
        return np.concatenate(got) if got else None

    def __sizeof__(self) -> int:
        return object.__sizeof__(self) + sum(p.__sizeof__() for p in self.pieces)

    def spans(self, lo: int, hi: int) -> list:
        """``(piece, lo, hi)`` of the pieces that rows ``[lo, hi)`` of the chain cover, in order;
        at least one (an empty slice of the first piece where ``hi <= lo``)."""
        out, at = [], 0
        for p in self.pieces:
            a, b = max(lo - at, 0), min(hi - at, p.rows)
            if a < b:
                out.append((p, a, b))
            at += p.rows
        return out or [(self.pieces[0], 0, 0)]


def bare(run):
    """``run`` (a :class:`Run` or :class:`Chain`) without its sample: what the merges need."""
    if isinstance(run, Chain):
        return replace(run, pieces=tuple(replace(p, sample=None) for p in run.pieces))
    return replace(run, sample=None)


def flat(items) -> tuple[list, list | None]:
    """``items`` (``(run, lo, hi)``) with every chain's slice replaced by its pieces' slices, and
    where each item's parts lie in the result (None where there is no chain)."""
    if not any(isinstance(run, Chain) for run, _, _ in items):
        return list(items), None
    flat, where = [], []
    for run, lo, hi in items:
        parts = run.spans(int(lo), int(hi)) if isinstance(run, Chain) else [(run, lo, hi)]
        where.append((len(flat), len(flat) + len(parts)))
        flat.extend(parts)
    return flat, where


def joined(out: list, where) -> list:
    """The slices read for :func:`flat`'s items, each chain's parts joined in order."""
    if where is None:
        return out
    return [out[a] if b - a == 1 else engines.get(out[a]).concatenate(out[a:b]) for a, b in where]


@dataclass(frozen=True)
class StoreConfig:
    """How a job's runs are kept: budgets in bytes (device: per GPU) and the directory for the disk
    tier."""

    job: str
    directory: str
    row_bytes: int
    host_budget: int = 0
    device_budget: int = 0
    # on a dask cluster: runs on each worker's own local directory, read where they are
    local: bool = False
    # runs on the GPUs, shared by this host's processes, while a GPU's use stays within this
    shared_fraction: float = 0.0
    # and while its shared runs on that GPU stay within these bytes (a float: that share of it)
    shared_budget: int | float | None = None
    cluster: Cluster | None = None  # the cluster its tasks run on (None: :data:`LOCAL`)


class RunsGone(OSError):
    """Runs kept on the GPUs by another process that cannot be opened (``indices``)."""

    def __init__(self, message: str, indices):
        super().__init__(message)
        self.indices = tuple(indices)


class Cluster(Protocol):
    """What a run store asks of the cluster its tasks run on (a picklable object: it travels in
    :class:`StoreConfig` to every worker)."""

    def worker(self):
        """The worker running this task (``address``, ``local_directory``), or None."""

    def seceded(self):
        """A context in which this task lets go of its worker thread (and takes one back after)."""

    def fetch(self, store, items, recover) -> dict:
        """``{item: NumPy rows}`` of the slices ``items`` that lie on other machines' disks."""

    def everywhere(self) -> bool:
        """Whether runs on other workers are read there even where their files are visible."""


class Local:
    """One process, no cluster: no worker, nothing to let go of, no other machine."""

    def worker(self):
        return None

    def seceded(self):
        return contextlib.nullcontext()

    def fetch(self, store, items, recover) -> dict:
        return {}

    def everywhere(self) -> bool:
        return False


LOCAL = Local()


def cluster_of(config: StoreConfig) -> Cluster:
    """The cluster of a store's config (:data:`LOCAL` where it names none)."""
    return config.cluster or LOCAL
