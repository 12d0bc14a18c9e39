"""One process's checkpoint windows, and the I/O calls they claim.

DFTracer writes a region when it ends, after every call inside it, so calls cannot be
attributed when they are read. They wait as pending rows; a save or restore region claims the
rows inside its interval whichever arrives first, and an outer region absorbs the windows of
regions nested in it (`checkpoint.save` absorbs `checkpoint.save.model`), except a driver: a
region marked by its name only (DLIO's `DLIOBenchmark._checkpoint_write`, category
`dlio_benchmark`) around checkpoint-category regions is dropped, and the checkpoints it wraps
stay separate (its compute between them is no checkpoint time). Rows older than the
horizon behind the newest event of the process can no longer be claimed (no checkpoint
region is assumed to last longer than the horizon); they settle into per-file clusters, from
which checkpoints are found by path when a process has no checkpoint regions at all.
Memory therefore grows with the horizon, not with the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import msgspec
import numpy as np

from scrtune.engine.held import held_sums
from scrtune.engine.ioagg import CallTable, IoAgg, Rows, add_grouped, fast_agg
from scrtune.engine.windows import FreshWindows, Window, place, time_span_us

DEFAULT_HORIZON_US = 600 * 1_000_000
MAX_PENDING_ROWS = 500_000  # per process: a second bound, for streams whose time stands still
CLUSTER_GAP_US = 2 * 1_000_000  # calls on one file further apart than this are separate uses
# pending rows arriving in small batches (a lightly loaded daemon) join the last part until it
# holds this many: parts stay few, and their overhead small beside the rows
PART_MIN_ROWS = 4096


class TimelineState(msgspec.Struct, kw_only=True):
    """A Timeline as bytes-friendly data, for reducing statistics across MPI ranks."""

    host: str
    pid: int
    windows: list[Window]
    clusters: dict[str, list[IoAgg]]
    newest_us: int
    pending: list[bytes]  # Rows columns; names and files index the sender's string tables
    retired: int = 0  # windows retired (engine/retire.py): the process had checkpoint regions
    oldest_us: int = 0  # the earliest time seen; 0: none (a state from before it was kept)


class PendingRows:
    """Calls no window has claimed yet, in arrival order, kept as the parts they arrived in
    with each part's time bounds: a claim or a settling touches only the parts its times
    reach, not every pending row at every batch (a horizon's worth of rows wait here)."""

    def __init__(self) -> None:
        self._parts: list[Rows] = []
        self._bounds: list[tuple[int, int, int]] = []  # per part: first ts, last ts, first end
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def rows(self) -> Rows:
        """All of them, as one part (kept so: asking twice copies once)."""
        if len(self._parts) > 1:
            joined = Rows.concat(self._parts)
            self._parts, self._bounds, self._count = [], [], 0
            self._add(joined)
        return self._parts[0] if self._parts else Rows.empty()

    def append(self, rows: Rows) -> None:
        if not len(rows):
            return
        if self._parts and len(self._parts[-1]) < PART_MIN_ROWS:
            last = self._parts.pop()
            self._bounds.pop()
            self._count -= len(last)
            rows = Rows.concat([last, rows])
        self._add(rows)

    def claim(self, windows: list[Window], table: CallTable) -> None:
        """Offer the pending rows to new windows: the parts from the first to the last whose
        start times fall within the windows' span are joined, claimed from, and replaced by
        what is left, in their place."""
        if not windows or not self._count:
            return
        first_us = min(w.io.start_us for w in windows)
        last_us = max(w.io.end_us for w in windows)
        reached = [i for i, (low, high, _) in enumerate(self._bounds)
                   if high >= first_us and low <= last_us]
        if reached:
            self._replace(reached[0], reached[-1] + 1,
                          lambda rows: _claim(rows, windows, table))

    def settle(self, watermark_us: int) -> Rows:
        """Take out the rows that ended before the watermark, in arrival order."""
        reached = [i for i, (_, _, end) in enumerate(self._bounds) if end < watermark_us]
        if not reached:
            return Rows.empty()
        done: list[Rows] = []

        def keep_open(rows: Rows) -> Rows:
            ended = rows.end_us < watermark_us
            done.append(rows.take(ended))
            return rows.take(~ended)

        self._replace(reached[0], reached[-1] + 1, keep_open)
        return Rows.concat(done)

    def _replace(self, begin: int, stop: int, keep: Callable[[Rows], Rows]) -> None:
        """Parts [begin, stop) joined, passed through `keep`, and what it keeps put back."""
        parts = self._parts[begin:stop]
        left = keep(Rows.concat(parts))
        self._count += len(left) - sum(len(p) for p in parts)
        self._parts[begin:stop] = [left] if len(left) else []
        self._bounds[begin:stop] = [_bounds(left)] if len(left) else []

    def _add(self, rows: Rows) -> None:
        self._parts.append(rows)
        self._bounds.append(_bounds(rows))
        self._count += len(rows)


def _bounds(rows: Rows) -> tuple[int, int, int]:
    return int(rows.ts_us.min()), int(rows.ts_us.max()), int(rows.end_us.min())


@dataclass
class Timeline:
    """State of one (host, pid). `windows` is sorted by start; `windows[open_from:]` are open
    (within the horizon: they may still absorb nested regions); older ones are closed and kept
    as arrays, consulted only by calls older than every open window (another file's calls)."""

    host: str
    pid: int
    windows: list[Window] = field(default_factory=list)
    clusters: dict[str, list[IoAgg]] = field(default_factory=dict)
    newest_us: int = 0
    oldest_us: int = 0  # with newest_us, the process's lifetime: relaunches are not ranks
    pending: PendingRows = field(default_factory=PendingRows)
    open_from: int = 0
    retired: int = 0
    _closed_starts: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
    _closed_ends: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))

    def state(self, names: list[str], files: list[str]) -> TimelineState:
        """As data, its held sums as rows coded by `names` and `files` (the statistics'
        string tables: engine/held.py)."""
        for window in self.windows:
            window.io.held_rows = held_sums(window.io, names, files)
        return TimelineState(
            host=self.host,
            pid=self.pid,
            windows=self.windows,
            clusters=self.clusters,
            newest_us=self.newest_us,
            pending=self.pending.rows().to_wire(),
            retired=self.retired,
            oldest_us=self.oldest_us,
        )

    def retire_first(self, count: int) -> list[Window]:
        """Take out the `count` oldest windows (engine/retire.py bounds how many are held)."""
        if count <= 0:
            return []
        gone, self.windows = self.windows[:count], self.windows[count:]
        closed = max(self.open_from - count, 0)
        self._closed_starts = self._closed_starts[len(self._closed_starts) - closed:]
        self._closed_ends = self._closed_ends[len(self._closed_ends) - closed:]
        self.open_from = closed
        self.retired += len(gone)
        return gone

    def add(self, rows: Rows, windows: list[Window] | FreshWindows, table: CallTable,
            horizon_us: int) -> None:
        """Take new calls and new windows (either may be empty), then settle old calls."""
        if len(rows):
            self.newest_us = max(self.newest_us, int(rows.end_us.max()))
            self.seen_at(int(rows.ts_us.min()))
        if len(windows):
            earliest_us, latest_us = time_span_us(windows)
            self.newest_us = max(self.newest_us, latest_us)
            self.seen_at(earliest_us)
            self.pending.claim(self._place(windows, earliest_us), table)
        if len(rows):
            rows = _claim(rows, self.windows[self._tail(int(rows.ts_us.min())) :], table)
        if len(rows) and self.open_from:
            rows = self._claim_closed(rows, table)
        self.pending.append(rows)
        watermark = self.newest_us - horizon_us
        if len(self.pending) > MAX_PENDING_ROWS:  # settle the oldest beyond the cap
            ends = np.partition(self.pending.rows().end_us, len(self.pending) - MAX_PENDING_ROWS)
            watermark = max(watermark, int(ends[len(self.pending) - MAX_PENDING_ROWS]))
        self._close(watermark)
        self.settle(watermark, table)

    def seen_at(self, time_us: int) -> None:
        if time_us > 0:
            self.oldest_us = min(self.oldest_us, time_us) if self.oldest_us else time_us

    def settle(self, watermark_us: int, table: CallTable) -> None:
        """Move unclaimed calls that ended before the watermark into file clusters."""
        done = self.pending.settle(watermark_us)
        if len(done):
            _cluster(self.clusters, done, table)

    def _place(self, windows: list[Window] | FreshWindows, earliest: int) -> list[Window]:
        """Insert windows (the first starting at `earliest`), letting outer ones absorb nested
        ones (windows.place); returns the windows that are new (the ones that may claim
        pending rows)."""
        if self.open_from and earliest <= int(self._closed_ends.max()):
            self._reopen(int(np.flatnonzero(self._closed_ends >= earliest)[0]))
        tail = self._tail(earliest)
        self.windows[tail:], grown = place(self.windows[tail:], windows)
        return grown

    def _tail(self, time_us: int) -> int:
        """Index of the first open window that may end at or after `time_us`. Kept windows
        are not nested, so sorted by start they are sorted by end too: scan back from the end."""
        index = len(self.windows)
        while index > self.open_from and self.windows[index - 1].io.end_us >= time_us:
            index -= 1
        # the window before may still contain time_us when windows overlap partially
        return max(self.open_from, index - 1)

    def _close(self, watermark_us: int) -> None:
        first = self.open_from
        last = first
        while last < len(self.windows) and self.windows[last].io.end_us < watermark_us:
            last += 1
        if last == first:
            return
        closing = self.windows[first:last]
        self._closed_starts = np.concatenate(
            (self._closed_starts, [w.io.start_us for w in closing]))
        self._closed_ends = np.concatenate((self._closed_ends, [w.io.end_us for w in closing]))
        self.open_from = last

    def _reopen(self, index: int) -> None:
        self.open_from = index
        self._closed_starts = self._closed_starts[:index]
        self._closed_ends = self._closed_ends[:index]

    def _claim_closed(self, rows: Rows, table: CallTable) -> Rows:
        older = rows.ts_us <= int(self._closed_ends.max())
        if not older.any():
            return rows
        left = _claim(
            rows.take(older),
            self.windows[: self.open_from],
            table,
            self._closed_starts,
            self._closed_ends,
        )
        return Rows.concat([left, rows.take(~older)])


def _claim(
    rows: Rows,
    windows: list[Window],
    table: CallTable,
    starts: np.ndarray | None = None,
    ends: np.ndarray | None = None,
) -> Rows:
    """Add to each window the rows that start inside it; return the rows no window took.
    `windows` must be sorted by start when `starts`/`ends` are given for them."""
    if not len(rows) or not windows:
        return rows
    if starts is None or ends is None:
        ordered = sorted(windows, key=lambda w: w.io.start_us)
        starts = np.array([w.io.start_us for w in ordered], dtype=np.int64)
        ends = np.array([w.io.end_us for w in ordered], dtype=np.int64)
    else:
        ordered = windows
    group, taken_count = _claim_groups(rows.ts_us, starts, ends)
    if not taken_count:
        return rows
    add_grouped([w.io for w in ordered], group, rows, table, defer=True)
    if taken_count == len(rows):
        return Rows.empty()
    return rows.take(group < 0)


def _claim_groups(ts_us: np.ndarray, starts: np.ndarray,
                  ends: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row's window (the last starting at or before it, if it has not ended) or -1, and
    how many rows have one. The C claim does it in one pass; this is its reference."""
    fast = fast_agg()
    if fast is not None:
        group = np.empty(len(ts_us), dtype=np.int64)
        return group, fast.claim(starts, ends, np.ascontiguousarray(ts_us), group)
    group = np.full(len(ts_us), -1, dtype=np.int64)
    # only rows between the first start and the last end can be inside: most rows of a
    # batch are not, and they are neither searched nor copied
    near = np.flatnonzero((ts_us >= starts[0]) & (ts_us <= ends.max()))
    if not len(near):
        return group, 0
    slot = np.searchsorted(starts, ts_us[near], side="right") - 1
    inside = ts_us[near] <= ends[slot]
    group[near[inside]] = slot[inside]
    return group, int(inside.sum())


def _cluster(clusters: dict[str, list[IoAgg]], rows: Rows, table: CallTable) -> None:
    rows = rows.take(rows.file >= 0)
    if not len(rows):
        return
    order = np.lexsort((rows.ts_us, rows.file))
    rows = rows.take(order)
    new_file = np.concatenate(([True], rows.file[1:] != rows.file[:-1]))
    gap = np.concatenate(([True], rows.ts_us[1:] - rows.end_us[:-1] > CLUSTER_GAP_US))
    bounds = np.flatnonzero(new_file | gap)
    segment = np.cumsum(new_file | gap) - 1
    ends = np.maximum.reduceat(rows.end_us, bounds)
    parts: list[IoAgg] = []
    for begin, stop in zip(bounds.tolist(), ends.tolist()):
        key = table.files[int(rows.file[begin])]
        start = int(rows.ts_us[begin])
        uses = clusters.setdefault(key, [])
        if uses and start - uses[-1].end_us <= CLUSTER_GAP_US:
            uses[-1].end_us = max(uses[-1].end_us, stop)
            parts.append(uses[-1])
        else:
            uses.append(IoAgg(start_us=start, end_us=stop))
            parts.append(uses[-1])
    add_grouped(parts, segment, rows, table)
