"""`scrtune calibrate`: fit SCR's own rates on this system to timed runs of a job, and write
them into the system profile that recommend, study and the daemon read."""

from __future__ import annotations

import argparse
import re
import statistics
import sys

import msgspec

from scrtune.cli.argtypes import check_out, format_option
from scrtune.cli.render import fit, table
from scrtune.cli.traces import replay_options, trace_options
from scrtune.errors import UsageError
from scrtune.intents.inputs import ScrRates, load_profile, parse_profile
from scrtune.probe.system import toml_string
from scrtune.study.fitted_rates import RATES

_TABLE = re.compile(r"(?ms)^\[scr_rates\][^\n]*\n.*?(?=^\[|\Z)")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="+", metavar="TRACE",
                        help="a DFTracer trace of the job the runs timed (files, directories or "
                        "globs): its bytes, files and write sizes per checkpoint")
    parser.add_argument("--runs", required=True, metavar="RUNS.json",
                        help="the timed runs (JSON): per SCR configuration, its SCR parameters "
                        "and each run's blocking seconds per checkpoint, optionally its flush "
                        "seconds (the README's calibrate section shows the format)")
    parser.add_argument("--system", required=True, metavar="FILE",
                        help="the system profile the runs ran on (`scrtune profile` writes one)")
    parser.add_argument("-o", "--out", required=True,
                        help="the calibrated profile to write: --system's text with a "
                        "[scr_rates] table (replaced if it had one); `-` for stdout")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument("--leave-one-out", action="store_true",
                        help="also predict each configuration from the others only (one fit "
                        "per configuration: the honest error, slower)")
    format_option(parser)
    trace_options(parser)


def run(args: argparse.Namespace) -> int:
    from scrtune.cli.study_cmd import read_workload
    from scrtune.study import fit as fitting
    from scrtune.study import runs as timed_runs

    check_out(args.out, args.force)
    profile = load_profile(args.system)
    runs = timed_runs.load_runs(args.runs)
    rows = timed_runs.measured(runs, profile)
    load, costs, metadata_s = read_workload(args.traces, profile, "calibrate",
                                            replay_options(args))
    predict = fitting.predictors(load, profile, costs, runs.nodes, runs.ranks_per_node,
                                 metadata_s)
    blocking_s, flush_s = predict.blocking_s, predict.flush_s
    assert flush_s is not None and predict.write_s is not None  # the model predicts both
    timed = [f"{what} of {count}" for what, count in (
        ("flush times", sum(1 for row in rows if row.flush_s)),
        ("the application's writes", sum(1 for row in rows if row.write_s))) if count]
    source = f"fitted by `scrtune calibrate` to {len(rows)} configurations in {args.runs}" \
        + (f" ({', '.join(timed)})" if timed else "")
    rates = fitting.fit_rates(rows, predict, runs.nodes, source, profile)
    before = {r.name: blocking_s(profile.scr_rates, r) for r in rows}
    after = {r.name: blocking_s(rates, r) for r in rows}
    predictions = {"profile as given": before, "calibrated": after}
    if args.leave_one_out:
        predictions["calibrated, leave-one-out"] = fitting.leave_one_out(
            rows, predict, runs.nodes, profile, everything=rates)
    _write(args.out, args.system, rates)
    scores = {label: _score([r.blocking_s for r in rows], [predicted[r.name] for r in rows])
              for label, predicted in predictions.items()}
    # how well one flush's time is predicted, where the runs timed it: not an asynchronous
    # one's SCR_DEBUG time, which runs until SCR noticed its end (a bound, see fit.py), unless
    # the runs noted its real end; and the first checkpoint's writes, where the runs timed
    # their phases
    flushed = [row for row in rows
               if row.flush_s and (row.flush_exact or not row.config.flush_async)]
    written = [row for row in rows if row.write_s]
    for label, timed_rows, measured_of, predicted_of in (
            ("calibrated flush times", flushed, lambda row: row.flush_s, flush_s),
            ("calibrated application's writes", written, lambda row: row.write_s,
             predict.write_s)):
        if len(timed_rows) > 1:
            scores[label] = _score([measured_of(row) for row in timed_rows],
                                   [predicted_of(rates, row) for row in timed_rows])
    # with `-o -` the profile is standard output, and the report goes to standard error
    report = sys.stderr if args.out == "-" else sys.stdout
    if args.format == "json":
        report.write(msgspec.json.encode({
            "profile": args.out, "scr_rates": rates, "scores": scores,
            "configurations": [{"name": r.name, "measured_s": r.blocking_s,
                                **{label: p[r.name] for label, p in predictions.items()}}
                               for r in rows]}).decode() + "\n")
    else:
        report.write(_readable(rows, predictions, scores, rates, args.out))
    return 0


def _score(measured: list[float], predicted: list[float]) -> dict[str, float]:
    """Errors and rank correlation; also how many distinct values the predictions take, for
    predictions that tie configurations rank them as equals, which Spearman's correlation
    scores as neither right nor wrong (issue 48: the uncalibrated profile, one value for every
    configuration of a copy type and flush kind, ranked the thirteenth grid 0.91, the
    calibrated model 0.88, at 53% and 8% median error)."""
    from scrtune.study.fit import spearman

    errors = [abs(p - m) / m for m, p in zip(measured, predicted)]
    return {"median_error": statistics.median(errors), "largest_error": max(errors),
            "rank_correlation": spearman(measured, predicted),
            "configurations": len(predicted), "distinct_predictions": len(set(predicted))}


def render_rates(rates: ScrRates) -> str:
    lines = ["[scr_rates]  # SCR's own rates on this system: recommend, study and the daemon "
             "use them", f"source = {toml_string(rates.source)}",
             f"nodes = {rates.nodes}  # the node count of the runs; rates are per node"]
    for rate in RATES:
        value = getattr(rates, rate.name)
        said = rate.shown(value)
        if rate.name in rates.undetermined:
            said += " (not determined by these runs)"
        lines.append(f"{rate.name} = {float(f'{value:.4g}')!r}  # {said}")
    if rates.undetermined:
        lines.append("# not determined: no run depends on it (then the uncalibrated model's "
                     "value), the search stopped at its bound, or a factor of 2 on it, the "
                     "others refitted, moves the runs it acts on by less than 5%")
        lines.append(f"undetermined = {list(rates.undetermined)!r}".replace("'", '"'))
    return "\n".join(lines) + "\n"


def _write(out: str, system: str, rates: ScrRates) -> None:
    try:
        with open(system, encoding="utf-8") as handle:
            text = _TABLE.sub("", handle.read()).rstrip("\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{system}: {getattr(exc, 'strerror', None) or exc}") from None
    text = f"{text}\n\n{render_rates(rates)}"
    parse_profile(text, out)  # what is written must load
    if out == "-":
        sys.stdout.write(text)
        return
    try:
        with open(out, "w", encoding="utf-8") as handle:
            handle.write(text)
    except OSError as exc:
        raise UsageError(f"{out}: {exc.strerror or exc}") from None


def _short_name(name: str, width: int = 36) -> str:
    return name if len(name) <= width else name[:width - 3] + "..."


def _readable(rows, predictions, scores, rates: ScrRates, out: str) -> str:
    labels = list(predictions)
    body = [[_short_name(r.name), f"{r.blocking_s:.3f}",
             *(f"{predictions[label][r.name]:.3f} "
               f"({100 * (predictions[label][r.name] / r.blocking_s - 1):+.0f}%)"
               for label in labels)] for r in sorted(rows, key=lambda r: r.blocking_s)]
    short = {"profile as given": "profile", "calibrated": "calibrated",
             "calibrated, leave-one-out": "left out"}  # within 100 columns (issue 49)
    lines = ["blocking seconds per checkpoint, measured and as the study's model predicts "
             "(profile: as given; left out: fitted without that configuration):", "",
             table(["configuration", "measured", *(short.get(x, x) for x in labels)], body),
             ""]
    lines += [f"{label}: median error {100 * s['median_error']:.0f}%, largest "
              f"{100 * s['largest_error']:.0f}%, rank correlation {s['rank_correlation']:.2f}"
              + _ties(s) for label, s in scores.items()]
    lines += ["", render_rates(rates).rstrip("\n"), "",
              (f"wrote {out}" if out != "-" else "the profile is on standard output")
              + ": use it with --system (recommend, study, daemon)"]
    return fit("\n".join(lines) + "\n")


def _ties(score: dict[str, float]) -> str:
    """What a rank correlation over tied predictions means, where they tie."""
    distinct, count = score["distinct_predictions"], score["configurations"]
    if distinct >= count:
        return ""
    return (f" (the predictions take {distinct:.0f} values for {count:.0f}: tied ones rank "
            "as equals)")
