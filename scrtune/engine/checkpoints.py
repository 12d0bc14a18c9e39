"""Per-process checkpoint windows to job checkpoints: found by path where a process has no
regions, grouped across ranks by step or by time, summarised with their dominant write sizes."""

from __future__ import annotations

import re

import msgspec

from scrtune.engine.classify import SCR_METADATA
from scrtune.engine.ioagg import IoAgg, fast_agg
from scrtune.engine.timeline import CLUSTER_GAP_US, Window

MODE_SHARE = 0.9  # dominant write sizes: the largest ones that together carry this share
MAX_MODES = 8
SHARE_DIGITS = 4
_BY_PATH = "(files on checkpoint paths)"


class SizeMode(msgspec.Struct, frozen=True):
    size_bytes: int
    calls: int
    bytes: int
    bytes_share: float


class SizeBucket(msgspec.Struct, frozen=True):
    """Writes of at least `min_bytes` and less than twice that."""

    min_bytes: int
    calls: int
    bytes: int


class FileSizes(msgspec.Struct, frozen=True):
    """Bytes per file of one checkpoint (the full map stays in the engine's statistics)."""

    files: int
    min_bytes: int
    median_bytes: int
    max_bytes: int

    @classmethod
    def of(cls, per_file: dict[str, int]) -> FileSizes:
        sizes = sorted(per_file.values())
        if not sizes:
            return cls(0, 0, 0, 0)
        return cls(len(sizes), sizes[0], sizes[len(sizes) // 2], sizes[-1])


class OpCount(msgspec.Struct, frozen=True):
    calls: int
    dur_us: int


class Checkpoint(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint (save) or restore of the whole job: every rank's window of it."""

    index: int
    kind: str
    name: str
    found_by: str  # "region" or "path"
    step: int | None
    epoch: int | None
    start_us: int
    dur_us: int
    ranks: int
    bytes_written: int
    bytes_read: int
    files: int
    write_calls: int
    read_calls: int
    io_busy_us: int
    bytes_per_rank: list[int]
    bytes_per_file: FileSizes
    ops: dict[str, OpCount]
    write_sizes: list[SizeMode]


def path_windows(clusters: dict[str, list[IoAgg]], names: dict[str, str],
                 matcher: re.Pattern[str]) -> list[Window]:
    """Windows from file uses on checkpoint paths, for a process without checkpoint regions."""
    uses = [
        use
        for key, found in clusters.items()
        if matcher.search(path := names.get(key, key if key.startswith("/") else ""))
        and not SCR_METADATA.search(path)
        for use in found
        if use.write_calls or use.read_calls
    ]
    uses.sort(key=lambda u: u.start_us)
    grouped: list[IoAgg] = []
    for use in uses:
        if grouped and use.start_us - grouped[-1].end_us <= CLUSTER_GAP_US:
            grouped[-1].absorb(use)
        else:
            grouped.append(IoAgg(start_us=use.start_us, end_us=use.end_us))
            grouped[-1].absorb(use)
    return [
        Window(
            kind="save" if agg.bytes_written >= agg.bytes_read else "restore",
            name=_BY_PATH,
            step=-1,
            epoch=-1,
            io=agg,
        )
        for agg in grouped
    ]


STEP_GROUP_SLACK_US = 60 * 1_000_000


def group_windows(windows: list[tuple[tuple[str, int], Window, str]],
                  started: dict[tuple[str, int], int] | None = None) -> list[Checkpoint]:
    """Windows of different processes form one job checkpoint when they share a step (and
    epoch) and are close in time, or, without steps, when they overlap in time. A process
    saves a checkpoint once: its second window of the same step (a restarted job saving that
    step again) starts another checkpoint, and so does the window of a process that started
    after the checkpoint's windows ended (`started`: each process's first event, time us): a
    relaunch saving that step again. `windows` is sorted by start."""
    started = started or {}
    groups: list[list] = []
    by_step: dict[tuple[int, int], _OpenGroup] = {}
    timed: _OpenGroup | None = None
    for item in windows:
        process, window, _ = item
        if window.step >= 0 or window.epoch >= 0:
            key = (window.epoch, window.step)
            current = by_step.get(key)
            if current is None or not current.accepts(process, window) or \
                    started.get(process, 0) > current.end_us:
                current = by_step[key] = _OpenGroup(groups, slack_us=STEP_GROUP_SLACK_US)
            current.add(item)
        else:
            if timed is None or not timed.accepts(process, window):
                timed = _OpenGroup(groups, slack_us=0)
            timed.add(item)
    groups.sort(key=lambda g: g[0][1].io.start_us)
    return [_checkpoint(i, g) for i, g in enumerate(groups)]


class _OpenGroup:
    """A job checkpoint being assembled: its windows, processes and how far it reaches."""

    def __init__(self, groups: list[list], slack_us: int) -> None:
        self.items: list = []
        groups.append(self.items)
        self.processes: set[tuple[str, int]] = set()
        self.start_us = self.end_us = 0
        self.slack_us = slack_us

    def accepts(self, process: tuple[str, int], window: Window) -> bool:
        if process in self.processes:
            return False
        if not self.slack_us:  # grouping by time: the window must overlap the group
            return window.io.start_us <= self.end_us
        # grouping by step: ranks may start late, by up to the slack or the group's own span
        reach = self.end_us + max(self.slack_us, self.end_us - self.start_us)
        return window.io.start_us <= reach

    def add(self, item) -> None:
        process, window, _ = item
        if not self.items:
            self.start_us = window.io.start_us
        self.items.append(item)
        self.processes.add(process)
        self.end_us = max(self.end_us, window.io.end_us)


def _checkpoint(index: int, group: list) -> Checkpoint:
    """A job checkpoint from its windows (thousands a trace: built with no more objects than
    the summary keeps)."""
    _, first, found_by = group[0]
    if len(group) == 1:  # one process's window: its aggregate is the total (read only here)
        total = first.io
        bytes_per_rank = [total.bytes_written]
    else:
        total = IoAgg(start_us=first.io.start_us, end_us=first.io.end_us)
        per_rank: dict[tuple[str, int], int] = {}
        for process, window, _ in group:
            total.absorb(window.io)
            per_rank[process] = per_rank.get(process, 0) + window.io.bytes_written
        bytes_per_rank = [per_rank[k] for k in sorted(per_rank)]
    ops, write_sizes, per_file_sizes = _parts(total, first.kind == "save")
    return Checkpoint(
        index=index,
        kind=first.kind,
        name=first.name,
        found_by=found_by,
        step=first.step if first.step >= 0 else None,
        epoch=first.epoch if first.epoch >= 0 else None,
        start_us=total.start_us,
        dur_us=total.end_us - total.start_us,
        ranks=len(bytes_per_rank),
        bytes_written=total.bytes_written,
        bytes_read=total.bytes_read,
        files=per_file_sizes.files,
        write_calls=total.write_calls,
        read_calls=total.read_calls,
        io_busy_us=total.io_busy_us,
        bytes_per_rank=bytes_per_rank,
        bytes_per_file=per_file_sizes,
        ops=ops,
        write_sizes=write_sizes,
    )


def _parts(total: IoAgg, save: bool) -> tuple[dict[str, OpCount], list[SizeMode], FileSizes]:
    """A checkpoint's counts per operation, dominant write sizes and bytes per file (of the
    files written by a save, read by a restore): made in C when it is built (most of a
    checkpoint's summary time in Python), from sums the fold held back when it can, else
    here."""
    fast = fast_agg()
    if fast is not None:
        parts = fast.held_parts(total, save, OpCount, SizeMode, FileSizes, MODE_SHARE,
                                MAX_MODES, SHARE_DIGITS)
        if parts is not None:
            return parts
    per_file = total.file_bytes_written if save else total.file_bytes_read
    if fast is not None:
        ops, sizes, files = fast.checkpoint_parts(
            total.ops, total.write_sizes, per_file, OpCount, SizeMode, FileSizes, MODE_SHARE,
            MAX_MODES, SHARE_DIGITS)
        return ops, sizes if sizes is not None else modes(total.write_sizes), files
    return ({name: OpCount(pair[0], pair[1]) for name, pair in sorted(total.ops.items())},
            modes(total.write_sizes), FileSizes.of(per_file))


def modes(sizes: dict[int, list[int]]) -> list[SizeMode]:
    """The largest write sizes by bytes, until they carry MODE_SHARE of all bytes written."""
    fast = fast_agg()
    chosen = fast.top_sizes(sizes, MODE_SHARE, MAX_MODES, SHARE_DIGITS) if fast else None
    if chosen is None:  # the reference (and any value the C path leaves to it)
        chosen = _top_sizes(sizes)
    return [SizeMode(size, calls, moved, share) for size, calls, moved, share in chosen[1]]


def _top_sizes(sizes: dict[int, list[int]]) -> tuple[int, list[tuple[int, int, int, float]]]:
    """(total bytes, [(size, calls, bytes, share of the total)]) of the modes."""
    total = sum(v[1] for v in sizes.values())
    found: list[tuple[int, int, int, float]] = []
    covered = 0
    for _, size, calls, moved in sorted([(-v[1], k, v[0], v[1]) for k, v in sizes.items()]):
        if not total or covered >= MODE_SHARE * total or len(found) >= MAX_MODES:
            break
        covered += moved
        found.append((size, calls, moved, round(moved / total, SHARE_DIGITS)))
    return total, found


def histogram(sizes: dict[int, list[int]]) -> list[SizeBucket]:
    buckets: dict[int, list[int]] = {}
    for size, (calls, moved) in sizes.items():
        low = 0 if size <= 0 else 1 << (int(size).bit_length() - 1)
        slot = buckets.setdefault(low, [0, 0])
        slot[0] += calls
        slot[1] += moved
    return [SizeBucket(min_bytes=k, calls=v[0], bytes=v[1]) for k, v in sorted(buckets.items())]
