"""`scrtune replay`: trace files to a summary of their checkpoint I/O."""

from __future__ import annotations

import argparse
import sys

import msgspec

from scrtune.cli import render
from scrtune.cli.argtypes import format_option
from scrtune.cli.traces import replay_options, trace_files, trace_options, with_example
from scrtune.engine.mpi_replay import launched_by_mpi, replay_mpi
from scrtune.engine.replay import EXAMPLE_TRACE, replay
from scrtune.engine.retire import LISTED_WINDOWS
from scrtune.engine.summary import no_events_reason
from scrtune.errors import UsageError
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
    trace_options(parser)
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
    paths = with_example(args.traces, args.example, EXAMPLE_TRACE)
    if args.listed_windows < 0:
        raise UsageError("--listed-windows must be 0 (all) or more")
    options = replay_options(args, args.listed_windows or None)
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
