"""Offline replay: trace files through the engine, in one process, a parse pool, or MPI ranks."""

from __future__ import annotations

import contextlib
import gc
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from scrtune.engine.classify import CheckpointPatterns
from scrtune.engine.retire import LISTED_WINDOWS
from scrtune.engine.state import SourceReport
from scrtune.engine.stats import Stats
from scrtune.engine.summary import Summary, finish
from scrtune.engine.timeline import DEFAULT_HORIZON_US
from scrtune.errors import TraceError
from scrtune.events.model import EventBatch, Generation, InvalidLine
from scrtune.events.parse import MAX_INVALID_SAMPLES, FileContext, parse_block, uses_fast_path
from scrtune.events.pool import ParsePool
from scrtune.events.reader import ReadProblems, iter_chunks, process_group, role_order
from scrtune.units import plural

EXAMPLE_TRACE = os.path.join(
    os.path.dirname(os.path.dirname(__file__)),
    "data",
    "example-ckpt_mock-3ac59113322bd8ae-app.pfw.gz",
)
EXAMPLE_PROFILE = os.path.join(os.path.dirname(EXAMPLE_TRACE), "corona-study.toml")


@dataclass(frozen=True)
class ReplayOptions:
    patterns: CheckpointPatterns = field(default_factory=CheckpointPatterns)
    horizon_us: int = DEFAULT_HORIZON_US
    workers: int = 1  # parse processes including this one; 1 = no worker processes
    listed_windows: int | None = LISTED_WINDOWS  # checkpoint windows kept; None: all


def order_files(paths: list[str]) -> list[list[str]]:
    """Group files by process (app, preload and fork files of one stem) in a stable order."""
    groups: dict[str, list[str]] = {}
    for path in paths:
        groups.setdefault(process_group(path), []).append(path)
    return [sorted(files, key=lambda p: (role_order(p), p)) for _, files in sorted(groups.items())]


def new_stats(options: ReplayOptions) -> Stats:
    return Stats(options.patterns, options.horizon_us, listed_windows=options.listed_windows)


class _Parsers:
    """Where chunks get parsed: complete 2.x events take the C path on threads (it releases
    the GIL: no copies, no pipes); every other file takes worker processes (the Python parser
    holds the GIL). Both are made on first use and closed together."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._threads: ThreadPoolExecutor | None = None
        self._pool: ParsePool | None = None

    def batches(self, path: str, problems: ReadProblems) -> Iterator[EventBatch]:
        chunks = iter_chunks(path, problems)
        context = FileContext()
        for data in chunks:
            batch, context = parse_block(data, context)
            yield batch
            break  # the first chunk tells what later chunks need (generation, time unit)
        if self.workers <= 1:
            for data in chunks:
                batch, context = parse_block(data, context)
                yield batch
        elif uses_fast_path(context):
            yield from self._threaded(chunks, context)
        else:
            if self._pool is None:
                self._pool = ParsePool(self.workers - 1)
            yield from self._pool.parse_rest(path, chunks, context)

    def _threaded(self, chunks, context: FileContext) -> Iterator[EventBatch]:
        """Parse threads run ahead of this one, which inflates, cuts and aggregates: one
        fewer than the workers, as this one is a worker too (a thread more than cores made
        the 2-worker replay a tenth slower), with workers + 1 chunks in flight (more cost
        memory and no time). (A separate reader thread was tried, before and with an inflater
        that holds no GIL: three threads on two cores lost time; RESULTS.md.)"""
        if self._threads is None:
            self._threads = ThreadPoolExecutor(max(1, self.workers - 1),
                                               thread_name_prefix="scrtune-parse")
        ahead: deque[Future] = deque()
        for data in chunks:
            ahead.append(self._threads.submit(parse_block, data, context))
            if len(ahead) > self.workers + 1:
                yield ahead.popleft().result()[0]
        while ahead:
            yield ahead.popleft().result()[0]

    def close(self) -> None:
        if self._threads is not None:
            self._threads.shutdown(cancel_futures=True)
        if self._pool is not None:
            self._pool.close()


def read_file(stats: Stats, path: str, parsers: _Parsers | None = None) -> None:
    """Feed one file into `stats`; problems land in the file's SourceReport, never raise,
    except TraceError when the file cannot be opened at all."""
    problems = ReadProblems()
    report = SourceReport(path=path, generation=Generation.UNKNOWN.value,
                          fork=path.endswith(("-fork.pfw", "-fork.pfw.gz")))
    lines_before = 0  # lines of the file before the current batch's block
    for batch in (parsers or _Parsers(1)).batches(path, problems):
        if report.generation == Generation.UNKNOWN.value:
            report.generation = batch.generation.value
        report.records += batch.records
        report.invalid_lines += batch.invalid_lines
        room = MAX_INVALID_SAMPLES - len(report.invalid_samples)
        if room > 0 and batch.invalid_samples:
            report.invalid_samples = report.invalid_samples + [
                InvalidLine(lines_before + s.line + 1, s.reason)
                for s in batch.invalid_samples[:room]
            ]
        lines_before += batch.lines
        report.commands += [h.value for h in batch.hash_defs
                            if h.kind == "SH" and ";" in h.value and h.value not in report.commands]
        stats.add(batch, fork=report.fork)
    report.truncated = problems.truncated
    report.warnings = list(problems.warnings)
    if report.invalid_lines:
        first = report.invalid_samples[0].line if report.invalid_samples else None
        report.warnings.append(f"{path}: {plural(report.invalid_lines, 'invalid line')} skipped"
                               + (f" (first at line {first})" if first else ""))
    if report.records == 0 and not report.invalid_lines:
        report.warnings.append(f"{path}: no trace records (empty file)")
    stats.add_source(report)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The engine builds many small containers (a window's tables) and no reference cycles:
    at Python's default threshold, collections of the young generation took a seventh of
    replay's aggregating thread. Collect a hundred times less often while replaying (and
    while the daemon serves: its loop thread aggregates with the same engine)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 100 * 700), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


@contextlib.contextmanager
def made_to_keep() -> Iterator[None]:
    """For a block whose objects are all kept and in no cycle (the summary: a dozen objects
    per checkpoint): no collection walks them meanwhile, and at the end they join the oldest
    generation, so the next young collection does not walk them either (0.02 s of `finish`
    at 2M records; pausing the collector alone only put its walk after the block). Replay
    only: a daemon's young objects are left to the collector."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()  # every tracked object to the permanent generation: young ones are none
        gc.unfreeze()  # and back, into the oldest
        if enabled:
            gc.enable()


def read_files(stats: Stats, paths: list[str], workers: int = 1) -> int:
    """Feed files into `stats`; returns how many could be opened."""
    opened = 0
    parsers = _Parsers(workers)
    try:
        for group in order_files(paths):
            for path in group:
                try:
                    read_file(stats, path, parsers)
                    opened += 1
                except TraceError as exc:
                    stats.add_source(SourceReport(path=path, generation="unreadable",
                                                  warnings=[str(exc)]))
    finally:
        parsers.close()
    return opened


def replay(paths: list[str], options: ReplayOptions | None = None) -> Summary:
    """Replay trace files (already expanded) into a summary; TraceError if none can be read."""
    options = options or ReplayOptions()
    stats = new_stats(options)
    with fewer_collections():
        if not read_files(stats, paths, options.workers):
            raise TraceError(
                f"{paths[0]}: could not be read"
                if len(paths) == 1
                else f"none of the {len(paths)} trace files could be read"
            )
        with made_to_keep():
            summary = finish(stats)
        # freed here by reference counting; after the block, the collector at its default
        # threshold would first walk them all (0.05 s on a 2M-record DLIO trace)
        del stats
    return summary
