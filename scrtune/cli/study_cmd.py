"""`scrtune study`: alternatives to `recommend`, what each would cost, and why."""

from __future__ import annotations

import argparse
import sys

import msgspec

from scrtune.cli.argtypes import format_option
from scrtune.cli.render import fit, table
from scrtune.cli.traces import (
    checked,
    job_interval_option,
    keeping_cadence,
    replay_options,
    trace_files,
    trace_options,
    with_example,
)
from scrtune.engine.replay import (
    EXAMPLE_PROFILE,
    EXAMPLE_TRACE,
    ReplayOptions,
    new_stats,
    read_files,
)
from scrtune.engine.summary import finish
from scrtune.errors import TraceError, UsageError
from scrtune.extras import missing
from scrtune.intents.inputs import MAX_NODES, SystemProfile, WorkloadStats, profile_from
from scrtune.study.calibrate import TierCost, calibrate
from scrtune.study.study import Study, default_grid, grid_from_toml, run
from scrtune.units import human_us, plural

TOP = 8
METADATA_CALLS = frozenset({"open", "open64", "openat", "close", "stat", "lstat", "fstat",
                            "__xstat", "__xstat64", "access", "mkdir", "unlink", "rename"})


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="*", metavar="TRACE",
                        help="trace files, directories or globs")
    parser.add_argument("--example", action="store_true",
                        help="study the trace shipped with scrtune on the example system profile")
    parser.add_argument("--system", metavar="FILE", help="system profile (TOML; default: "
                        "this machine as measured, storage assumed)")
    parser.add_argument("--nodes", default="2,4,8,16", help="comma-separated node counts")
    parser.add_argument("--grid", metavar="FILE", help="TOML with a list per field: copy_type "
                        "(SINGLE, PARTNER, XOR, RS), bypass (true/false), file_buf_bytes, "
                        "flush_async, threads_on_idle_cores, flush_every (0: no flush), "
                        "transfer_threads (0: AXL's count); every combination is studied, "
                        "fields left out take the default grid's values, and configurations "
                        "SCR cannot tell apart are merged (default: a grid chosen from the "
                        "trace)")
    format_option(parser)
    job_interval_option(parser)
    trace_options(parser)
    parser.add_argument("--plot", metavar="FILE.png", help="draw predicted blocking time and "
                        "goodput against nodes, with the cache/bypass crossover (needs "
                        "matplotlib)")


def run_study(args: argparse.Namespace) -> int:
    try:
        nodes = sorted({int(n) for n in args.nodes.split(",") if n.strip()})
    except ValueError:
        raise UsageError("--nodes takes a comma-separated list of counts, e.g. 2,4,8") from None
    if not nodes or nodes[0] < 1 or nodes[-1] > MAX_NODES:
        raise UsageError(f"--nodes needs counts from 1 to {MAX_NODES:,}")
    traces = with_example(args.traces, args.example, EXAMPLE_TRACE)
    profile = profile_from(args.system or (EXAMPLE_PROFILE if args.example else None))
    load, costs, metadata_s = read_workload(traces, profile, "study", replay_options(args))
    load = keeping_cadence(load, args.job_interval_s)
    try:
        grid = grid_from_toml(args.grid, load) if args.grid else default_grid(load)
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"--grid: {exc}") from None
    result = run(load, profile, costs, nodes, grid, metadata_s)
    if args.plot:
        try:
            from scrtune.study.plot import plot

            plot(result, args.plot)
        except ImportError:
            raise missing("--plot", "matplotlib", "plot") from None
        except OSError as exc:
            raise UsageError(f"--plot {args.plot}: {exc.strerror or exc}") from None
    sys.stdout.write(msgspec.json.encode(result).decode() + "\n" if args.format == "json"
                     else _table(result))
    return 0


def read_workload(traces: list[str], profile: SystemProfile, command: str,
                  options: ReplayOptions | None = None
                  ) -> tuple[WorkloadStats, list[TierCost], float | None]:
    """The traces' workload, the per-call costs they show on the profile's tiers, and the mean
    cost of their metadata calls (None: they have none)."""
    stats = new_stats(options or ReplayOptions())
    if not read_files(stats, trace_files(traces)):
        raise TraceError("no trace file could be read")
    tiers = {t.path: name for name, t in (("local", profile.node_local),
                                          ("pfs", profile.parallel)) if t is not None}
    costs = calibrate(stats, tiers)
    summary = checked(finish(stats), command)  # calibrated: nothing reads stats after this
    load = WorkloadStats.from_summary(summary)
    metadata = [o for o in summary.ops if o.name in METADATA_CALLS and o.calls]
    metadata_s = sum(o.dur_us for o in metadata) / sum(o.calls for o in metadata) / 1e6 \
        if metadata else None
    if not load.checkpoints:
        raise UsageError(f"the traces hold no checkpoint to {command}")
    return load, costs, metadata_s


def _table(result: Study) -> str:
    out = []
    for index, n in enumerate(result.nodes):
        rows = sorted(result.rows, key=lambda r: -r.predictions[index].goodput)[:TOP]
        out.append(f"{plural(n, 'node')} x {plural(result.ranks_per_node, 'rank')} (best {TOP} "
                   "by goodput; * on the Pareto front of blocking and flush time):")
        out.append(table(["configuration", "blocking", "flush", "goodput", ""],
                         [[r.label, human_us(r.predictions[index].blocking_s * 1e6),
                           human_us(r.predictions[index].flush_s * 1e6),
                           f"{100 * r.predictions[index].goodput:.3f}%",
                           "*" if n in r.pareto_nodes else ""] for r in rows]))
    # by blocking time alone: the goodput column above also weighs the flush and what a
    # failure loses, and may rank bypass first at that count
    out.append("caching blocks less than bypass " + (
        f"from {plural(result.crossover_nodes, 'node')}" if result.crossover_nodes else
        "at no node count") + " (blocking per checkpoint; goodput also weighs the flush and "
        "what a failure loses)")
    out += [f"assumption: {a}" for a in result.assumptions]
    return fit("\n".join(out) + "\n")
