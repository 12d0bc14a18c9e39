"""Traces read for a command that needs their events (recommend, study, goodput): the replay's
warnings go to stderr, and a file set without a single trace record is an error, since an
answer from nothing would look like one from something."""

from __future__ import annotations

import argparse
import re
import sys

import msgspec

from scrtune.cli.argtypes import ckpt_pattern_option, non_negative_int, positive_seconds
from scrtune.engine.classify import DEFAULT_PATH_PATTERNS, CheckpointPatterns
from scrtune.engine.replay import ReplayOptions, replay
from scrtune.engine.summary import Summary, no_events_reason
from scrtune.errors import UsageError
from scrtune.events.pool import default_workers
from scrtune.events.reader import expand_paths
from scrtune.heap import hold_freed_memory
from scrtune.intents.inputs import WorkloadStats


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


def replay_for(paths: list[str], purpose: str, options: ReplayOptions | None = None
               ) -> Summary:
    """Replay trace files, directories or globs for `purpose` ("recommend from", ...)."""
    options = options or ReplayOptions(workers=default_workers())
    return checked(replay(trace_files(paths), options), purpose)


def trace_options(parser: argparse.ArgumentParser) -> None:
    """How traces are read, the same for every command that reads them (replay, recommend,
    study, calibrate, goodput, query --trace): a job whose checkpoint files match none of the
    default patterns is tuned as it is replayed."""
    parser.add_argument("--workers", type=non_negative_int, default=0,
                        help="parse processes/threads (0: one per core; 1: this process only)")
    ckpt_pattern_option(parser, f"the defaults: {', '.join(DEFAULT_PATH_PATTERNS)}")
    parser.add_argument("--horizon-s", type=positive_seconds, default=600.0,
                        help="longest checkpoint region expected, seconds")


def replay_options(args: argparse.Namespace, listed_windows: int | None = None
                   ) -> ReplayOptions:
    """The ReplayOptions of trace_options(), checked: a bad pattern is a one-line error."""
    return ReplayOptions(patterns=checkpoint_patterns(args.ckpt_pattern),
                         horizon_us=int(args.horizon_s * 1e6),
                         workers=args.workers or default_workers(),
                         listed_windows=listed_windows)


def checkpoint_patterns(given: list[str] | None) -> CheckpointPatterns:
    """--ckpt-pattern's patterns (the defaults when none), each compiled once to say which
    one is not a regular expression."""
    for pattern in given or ():
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--ckpt-pattern {pattern!r}: {exc}") from None
    return CheckpointPatterns(path_patterns=tuple(given)) if given else CheckpointPatterns()


def with_example(traces: list[str], example: bool, example_trace: str) -> list[str]:
    """The traces to read: the shipped one with --example, else those given; both at once
    would merge two jobs into one answer."""
    if example and traces:
        raise UsageError("--example reads the shipped trace: give it or TRACE files, not both")
    paths = [example_trace] if example else list(traces)
    if not paths:
        raise UsageError("give trace files, directories or globs, or --example")
    return paths


TRACE_CADENCE = "trace"


def job_interval_option(parser: argparse.ArgumentParser) -> None:
    """recommend and study: a job that checkpoints on its own cadence is planned at it."""
    parser.add_argument(
        "--job-interval-s", type=_job_interval, metavar="SECONDS|trace",
        help="the job checkpoints this often on its own (every N steps, start to start; "
        "'trace': as often as the trace did) and does not ask SCR_Need_checkpoint: redundancy, "
        "flush cadence and waste are weighed at its compute gap, where a slower checkpoint "
        "costs its time in every interval (default: the job follows the interval recommended, "
        "SCR_CHECKPOINT_SECONDS)")


def _job_interval(text: str) -> float | str:
    return TRACE_CADENCE if text == TRACE_CADENCE else positive_seconds(text)


def keeping_cadence(load: WorkloadStats, given: float | str | None) -> WorkloadStats:
    """The workload with the cadence --job-interval-s says the job keeps: longer than a
    checkpoint of the trace, which the job's steps do not shorten."""
    if given is None:
        return load
    interval_s = load.interval_s if given == TRACE_CADENCE else float(given)
    if interval_s <= 0:
        raise UsageError("--job-interval-s trace: the trace has fewer than two checkpoints, "
                         "no cadence to keep; give the interval in seconds")
    if interval_s <= load.ckpt_dur_s:
        raise UsageError(f"--job-interval-s {interval_s:g}: not longer than the trace's "
                         f"checkpoint ({load.ckpt_dur_s:.3g} s), no compute between two")
    return msgspec.structs.replace(load, job_interval_s=interval_s)
