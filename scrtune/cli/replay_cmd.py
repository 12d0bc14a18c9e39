"""`scrtune replay`: trace files to a summary of their checkpoint I/O."""

from __future__ import annotations

import argparse
import sys

import msgspec

from scrtune.cli import render
from scrtune.cli.argtypes import format_option, seconds
from scrtune.cli.traces import trace_files
from scrtune.engine.classify import DEFAULT_PATH_PATTERNS, CheckpointPatterns
from scrtune.engine.mpi_replay import launched_by_mpi, replay_mpi
from scrtune.engine.replay import EXAMPLE_TRACE, ReplayOptions, replay
from scrtune.engine.retire import LISTED_WINDOWS
from scrtune.engine.summary import no_events_reason
from scrtune.errors import UsageError
from scrtune.events.pool import default_workers
from scrtune.extras import missing


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "traces",
        nargs="*",
        metavar="TRACE",
        help="trace files (.pfw, .pfw.gz), directories or glob patterns",
    )
    parser.add_argument(
        "--example", action="store_true", help="replay the small real trace shipped with scrtune"
    )
    format_option(parser)
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="parse processes (default: one per core; 1 = this process only)",
    )
    parser.add_argument(
        "--ckpt-pattern",
        action="append",
        default=None,
        metavar="REGEX",
        help="path pattern marking checkpoint files (repeatable; replaces the "
        f"defaults: {', '.join(DEFAULT_PATH_PATTERNS)})",
    )
    parser.add_argument(
        "--horizon-s",
        type=seconds,
        default=600.0,
        help="longest checkpoint region expected, seconds (default 600)",
    )
    parser.add_argument(
        "--listed-windows",
        type=int,
        default=LISTED_WINDOWS,
        metavar="N",
        help="checkpoint windows (one process's save or restore) listed, the latest; older "
        f"ones count in the totals only, so memory stays flat (default {LISTED_WINDOWS:,}; "
        "0 = all)",
    )
    parser.add_argument(
        "--mpi",
        action="store_true",
        help="split files across MPI ranks (automatic under mpirun with >1 rank)",
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="also list invalid lines (file and line) and every file read",
    )


def run(args: argparse.Namespace) -> int:
    paths = list(args.traces)
    if args.example:
        paths.append(EXAMPLE_TRACE)
    if not paths:
        raise UsageError("give trace files, directories or globs, or --example")
    if args.workers < 0 or args.horizon_s <= 0 or args.listed_windows < 0:
        raise UsageError("--workers and --listed-windows must be >= 0 and --horizon-s > 0")
    patterns = (
        CheckpointPatterns(path_patterns=tuple(args.ckpt_pattern))
        if args.ckpt_pattern
        else CheckpointPatterns()
    )
    _check_patterns(patterns)
    options = ReplayOptions(
        patterns=patterns,
        horizon_us=int(args.horizon_s * 1e6),
        workers=args.workers or default_workers(),
        listed_windows=args.listed_windows or None,
    )
    files = trace_files(paths)
    if args.mpi or launched_by_mpi():
        try:
            import mpi4py  # noqa: F401  (checked here: replay_mpi imports it inside)
        except ImportError:
            raise missing("--mpi (or a launch by mpirun/srun with several ranks)", "mpi4py",
                          "mpi") from None
        summary = replay_mpi(files, options)
        if summary is None:  # not rank 0
            return 0
    else:
        summary = replay(files, options)
    if not summary.records:
        raise UsageError(no_events_reason(summary))
    if args.format == "json":
        sys.stdout.write(msgspec.json.encode(summary).decode() + "\n")
    else:
        sys.stdout.write(render.replay_table(summary, verbose=args.verbose))
    return 0


def _check_patterns(patterns: CheckpointPatterns) -> None:
    import re

    for pattern in patterns.path_patterns:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise UsageError(f"--ckpt-pattern {pattern!r}: {exc}") from None
