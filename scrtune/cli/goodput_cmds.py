"""`scrtune goodput` and `scrtune interval`."""

from __future__ import annotations

import argparse
import sys

import msgspec

from scrtune.cli.argtypes import finite_float, format_option, positive_seconds
from scrtune.cli.render import fit, table
from scrtune.cli.traces import trace_options
from scrtune.daemon.feedback import saved_verdicts
from scrtune.errors import StoreError, UsageError
from scrtune.extras import missing
from scrtune.goodput.calculator import BUCKETS, LABELS, Report, compute, window
from scrtune.goodput.columns import EventLog
from scrtune.goodput.readers import Loaded, read_jsonl, read_store
from scrtune.goodput.store import Store
from scrtune.goodput.tuner import Experiment
from scrtune.units import human_seconds, plural


def configure_goodput(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="*", metavar="TRACE",
                        help="DFTracer traces (checkpoint regions with steps, compute regions)")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--db", help="the daemon's SQLite state file")
    source.add_argument("--log", help="JSON lines: scrtune's schema or the resiliency library's")
    parser.add_argument("--job", help="the job to measure (default: the only one)")
    trace_options(parser)
    parser.add_argument("--ideal-step-time", type=positive_seconds, metavar="S",
                        help="seconds per step at full speed (default: estimated)")
    parser.add_argument("--now", type=finite_float, metavar="EPOCH_S",
                        help="for a running job: measure up to this time")
    format_option(parser)
    parser.add_argument("--since", type=finite_float, metavar="EPOCH_S",
                        help="with --until: also report the buckets within this time window")
    parser.add_argument("--until", type=finite_float, metavar="EPOCH_S",
                        help="with --since: the end of the window to break down")
    parser.add_argument("--plot", metavar="FILE.png",
                        help="draw the timeline and the breakdown (needs the [plot] extra)")


def run_goodput(args: argparse.Namespace) -> int:
    if bool(args.traces) + bool(args.db) + bool(args.log) != 1:
        raise UsageError("give one source: TRACE files, --db or --log")
    ideal, method = args.ideal_step_time, "given"
    if args.traces:
        loaded, suggested = _from_traces(args.traces, args.job, args)
        if not ideal and suggested:
            ideal, method = suggested, "mean compute-region time in the trace"
    else:
        loaded = read_store(args.db, args.job) if args.db else read_jsonl(args.log, args.job)
    if args.job is None and len(loaded.jobs) > 1:
        raise UsageError(f"several jobs ({', '.join(sorted(loaded.jobs))}): choose one "
                         "with --job")
    if not loaded.log.selected_events():
        raise UsageError("no goodput events" + (f" for job {args.job}" if args.job else ""))
    report = compute(loaded.log, ideal, args.now, method)
    if args.plot:
        from scrtune.goodput.plot import plot

        try:
            plot(report, args.plot, args.job or "")
        except ImportError:
            raise missing("--plot", "matplotlib", "plot") from None
        except OSError as exc:
            raise UsageError(f"--plot {args.plot}: {exc.strerror or exc}") from None
    span = None
    if args.since is not None or args.until is not None:
        since = args.since if args.since is not None else report.segments[0].start_s
        until = args.until if args.until is not None else report.segments[-1].end_s
        if until <= since:
            raise UsageError("--until must be after --since")
        span = (since, until, window(report, since, until))
    decided = _experiments(args.db) if args.db else []
    if args.format == "json":
        body = _json(report, loaded, span, decided)
    else:
        body = _table(report, loaded) + (_window_table(span) if span else "")
        body += "".join(f"experiment {e.summary()}\n" for e in decided)
    sys.stdout.write(body)
    return 1 if report.errors else 0


def _window_table(span) -> str:
    since, until, seconds = span
    length = until - since
    rows = [[LABELS.get(b, "Effective computation"), f"{v:,.1f}", f"{100 * v / length:.1f}%"]
            for b, v in seconds.items() if v > 0]
    return f"\nwindow {since:.0f} .. {until:.0f} ({length:,.0f} s):\n" + \
        table(["category", "seconds", "share"], rows)


def _from_traces(paths: list[str], job: str | None, args: argparse.Namespace
                 ) -> tuple[Loaded, float | None]:
    from scrtune.cli.traces import replay_for, replay_options
    from scrtune.goodput.from_trace import events_from_summary

    events, ideal = events_from_summary(replay_for(paths, "measure", replay_options(args)),
                                        job or "trace")
    return Loaded(log=EventLog.of(events)), ideal


def _experiments(path: str) -> list[Experiment]:
    """The daemon's verdicts on its changes of configuration, in the words its log has."""
    store = Store(path, read_only=True)
    try:
        return saved_verdicts(store)
    except (msgspec.DecodeError, StoreError) as exc:
        raise UsageError(f"{path}: the experiments' verdicts cannot be read: {exc}") from None
    finally:
        store.close()


def _json(report: Report, loaded: Loaded, span=None,
          decided: list[Experiment] | tuple = ()) -> str:
    body = msgspec.to_builtins(report)
    body["experiments"] = [{**msgspec.to_builtins(e), "summary": e.summary()} for e in decided]
    body["bad_lines"] = loaded.bad_lines
    body["warnings"] = loaded.warnings + report.warnings
    if span:
        body["window"] = {"since_s": span[0], "until_s": span[1], "seconds": span[2]}
    return msgspec.json.encode(body).decode() + "\n"


def _table(report: Report, loaded: Loaded) -> str:
    total = report.total_s or 1.0
    rows = [["Total time", human_seconds(report.total_s), "100%"],
            ["Effective computation", human_seconds(report.effective_s),
             f"{100 * report.effective_s / total:.1f}%"]]
    rows += [[LABELS[b], human_seconds(report.badput_s[b]),
              f"{100 * report.badput_s[b] / total:.1f}%"]
             for b in BUCKETS if report.badput_s[b] > 0 or b == "other"]
    out = [table(["category", "time", "share"], rows)]
    out.append(f"goodput {report.goodput_pct:.1f}%: {plural(report.net_steps, 'net step')} x "
               f"{human_seconds(report.ideal_step_s)} ideal ({report.ideal_method}); "
               f"{plural(report.runs, 'run')}" + (" (still running)" if report.running else ""))
    out += [f"warning: {w}" for w in loaded.warnings + report.warnings + loaded.bad_lines]
    out += [f"error: {e}" for e in report.errors]
    return fit("\n".join(out) + "\n")
