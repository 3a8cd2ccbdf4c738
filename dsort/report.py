"""What a finished file sort reports: :class:`SortReport` (counts, checksums, where the time went)
and :func:`format_report`, the summary ``dsort sort`` prints; public through
:mod:`dsort.service`."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .core import valsort
from .limits import fmt_bytes


@dataclass
class SortReport:
    """What one :func:`sort_files` did: counts, checksums, where the time went."""

    input: str
    output: Path
    format: str
    records: int
    bytes: int
    wall: float  # seconds, the call from its start to OUTPUT published
    input_summary: valsort.Summary
    output_summary: valsort.Summary
    where: str  # the executor, in words
    startup: float | None = None  # seconds from process start to this call
    phases: dict = field(default_factory=dict)  # phase -> wall seconds (run, cuts, merge, publish)
    stages: dict = field(default_factory=dict)  # stage -> seconds busy, summed over tasks
    runs: dict = field(default_factory=dict)  # tier -> number of runs

    @property
    def throughput(self) -> float:
        return self.bytes / self.wall if self.wall > 0 else 0.0


def process_age() -> float | None:
    """Seconds since this process started (Linux), for the report's start-up line."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def format_report(r: SortReport) -> str:
    """The summary a finished job prints: records, bytes, time, throughput, where the time went."""
    lines = [
        f"sorted {r.records:,} records ({fmt_bytes(r.bytes)}), duplicate keys "
        f"{r.output_summary.duplicates:,}"
    ]
    lines.append(
        f"wall time {r.wall:.2f} s, throughput {fmt_bytes(r.throughput)}/s "
        f"({r.records / r.wall if r.wall > 0 else 0:,.0f} records/s)"
        + (f"; process start-up before it {r.startup:.2f} s" if r.startup is not None else "")
    )
    if r.phases:
        lines.append(
            "phases (wall, each from its first task to its last: they overlap): "
            + ", ".join(f"{p} {s:.2f} s" for p, s in r.phases.items())
        )
    if r.stages:
        total = sum(r.stages.values()) or 1.0
        lines.append(
            "stages (busy, all threads): "
            + ", ".join(f"{k} {v:.2f} s ({100 * v / total:.0f}%)" for k, v in r.stages.items())
        )
    if r.runs:
        where = {"device": "on GPU", "host": "in memory", "disk": "on disk"}
        lines.append(
            "runs: " + ", ".join(f"{n} {where.get(t, 'on ' + t)}" for t, n in r.runs.items())
        )
    return "\n".join(lines)
