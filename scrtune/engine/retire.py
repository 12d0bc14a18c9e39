"""A bound on the checkpoint windows the engine holds: the latest `listed` of them by start
time, across processes. Older ones are retired: counted, and their write sizes added to one
table, so the summary's totals still cover them while memory stays flat in records (a window
with its tables is a few KiB; a run checkpointing every few hundred records would otherwise
hold one per few hundred records, and a hostile stream of regions one per event).

Retiring is deterministic whatever the order files, ranks or batches arrive in: a pass while
reading (past 1.5 x `listed` windows) keeps the latest 1.25 x `listed`, and `trim` at the end
keeps the latest `listed`, or up to `listed // 8` more so that the cut falls in a gap between
checkpoints rather than between the ranks of one. So a window among the latest
1.125 x `listed` is never retired by a pass: a pass retires a window only when more newer ones
are held. A window that arrives after older ones were retired (another file, another rank)
is retired at the next pass or at the end if it is old enough, like any other.
"""

from __future__ import annotations

import msgspec
import numpy as np

from scrtune.engine.ioagg import add_pair_tables
from scrtune.engine.timeline import Timeline, Window

LISTED_WINDOWS = 32_768  # per run, every process's saves and restores together


class Retired(msgspec.Struct, kw_only=True):
    """What is kept of the windows no longer held."""

    saves: int = 0
    restores: int = 0
    until_us: int = 0  # the latest start among them
    save_write_calls: int = 0
    save_sizes: dict[int, list[int]] = {}  # size_bytes -> [calls, bytes], as IoAgg
    restore_sizes: dict[int, list[int]] = {}

    @property
    def windows(self) -> int:
        return self.saves + self.restores

    def add(self, other: Retired) -> None:
        self.saves += other.saves
        self.restores += other.restores
        self.until_us = max(self.until_us, other.until_us)
        self.save_write_calls += other.save_write_calls
        add_pair_tables(self.save_sizes, [other.save_sizes])
        add_pair_tables(self.restore_sizes, [other.restore_sizes])

    def take(self, window: Window) -> None:
        self.until_us = max(self.until_us, window.io.start_us)
        if window.kind == "save":
            self.saves += 1
            self.save_write_calls += window.io.write_calls
            add_pair_tables(self.save_sizes, [window.io.write_sizes])
        else:
            self.restores += 1
            add_pair_tables(self.restore_sizes, [window.io.write_sizes])


def held(timelines: dict[tuple[str, int], Timeline]) -> int:
    return sum(len(t.windows) for t in timelines.values())


def bound(timelines: dict[tuple[str, int], Timeline], retired: Retired, listed: int | None,
          count: int) -> int:
    """While reading: past 1.5 x `listed` windows, retire down to 1.25 x `listed`.
    Returns the windows held after."""
    if listed is None or count <= listed + listed // 2:
        return count
    return count - _retire(timelines, retired, count - (listed + listed // 4), slack=0)


def trim(timelines: dict[tuple[str, int], Timeline], retired: Retired,
         listed: int | None) -> None:
    """At the end: keep the latest `listed` (up to `listed // 8` more, to end at a gap)."""
    count = held(timelines)
    if listed is not None and count > listed:
        _retire(timelines, retired, count - listed, slack=listed // 8)


def _retire(timelines: dict[tuple[str, int], Timeline], retired: Retired, excess: int,
            slack: int) -> int:
    """Retire the `excess` oldest windows (by start, then process), or up to `slack` fewer
    when that moves the cut to a gap no held window spans. Returns how many were retired."""
    keys = sorted(timelines)
    starts = np.concatenate([_column(timelines[k], "start_us") for k in keys])
    ends = np.concatenate([_column(timelines[k], "end_us") for k in keys])
    owner = np.repeat(np.arange(len(keys)), [len(timelines[k].windows) for k in keys])
    order = np.lexsort((owner, starts))
    cut = _cut(starts[order], ends[order], excess, slack)
    if cut <= 0:
        return 0
    per_owner = np.bincount(owner[order[:cut]], minlength=len(keys))
    for key, count in zip(keys, per_owner.tolist()):
        for window in timelines[key].retire_first(count):
            retired.take(window)
    return cut


def _column(timeline: Timeline, name: str) -> np.ndarray:
    return np.fromiter((getattr(w.io, name) for w in timeline.windows), dtype=np.int64,
                       count=len(timeline.windows))


def _cut(starts: np.ndarray, ends: np.ndarray, excess: int, slack: int) -> int:
    """How many of the windows (sorted by start) to retire: the largest count from `excess`
    down to `excess - slack` at which no retired window reaches the next one's start, or
    `excess` when there is no such gap."""
    if not slack:
        return excess
    reach = np.maximum.accumulate(ends[:excess])  # reach[i]: the furthest end of [0, i]
    counts = np.arange(max(1, excess - slack), excess + 1)
    gaps = np.flatnonzero(reach[counts - 1] < starts[counts])
    return int(counts[gaps[-1]]) if len(gaps) else excess
