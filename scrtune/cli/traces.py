"""Traces read for a command that needs their events (recommend, study, goodput): the replay's
warnings go to stderr, and a file set without a single trace record is an error, since an
answer from nothing would look like one from something."""

from __future__ import annotations

import sys

from scrtune.engine.replay import ReplayOptions, replay
from scrtune.engine.summary import Summary, no_events_reason
from scrtune.errors import UsageError
from scrtune.events.pool import default_workers
from scrtune.events.reader import expand_paths
from scrtune.heap import hold_freed_memory


def checked(summary: Summary, purpose: str) -> Summary:
    """Warn of what the replay warns of; refuse a summary of no record."""
    for warning in summary.warnings:
        sys.stderr.write(f"warning: {warning}\n")
    if not summary.records:
        raise UsageError(f"{no_events_reason(summary)}: nothing to {purpose}")
    return summary


def trace_files(paths: list[str]) -> list[str]:
    """The trace files of paths, directories or globs, for a command about to read them: from
    here the process keeps freed memory for reuse (each block's columns are freed a moment
    after they are made; scrtune/heap.py)."""
    files = expand_paths(paths)
    hold_freed_memory()
    return files


def replay_for(paths: list[str], purpose: str, workers: int = 0) -> Summary:
    """Replay trace files, directories or globs for `purpose` ("recommend from", ...)."""
    options = ReplayOptions(workers=workers or default_workers())
    return checked(replay(trace_files(paths), options), purpose)
