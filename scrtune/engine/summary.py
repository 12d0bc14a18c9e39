"""Finished statistics: the replay summary that people read and intents are derived from."""

from __future__ import annotations

import math

import msgspec

from scrtune.engine import aggregated
from scrtune.engine.checkpoints import (
    Checkpoint,
    SizeBucket,
    SizeMode,
    group_windows,
    histogram,
    modes,
    path_windows,
)
from scrtune.engine.ioagg import add_pair_tables, add_write_sizes
from scrtune.engine.retire import held, trim
from scrtune.engine.stats import Stats
from scrtune.engine.timeline import Window
from scrtune.units import plural

PREFIX_DEPTH = 2  # storage path prefix = first components of the path (/p/lustre1, /l/ssd)


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
    # checkpoint windows (one process's save or restore) older than those listed: counted, and
    # their write sizes in write_sizes, but not in checkpoints, restores or intervals
    unlisted_windows: int = 0
    unlisted_until_us: int = 0  # the latest start among them
    # whether a process's later checkpoints write files its earlier ones wrote (True), never do
    # (False), or the trace cannot tell (None: no process saved twice with its files known)
    checkpoint_files_reused: bool | None = None
    # [start_us, end_us] of each launch: processes whose lifetimes overlap, one after another
    launches: list[tuple[int, int]] = []


def no_events_reason(summary: Summary) -> str:
    """Why a replay that found no record is of no use, for a one-line error."""
    files = [g.path for g in summary.generations]
    named = ", ".join(files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    lines = f"{plural(summary.invalid_lines, 'line')} that are not trace records" \
        if summary.invalid_lines else "no lines"
    return f"no trace events in {named or 'the files given'}: {lines} (not DFTracer traces?)"


MISSING_WITHOUT_ARGS = [
    "write sizes",
    "bytes written per checkpoint, rank and file (and so SCR_FILE_BUF_SIZE)",
    "files per checkpoint",
    "bandwidth per storage path",
    "checkpoints found by file path",
    "hosts",
]


def finish(stats: Stats) -> Summary:
    """Settle every process and summarise. `stats` must not be fed afterwards."""
    table = stats.table()
    trim(stats.timelines, stats.retired, stats.listed_windows)
    windows: list[tuple[tuple[str, int], Window, str]] = []
    matcher = stats.patterns.path_matcher()
    for key, timeline in stats.timelines.items():
        timeline.settle(math.inf, table)  # type: ignore[arg-type]
        own = [w for w in timeline.windows if w.io.has_calls()]
        if own or timeline.retired:
            windows.extend((key, w, "region") for w in own)
        else:  # no checkpoint regions in this process: find its checkpoints by path
            found = path_windows(timeline.clusters, stats.hash_names, matcher)
            windows.extend((key, w, "path") for w in found)
    windows.extend(aggregated.windows(stats.aggregated_regions))
    windows.sort(key=lambda item: (item[1].io.start_us, item[0]))  # same order on any split
    started = {key: timeline.oldest_us for key, timeline in stats.timelines.items()}
    saves = group_windows([w for w in windows if w[1].kind == "save"], started)
    restores = group_windows([w for w in windows if w[1].kind == "restore"], started)
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
        write_sizes=modes(all_sizes),
        write_size_histogram=histogram(all_sizes),
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
        unlisted_windows=stats.retired.windows,
        unlisted_until_us=stats.retired.until_us,
        checkpoint_files_reused=_files_reused(windows),
        launches=_launches(stats),
    )


REUSE_WINDOWS = 4  # the latest save windows of each process whose files are compared


def _files_reused(windows: list[tuple[tuple[str, int], Window, str]]) -> bool | None:
    """Whether some process writes a file in two of its latest save windows (SCR's retention
    then deletes the newest checkpoint's files along with a retired one's), from the windows
    whose written files the trace names."""
    by_process: dict[tuple[str, int], list[Window]] = {}
    for key, window, _ in windows:
        if window.kind == "save":
            by_process.setdefault(key, []).append(window)
    compared = False
    for saves in by_process.values():
        latest = [w.io.file_bytes_written for w in saves[-REUSE_WINDOWS:]]
        latest = [files for files in latest if files]
        seen: set[str] = set()
        for files in latest:
            if not seen.isdisjoint(files):
                return True
            seen.update(files)
        compared = compared or len(latest) >= 2
    return False if compared else None


def _size_source(saves: list[Checkpoint], stats: Stats) -> tuple[str, dict[int, list[int]]]:
    sizes: dict[int, list[int]] = {}
    scope = "checkpoint"
    retired = stats.retired
    aggs = [w.io for t in stats.timelines.values() for w in t.windows if w.kind == "save"]
    tables = [retired.save_sizes]
    if not retired.save_write_calls and not any(a.write_calls for a in aggs):
        scope = "all"
        aggs = [u for t in stats.timelines.values() for uses in t.clusters.values() for u in uses]
        aggs += [w.io for t in stats.timelines.values() for w in t.windows]
        tables.append(retired.restore_sizes)
    add_pair_tables(sizes, tables)
    add_write_sizes(sizes, aggs)
    return scope, sizes


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


def _mixed_runs(stats: Stats) -> str | None:
    """A warning when the files come from processes that ran different command lines: their
    same-numbered checkpoints, close in time, would be merged into one job checkpoint."""
    where: dict[str, str] = {}
    for source in sorted(stats.sources, key=lambda s: s.path):
        for command in source.commands:
            where.setdefault(command, source.path)
    if len(where) < 2:
        return None
    shown = "; ".join(f"{' '.join(c.split(';'))[:60]} ({path})"
                      for c, path in list(where.items())[:3])
    return (f"the files come from {len(where)} different command lines ({shown}"
            + (" and more" if len(where) > 3 else "") + "): replayed together, the runs' "
            "checkpoints are merged where they share steps or overlap; replay one run at a time")


def _ranks(stats: Stats) -> int:
    named = {
        (f.host, f.value)
        for f in stats.facts
        if f.name == "process_name" and f.value.startswith("Rank")
    }
    if named:
        return len(named)
    processes = {(h, p) for h, p, _ in stats.threads} - stats.fork_processes
    return _most_at_once(processes, stats)


def _spans(processes: set[tuple[str, int]], stats: Stats) -> list[tuple[int, int]]:
    return [(t.oldest_us, t.newest_us) for key, t in stats.timelines.items()
            if key in processes and t.oldest_us]


def _launches(stats: Stats) -> list[tuple[int, int]]:
    """The job's launches: its ranks' lifetimes merged where they overlap. A relaunched job's
    processes start after the ones that died (goodput reads each launch as a run)."""
    processes = {(h, p) for h, p, _ in stats.threads} - stats.fork_processes
    merged: list[tuple[int, int]] = []
    for start, end in sorted(_spans(processes, stats)):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _most_at_once(processes: set[tuple[str, int]], stats: Stats) -> int:
    """The most of `processes` alive at one time: a relaunched job's processes replace the
    ones that died, they are not more ranks. One with no timed lifetime counts throughout."""
    spans = _spans(processes, stats)
    # at one instant an end sorts before a start: a relaunch does not overlap its predecessor
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    alive = peak = 0
    for _, step in edges:
        alive += step
        peak = max(peak, alive)
    return len(processes) - len(spans) + peak


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
    if stats.retired.windows:
        out.append(_unlisted(stats))
    mixed = _mixed_runs(stats)
    if mixed:
        out.append(mixed)
    if stats.aggregated_regions:
        out.append(
            "checkpoints counted from aggregated regions: their number and mean duration per "
            "aggregation window are known; their bytes, files, write sizes and steps are not, "
            "and their start times only to the window (found by `aggregated`)"
        )
    if not counts.io_calls and counts.records:
        out.append(
            "no POSIX/STDIO calls were traced: is DFTRACER_DATA_DIR set to cover the "
            "checkpoint directory?"
        )
    return out


def _unlisted(stats: Stats) -> str:
    retired = stats.retired
    counted = (f"({retired.saves:,} saves, {retired.restores:,} restores) count in the write "
               "sizes, not in the checkpoints or intervals (so memory stays flat in records; "
               "`scrtune replay --listed-windows 0` lists all)")
    if not held(stats.timelines):
        return (f"no checkpoint is listed: the latest one spans more than the "
                f"{stats.listed_windows:,} checkpoint windows listed (a process's save or "
                "restore, one per rank), or the windows leave no gap between checkpoints; "
                f"all {retired.windows:,} {counted}")
    return (f"only the latest {stats.listed_windows:,} checkpoint windows (a process's save "
            f"or restore) are listed: {retired.windows:,} earlier ones {counted}")


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
