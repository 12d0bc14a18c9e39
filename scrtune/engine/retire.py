"""A bound on the checkpoint windows the engine holds: the latest `listed` of them by start
time, across processes. Older ones are retired: counted, and their write sizes added to one
table, so the summary's totals still cover them while memory stays flat in records (a window
with its tables is a few KiB; a run checkpointing every few hundred records would otherwise
hold one per few hundred records, and a hostile stream of regions one per event).

Retiring is deterministic whatever the order files, ranks or batches arrive in: a pass while
reading (past 1.5 x `listed` windows) keeps the latest 1.25 x `listed`, and `trim` at the end
keeps the latest `listed`, or up to `listed // 4` more, or fewer, so that the cut falls in a
gap between checkpoints rather than between the ranks of one (`_cut`). So a window among the
latest 1.25 x `listed` is never retired by a pass: a pass retires a window only when more
newer ones are held. A window that arrives after older ones were retired (another file,
another rank) is retired at the next pass or at the end if it is old enough, like any other.
"""

from __future__ import annotations

import msgspec
import numpy as np

from scrtune.engine.ioagg import IoAgg, add_pair_tables, add_write_sizes
from scrtune.engine.timeline import Timeline, Window

LISTED_WINDOWS = 32_768  # per run, every process's saves and restores together


class Retired(msgspec.Struct, kw_only=True):
    """What is kept of the windows no longer held."""

    saves: int = 0
    restores: int = 0
    until_us: int = 0  # the latest start among them
    reach_us: int = 0  # the latest end among them: a held window starting later is apart
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
        self.reach_us = max(self.reach_us, other.reach_us)
        self.save_write_calls += other.save_write_calls
        add_pair_tables(self.save_sizes, [other.save_sizes])
        add_pair_tables(self.restore_sizes, [other.restore_sizes])

    def take_all(self, windows: list[Window]) -> None:
        """Count the windows and add their write sizes, in order (_add_sizes)."""
        if not windows:
            return
        saves = [w.io for w in windows if w.kind == "save"]
        restores = [w.io for w in windows if w.kind != "save"]
        _add_sizes(self.save_sizes, saves)
        _add_sizes(self.restore_sizes, restores)
        self.until_us = max(self.until_us, max(w.io.start_us for w in windows))
        self.reach_us = max(self.reach_us, max(w.io.end_us for w in windows))
        self.saves += len(saves)
        self.restores += len(restores)
        self.save_write_calls += sum(agg.write_calls for agg in saves)


def _add_sizes(into: dict[int, list[int]], aggs: list[IoAgg]) -> None:
    """The write sizes of `aggs` added into `into` as adding their tables one by one would
    add them (new sizes in the order they first appear). When none is settled, the C pass
    sums the rows the fold holds back, in that order, without settling them: settling every
    table of a window about to be dropped was most of what retiring it cost."""
    if any(agg.sizes_table for agg in aggs):  # settled already, at least in part
        add_pair_tables(into, [agg.write_sizes for agg in aggs])
    else:
        add_write_sizes(into, aggs)


def held(timelines: dict[tuple[str, int], Timeline]) -> int:
    return sum(len(t.windows) for t in timelines.values())


def bound(timelines: dict[tuple[str, int], Timeline], retired: Retired, listed: int | None,
          count: int) -> int:
    """While reading: past 1.5 x `listed` windows, retire down to 1.25 x `listed`.
    Returns the windows held after."""
    if listed is None or count <= listed + listed // 2:
        return count
    return count - _retire(timelines, retired, count - (listed + listed // 4), slack=None)


def trim(timelines: dict[tuple[str, int], Timeline], retired: Retired,
         listed: int | None) -> None:
    """At the end: keep the latest `listed`, moved to a gap (`_cut`)."""
    count = held(timelines)
    if count and listed is not None and (count > listed or retired.windows):
        # even within the bound: a pass may have cut the latest checkpoint between ranks
        _retire(timelines, retired, max(count - listed, 0), slack=listed // 4)


def _retire(timelines: dict[tuple[str, int], Timeline], retired: Retired, excess: int,
            slack: int | None) -> int:
    """Retire the `excess` oldest windows (by start, then process), exactly when `slack` is
    None, else with the cut moved to a gap (`_cut`). Returns how many were retired."""
    keys = sorted(timelines)
    starts = np.array([w.io.start_us for k in keys for w in timelines[k].windows], np.int64)
    ends = np.array([w.io.end_us for k in keys for w in timelines[k].windows], np.int64)
    owner = np.repeat(np.arange(len(keys)), [len(timelines[k].windows) for k in keys])
    order = np.lexsort((owner, starts))
    cut = _cut(starts[order], ends[order], excess, slack,
               retired.reach_us if retired.windows else None)
    if cut <= 0:
        return 0
    per_owner = np.bincount(owner[order[:cut]], minlength=len(keys))
    retired.take_all([window for key, count in zip(keys, per_owner.tolist())
                      for window in timelines[key].retire_first(count)])
    return cut


def _cut(starts: np.ndarray, ends: np.ndarray, excess: int, slack: int | None,
         retired_reach_us: int | None) -> int:
    """How many of the windows (sorted by start) to retire, at a gap: no retired window, of
    these or of those retired before (reaching `retired_reach_us`), reaches the next one's
    start, so the cut falls between job checkpoints, not between the ranks of one. The
    largest such count from `excess` down to `excess - slack`; else the smallest above it
    (fewer listed); else all of them: the latest checkpoint is wider than what may be listed,
    or the windows never leave a gap (ranks saving at staggered times), and either way a
    checkpoint would be listed without some of its ranks.
    The counts looked at leave at most 1.25 x listed windows, the latest ones, which every
    order of reading holds (and retired windows are all older), so the cut is the same for
    any order."""
    if slack is None:  # a pass while reading: exactly the oldest
        return excess
    total = len(starts)
    counts = np.arange(max(0, excess - slack), total)  # cuts that leave a window
    before = np.maximum.accumulate(ends)[np.maximum(counts - 1, 0)]  # the furthest end before
    before[counts == 0] = np.iinfo(np.int64).min
    if retired_reach_us is not None:
        before = np.maximum(before, retired_reach_us)
    gaps = counts[before < starts[counts]]
    backward = gaps[gaps <= excess]
    if len(backward):
        return int(backward[-1])
    return int(gaps[0]) if len(gaps) else total
