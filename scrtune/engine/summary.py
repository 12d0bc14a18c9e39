"""Finished statistics: the replay summary that people read and intents are derived from."""

from __future__ import annotations

import math

import msgspec

from scrtune.engine.ioagg import IoAgg
from scrtune.engine.stats import Stats
from scrtune.engine.timeline import CLUSTER_GAP_US, Window

MODE_SHARE = 0.9  # dominant write sizes: the largest ones that together carry this share
MAX_MODES = 8
PREFIX_DEPTH = 2  # storage path prefix = first components of the path (/p/lustre1, /l/ssd)
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
    ops: dict[str, OpCount]
    write_sizes: list[SizeMode]


class Interval(msgspec.Struct, frozen=True):
    """From one checkpoint start to the next, and the time outside checkpoints between them."""

    after_index: int
    interval_us: int
    compute_us: int


class PrefixBandwidth(msgspec.Struct, frozen=True):
    prefix: str
    direction: str
    bytes: int
    busy_us: int
    bytes_per_s: float
    files: int


class OpTotal(msgspec.Struct, frozen=True):
    name: str
    calls: int
    dur_us: int
    bytes: int


class SourceSummary(msgspec.Struct, frozen=True):
    path: str
    generation: str
    records: int
    invalid_lines: int
    truncated: bool
    warnings: list[str]
    invalid_samples: list[dict[str, object]]


class Summary(msgspec.Struct, frozen=True, kw_only=True):
    records: int
    invalid_lines: int
    generations: list[SourceSummary]
    ranks: int
    processes: int
    hosts: list[str]
    threads: int
    start_us: int
    end_us: int
    span_us: int
    has_io_args: bool
    missing_statistics: list[str]
    checkpoints: list[Checkpoint]
    restores: list[Checkpoint]
    intervals: list[Interval]
    write_sizes_scope: str
    write_sizes: list[SizeMode]
    write_size_histogram: list[SizeBucket]
    ops: list[OpTotal]
    bandwidth: list[PrefixBandwidth]
    compute_regions: int
    compute_us: int
    cores: list[int]
    cpu_counters: int
    warnings: list[str]


MISSING_WITHOUT_ARGS = [
    "write sizes (and so SCR_FILE_BUF_SIZE / SCR_MPI_BUF_SIZE)",
    "bytes written per checkpoint, rank and file",
    "files per checkpoint",
    "bandwidth per storage path",
    "checkpoints found by file path",
    "hosts",
]


def finish(stats: Stats) -> Summary:
    """Settle every process and summarise. `stats` must not be fed afterwards."""
    table = stats.table()
    windows: list[tuple[tuple[str, int], Window, str]] = []
    matcher = stats.patterns.path_matcher()
    for key, timeline in stats.timelines.items():
        timeline.settle(math.inf, table)  # type: ignore[arg-type]
        own = [w for w in timeline.windows if w.io.write_calls or w.io.read_calls or w.io.ops]
        if own:
            windows.extend((key, w, "region") for w in own)
        elif key not in stats.fork_processes or timeline.clusters:
            windows.extend(
                (key, w, "path") for w in _path_windows(timeline.clusters, stats, matcher)
            )
    windows.sort(key=lambda item: (item[1].io.start_us, item[0]))  # same order on any split
    saves = _group([w for w in windows if w[1].kind == "save"])
    restores = _group([w for w in windows if w[1].kind == "restore"])
    scope, all_sizes = _size_source(saves, stats)
    missing = _missing(stats)
    return Summary(
        records=stats.counts.records,
        invalid_lines=stats.counts.invalid_lines,
        generations=[_source(s) for s in sorted(stats.sources, key=lambda s: s.path)],
        ranks=_ranks(stats),
        processes=len({(h, p) for h, p, _ in stats.threads}),
        hosts=sorted({stats.host_names.get(h, h) for h, _, _ in stats.threads if h}),
        threads=len(stats.threads),
        start_us=stats.span[0],
        end_us=stats.span[1],
        span_us=stats.span[1] - stats.span[0],
        has_io_args=not missing,
        missing_statistics=missing,
        checkpoints=saves,
        restores=restores,
        intervals=_intervals(saves),
        write_sizes_scope=scope,
        write_sizes=_modes(all_sizes),
        write_size_histogram=_histogram(all_sizes),
        ops=sorted(
            (OpTotal(name=k, calls=v[0], dur_us=v[1], bytes=v[2]) for k, v in stats.ops.items()),
            key=lambda o: (-o.calls, o.name),
        ),
        bandwidth=_bandwidth(stats),
        compute_regions=stats.compute[0],
        compute_us=stats.compute[1],
        cores=_cores(stats),
        cpu_counters=len(stats.cpu_counters),
        warnings=_warnings(stats),
    )


def _path_windows(clusters: dict[str, list[IoAgg]], stats: Stats, matcher) -> list[Window]:
    uses = [
        use
        for key, found in clusters.items()
        if matcher.search(stats.hash_names.get(key, key if key.startswith("/") else ""))
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


def _group(windows: list[tuple[tuple[str, int], Window, str]]) -> list[Checkpoint]:
    """Windows of different processes form one job checkpoint when they share a step (and
    epoch) and are close in time, or, without steps, when they overlap in time. A process
    saves a checkpoint once: its second window of the same step (a restarted job saving that
    step again) starts another checkpoint. `windows` is sorted by start."""
    groups: list[list] = []
    by_step: dict[tuple[int, int], _OpenGroup] = {}
    timed: _OpenGroup | None = None
    for item in windows:
        process, window, _ = item
        if window.step >= 0 or window.epoch >= 0:
            key = (window.epoch, window.step)
            current = by_step.get(key)
            if current is None or not current.accepts(process, window):
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
        reach = self.end_us + max(self.slack_us, self.end_us - self.start_us if self.slack_us
                                  else 0)
        return process not in self.processes and window.io.start_us <= reach

    def add(self, item) -> None:
        process, window, _ = item
        if not self.items:
            self.start_us = window.io.start_us
        self.items.append(item)
        self.processes.add(process)
        self.end_us = max(self.end_us, window.io.end_us)


def _checkpoint(index: int, group: list) -> Checkpoint:
    total = IoAgg(start_us=group[0][1].io.start_us, end_us=group[0][1].io.end_us)
    per_rank: dict[tuple[str, int], int] = {}
    for key, window, _ in group:
        total.absorb(window.io)
        per_rank[key] = per_rank.get(key, 0) + window.io.bytes_written
    first = group[0][1]
    written_files = set(total.file_bytes_written)
    return Checkpoint(
        index=index,
        kind=first.kind,
        name=first.name,
        found_by=group[0][2],
        step=first.step if first.step >= 0 else None,
        epoch=first.epoch if first.epoch >= 0 else None,
        start_us=total.start_us,
        dur_us=total.end_us - total.start_us,
        ranks=len(per_rank),
        bytes_written=total.bytes_written,
        bytes_read=total.bytes_read,
        files=len(written_files) if first.kind == "save" else len(total.file_bytes_read),
        write_calls=total.write_calls,
        read_calls=total.read_calls,
        io_busy_us=total.io_busy_us,
        bytes_per_rank=[per_rank[k] for k in sorted(per_rank)],
        ops={k: OpCount(calls=v[0], dur_us=v[1]) for k, v in sorted(total.ops.items())},
        write_sizes=_modes(total.write_sizes),
    )


def _size_source(saves: list[Checkpoint], stats: Stats) -> tuple[str, dict[int, list[int]]]:
    sizes: dict[int, list[int]] = {}
    scope = "checkpoint"
    aggs = [w.io for t in stats.timelines.values() for w in t.windows if w.kind == "save"]
    if not any(a.write_calls for a in aggs):
        scope = "all"
        aggs = [u for t in stats.timelines.values() for uses in t.clusters.values() for u in uses]
        aggs += [w.io for t in stats.timelines.values() for w in t.windows]
    for agg in aggs:
        for size, (calls, moved) in agg.write_sizes.items():
            slot = sizes.setdefault(size, [0, 0])
            slot[0] += calls
            slot[1] += moved
    return scope, sizes


def _modes(sizes: dict[int, list[int]]) -> list[SizeMode]:
    total = sum(v[1] for v in sizes.values())
    if not total:
        return []
    modes: list[SizeMode] = []
    covered = 0
    for size, (calls, moved) in sorted(sizes.items(), key=lambda kv: (-kv[1][1], kv[0])):
        if covered >= MODE_SHARE * total or len(modes) >= MAX_MODES:
            break
        covered += moved
        modes.append(
            SizeMode(size_bytes=size, calls=calls, bytes=moved, bytes_share=round(moved / total, 4))
        )
    return modes


def _histogram(sizes: dict[int, list[int]]) -> list[SizeBucket]:
    buckets: dict[int, list[int]] = {}
    for size, (calls, moved) in sizes.items():
        low = 0 if size <= 0 else 1 << (int(size).bit_length() - 1)
        slot = buckets.setdefault(low, [0, 0])
        slot[0] += calls
        slot[1] += moved
    return [SizeBucket(min_bytes=k, calls=v[0], bytes=v[1]) for k, v in sorted(buckets.items())]


def _intervals(saves: list[Checkpoint]) -> list[Interval]:
    return [
        Interval(
            after_index=a.index,
            interval_us=b.start_us - a.start_us,
            compute_us=max(0, b.start_us - (a.start_us + a.dur_us)),
        )
        for a, b in zip(saves, saves[1:])
    ]


def _bandwidth(stats: Stats) -> list[PrefixBandwidth]:
    totals: dict[tuple[str, str], list[int]] = {}
    for key, (written, write_us, read, read_us) in stats.file_io.items():
        path = stats.hash_names.get(key, key if key.startswith("/") else "")
        prefix = _prefix(path) if path else "(unresolved file hashes)"
        for direction, moved, busy in (("write", written, write_us), ("read", read, read_us)):
            if moved:
                slot = totals.setdefault((prefix, direction), [0, 0, 0])
                slot[0] += moved
                slot[1] += busy
                slot[2] += 1
    return [
        PrefixBandwidth(
            prefix=p,
            direction=d,
            bytes=v[0],
            busy_us=v[1],
            files=v[2],
            bytes_per_s=round(v[0] / (v[1] / 1e6), 1) if v[1] else 0.0,
        )
        for (p, d), v in sorted(totals.items())
    ]


def _prefix(path: str) -> str:
    parts = [p for p in path.split("/") if p]
    return "/" + "/".join(parts[:PREFIX_DEPTH])


def _ranks(stats: Stats) -> int:
    named = {
        (f.host, f.value)
        for f in stats.facts
        if f.name == "process_name" and f.value.startswith("Rank")
    }
    if named:
        return len(named)
    processes = {(h, p) for h, p, _ in stats.threads}
    return len(processes - stats.fork_processes)


def _cores(stats: Stats) -> list[int]:
    cores: set[int] = set()
    for fact in stats.facts:
        if fact.name == "core_affinity":
            try:
                value = msgspec.json.decode(fact.value)
            except msgspec.DecodeError:
                continue
            if isinstance(value, list):
                cores.update(int(c) for c in value if isinstance(c, int))
    return sorted(cores)


def _missing(stats: Stats) -> list[str]:
    counts = stats.counts
    if counts.io_calls and counts.io_calls_without_args == counts.io_calls:
        return list(MISSING_WITHOUT_ARGS)
    return []


def _warnings(stats: Stats) -> list[str]:
    out = [w for s in stats.sources for w in s.warnings]
    counts = stats.counts
    if counts.io_calls and counts.io_calls_without_args == counts.io_calls:
        out.append(
            "the trace was recorded without DFTRACER_INC_METADATA=1: I/O calls carry no sizes "
            "or files, so write sizes, bytes, files and bandwidth cannot be derived"
        )
    if counts.aggregated:
        out.append(
            f"{counts.aggregated} aggregated records (DFTRACER_ENABLE_AGGREGATION=1) carry no "
            "files or steps: their calls count in totals but not per checkpoint or file"
        )
    if not counts.io_calls and counts.records:
        out.append(
            "no POSIX/STDIO calls were traced: is DFTRACER_DATA_DIR set to cover the "
            "checkpoint directory?"
        )
    return out


def _source(report) -> SourceSummary:
    return SourceSummary(
        path=report.path,
        generation=report.generation,
        records=report.records,
        invalid_lines=report.invalid_lines,
        truncated=report.truncated,
        warnings=report.warnings,
        invalid_samples=[{"line": s.line, "reason": s.reason} for s in report.invalid_samples],
    )
