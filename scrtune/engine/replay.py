"""Offline replay: trace files through the engine, in one process, a parse pool, or MPI ranks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field

from scrtune.engine.classify import CheckpointPatterns
from scrtune.engine.stats import SourceReport, Stats
from scrtune.engine.summary import Summary, finish
from scrtune.engine.timeline import DEFAULT_HORIZON_US
from scrtune.errors import TraceError
from scrtune.events.model import EventBatch, Generation
from scrtune.events.parse import MAX_INVALID_SAMPLES, FileContext, parse_lines
from scrtune.events.pool import ParsePool
from scrtune.events.reader import ReadProblems, iter_chunks, process_group, role_order

EXAMPLE_TRACE = os.path.join(
    os.path.dirname(os.path.dirname(__file__)),
    "data",
    "example-ckpt_mock-3ac59113322bd8ae-app.pfw.gz",
)


@dataclass(frozen=True)
class ReplayOptions:
    patterns: CheckpointPatterns = field(default_factory=CheckpointPatterns)
    horizon_us: int = DEFAULT_HORIZON_US
    workers: int = 1  # parse processes including this one; 1 = no worker processes


def order_files(paths: list[str]) -> list[list[str]]:
    """Group files by process (app, preload and fork files of one stem) in a stable order."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(process_group(path), []).append(path)
    return [sorted(files, key=lambda p: (role_order(p), p)) for _, files in sorted(groups.items())]


def new_stats(options: ReplayOptions) -> Stats:
    return Stats(options.patterns, options.horizon_us)


def read_file(stats: Stats, path: str, pool: ParsePool | None = None) -> None:
    """Feed one file into `stats`; problems land in the file's SourceReport, never raise,
    except TraceError when the file cannot be opened at all."""
    problems = ReadProblems()
    report = SourceReport(
        path=path,
        generation=Generation.UNKNOWN.value,
        fork=path.endswith(("-fork.pfw", "-fork.pfw.gz")),
    )
    for batch in _batches(path, problems, pool):
        if report.generation == Generation.UNKNOWN.value:
            report.generation = batch.generation.value
        report.records += batch.records
        report.invalid_lines += batch.invalid_lines
        room = MAX_INVALID_SAMPLES - len(report.invalid_samples)
        if room > 0 and batch.invalid_samples:
            report.invalid_samples = report.invalid_samples + batch.invalid_samples[:room]
        stats.add(batch, fork=report.fork)
    report.truncated = problems.truncated
    report.warnings = list(problems.warnings)
    if report.invalid_lines:
        report.warnings.append(
            f"{path}: {report.invalid_lines} invalid lines skipped (first at line "
            f"{report.invalid_samples[0].line})"
            if report.invalid_samples
            else f"{path}: {report.invalid_lines} invalid lines skipped"
        )
    if report.records == 0 and not report.invalid_lines:
        report.warnings.append(f"{path}: no trace records (empty file)")
    stats.add_source(report)


def _batches(path: str, problems: ReadProblems, pool: ParsePool | None) -> Iterator[EventBatch]:
    chunks = iter_chunks(path, problems)
    context = FileContext()
    for first_line, data in chunks:
        batch, context = parse_lines(data.split(b"\n"), first_line, context)
        yield batch
        break  # the first chunk tells what later chunks need to know (generation, time unit)
    if pool is not None:
        yield from pool.parse_rest(path, chunks, context)
        return
    for first_line, data in chunks:
        batch, context = parse_lines(data.split(b"\n"), first_line, context)
        yield batch


def read_files(stats: Stats, paths: list[str], workers: int = 1) -> int:
    """Feed files into `stats`; returns how many could be opened."""
    opened = 0
    pool = ParsePool(workers - 1) if workers > 1 else None
    try:
        for group in order_files(paths):
            for path in group:
                try:
                    read_file(stats, path, pool)
                    opened += 1
                except TraceError as exc:
                    stats.add_source(
                        SourceReport(path=path, generation="unreadable", warnings=[str(exc)])
                    )
    finally:
        if pool is not None:
            pool.close()
    return opened


def replay(paths: list[str], options: ReplayOptions | None = None) -> Summary:
    """Replay trace files (already expanded) into a summary; TraceError if none can be read."""
    options = options or ReplayOptions()
    stats = new_stats(options)
    if not read_files(stats, paths, options.workers):
        raise TraceError(
            f"{paths[0]}: could not be read"
            if len(paths) == 1
            else f"none of the {len(paths)} trace files could be read"
        )
    return finish(stats)
