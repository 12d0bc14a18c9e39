"""Does the calibrated model hold on configurations it was not fitted to? (issue 48)

    python benchmarks/model_holdout.py [--runs benchmarks/results/real_scr_whole.json]

The runs: the real SCR v3.1.0 on this machine, one job under every configuration of a grid
(benchmarks/real_scr_tuning.py: copy type x file buffer x flush type, cadence and transfer-
thread binding, and bypass; real_scr_threads.json also transfer-thread counts under a 2 ms
write call), each timed per checkpoint, with SCR_DEBUG's flush times. They are split into
groups of configurations that share one dimension's value, by what SCR reads (all PARTNER runs;
all asynchronous flushes with threads bound to the ranks' cores; SCR's defaults with bypass,
which they are in v3.1.0; ...). For each group, the rates
are fitted (`scrtune calibrate`'s fit) to every run outside it, and the group's blocking times
predicted. Reported: per group and over all held-out predictions, the median relative error and
the rank correlation with what was measured (beside it, how well the model's form ranks the
same runs when fitted to every run of the grid, which a held-out fit seldom beats); and a
constant guess (the median blocking time of the runs fitted to) on the same group, which the
model must beat; and how well the runs rank the group against themselves (odd against even
repetitions), which bounds any model. Over every cached run, the model and a half of each
configuration's runs are also ranked against the rest of its runs, every way of splitting
them: a model at the repeat's figure ranks the grid as well as running it again would; beside
them, each class's mean (a copy type and flush kind) taken from the half, what a model right
about every class and blind within one would score; and how a model without error would rank
runs as noisy as these (benchmarks/run_noise.py): under it, the model's form falls short.
Goals (issue 48): held-out median error <= 25%, rank correlation >= 0.9, better than the
constant on every group. `--jobs N`: the fits (one a group held out, one to every run) in N
processes side by side (benchmarks/forked.py; default the CPUs it may use), the report the
same whatever N.

    python benchmarks/model_holdout.py --runs B.json --against A.json C.json ...

Against the other measurements of the same job (benchmarks/same_job.py): the held-out
predictions and B's own runs, ranked by the runs of A, C, ... (each configuration relative to
its grid's mean, averaged over them); each group's median error beside the constant's.

    python benchmarks/model_holdout.py --calibrated-on A.json --runs B.json

Across jobs: the rates fitted to every run of grid A (one job) predict every cached run of
grid B (another job, or the same one measured again) on B's own trace, as a system profile
calibrated once serves every job. Reported beside the profile alone and a constant guess.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

import forked  # noqa: E402
from holdout_report import print_held_out, print_transferred  # noqa: E402
from run_noise import against_halves, repeatability, spread, without_error  # noqa: E402
from same_job import against_others, check_same_job, grids_another_day  # noqa: E402

from scrtune.cli.study_cmd import read_workload  # noqa: E402
from scrtune.errors import UsageError  # noqa: E402
from scrtune.intents.inputs import (  # noqa: E402
    ScrRates,
    SystemProfile,
    ThreadShare,
    load_profile,
)
from scrtune.study import fit as fitting  # noqa: E402
from scrtune.study import runs as timed_runs  # noqa: E402
from scrtune.study.model import Config  # noqa: E402


def groups_of(config: Config) -> list[str]:
    """The groups a configuration belongs to, by what SCR reads (so two names for one
    configuration, SCR's defaults and bypass in v3.1.0, are held out together): its copy type,
    its buffer, its flush kind and, for an asynchronous flush, its transfer threads."""
    if config.bypass:
        return ["bypass"]
    if config.flush_every == 0:
        flush = "none"
    elif config.flush_async:
        where = "free" if config.threads_on_idle_cores else "bound"
        flush = f"async/{config.flush_every} {where}"
    else:
        flush = f"sync/{config.flush_every}"
    groups = [f"copy {config.copy_type}", f"buffer {config.file_buf_bytes >> 20} MiB",
              f"flush {flush}"]
    if config.flush_async and config.transfer_threads:
        groups.append(f"{config.transfer_threads} transfer threads")
    return groups


@dataclass(frozen=True)
class Grid:
    """A grid's runs as the fit sees them, with the model on its own trace and profile."""
    profile: SystemProfile
    runs: timed_runs.TimedRuns
    rows: list[timed_runs.Measured]
    predict: fitting.Predictors


def read_grid(path: str, to_fit: bool = True, shares: tuple[ThreadShare, ...] = ()) -> Grid:
    """A grid of real_scr_tuning.py --json; one it cannot use is a UsageError naming it (one
    only predicted, with rates fitted to another grid, need not hold enough to fit).
    `shares`: transfer threads' busy shares for a profile measured before it had them."""
    grid, profile = _grid_file(path)
    if shares and not profile.transfer_thread_shares:
        profile = msgspec.structs.replace(profile, transfer_thread_shares=shares)
    if "trace" not in grid:
        raise UsageError(f"{path}: no field 'trace' (not a grid of real_scr_tuning.py --json)")
    trace = os.path.join(ROOT, grid["trace"])
    load, costs, metadata_s = read_workload([trace], profile, "validate")
    runs = timed_runs.load_runs(path, to_fit)
    predict = fitting.predictors(load, profile, costs, runs.nodes, runs.ranks_per_node,
                                 metadata_s)
    return Grid(profile, runs, timed_runs.measured(runs, profile), predict)


def read_measured(path: str) -> tuple[list[timed_runs.Measured], dict[str, int]]:
    """A grid's configurations as measured, and each one's run count: what --against reads of
    the other grids (their traces, which only a prediction needs, are not read)."""
    _, profile = _grid_file(path)
    runs = timed_runs.load_runs(path, to_fit=False)
    return timed_runs.measured(runs, profile), {name: len(times)
                                                for name, times in runs.runs.items()}


def _grid_file(path: str) -> tuple[dict, SystemProfile]:
    """The grid's JSON and its profile; a UsageError naming the file where it is not a grid."""
    try:
        with open(path) as handle:
            grid = json.load(handle)
        profile_path = grid["profile"]
    except KeyError as exc:
        raise UsageError(f"{path}: no field {exc} (not a grid of real_scr_tuning.py --json)"
                         ) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None
    return grid, _with_dirty_allowance(load_profile(os.path.join(ROOT, profile_path)), grid)


def _with_dirty_allowance(profile: SystemProfile, grid: dict) -> SystemProfile:
    """The grid's profile with its nodes' dirty allowance where the profile has none (it
    predates the field) and the grid bounded the kernel's dirty pages (`dirty_mb`, a quarter
    of it the background threshold real_scr_tuning.py sets). The grid's nodes are one machine
    posing as several: they share one kernel's. A grid that left the kernel as it was
    recorded not the memory it could fill: its allowance stays unknown."""
    parallel = profile.parallel
    dirty_mb = grid.get("dirty_mb") or 0
    if parallel is None or parallel.dirty_allowance_bytes or dirty_mb <= 0:
        return profile
    allowance = (dirty_mb << 20) // 4 / max(int(grid.get("nodes") or 1), 1)
    return msgspec.structs.replace(profile, parallel=msgspec.structs.replace(
        parallel, dirty_allowance_bytes=float(allowance)))


def transferred(calibration: str, path: str, shares: tuple[ThreadShare, ...] = ()) -> dict:
    """Rates fitted to every run of one grid (`calibration`, one job), the runs of another
    (`path`, another job on the same machine) predicted with them on its own trace: what
    `calibrate` claims when its rates, written into the system profile, serve every job. Also
    the profile alone (uncalibrated) on the same runs, and a constant guess (the median
    blocking time of the runs fitted to)."""
    source, target = read_grid(calibration, shares=shares), read_grid(path, False, shares)
    rates = fitting.fit_rates(source.rows, source.predict, source.runs.nodes,
                              profile=source.profile)
    cached = [row for row in target.rows if not row.config.bypass]
    constant = statistics.median(row.blocking_s for row in source.rows)
    report = {"calibrated_on": calibration, "runs": path, "cached_runs": len(cached)}
    for name, given in (("calibrated", rates), ("profile_alone", None)):
        predicted = {row.name: target.predict.blocking_s(given, row) for row in cached}
        report[name] = {"median_error": _median_error(cached, predicted),
                        "rank_correlation": fitting.spearman(
                            [r.blocking_s for r in cached], [predicted[r.name] for r in cached])}
    report["constant_error"] = _median_error(cached, {r.name: constant for r in cached})
    return report


def held_out(path: str, against: Sequence[str] = (),
             shares: tuple[ThreadShare, ...] = (), jobs: int = forked.usable_cpus()) -> dict:
    """Each group held out in turn (the rates fitted to the runs outside it); `against`:
    other grids of the same job, whose runs the held-out predictions are also ranked by;
    `jobs`: processes fitting side by side."""
    if against:
        check_same_job(path, against)
    grid = read_grid(path, shares=shares)
    fits, fitted_to_all = _group_fits(grid, jobs)
    report = {group: _group_report(grid, fit) for group, fit in fits.items()}
    everything = _copy_type_held_out(path, grid, fits)
    held = [row for row in grid.rows if row.name in everything]
    measured = [r.blocking_s for r in held]
    classes = {r.name: _class_of(r.config) for r in held}
    whole = {"runs": len(held), "median_error": _median_error(held, everything),
             "rank_correlation": fitting.spearman(measured, [everything[r.name] for r in held]),
             "form_rank_correlation": _form_rank(grid, fitted_to_all, held, measured),
             "repeatability": repeatability(grid.runs.runs, [r.name for r in held]),
             "against_halves": against_halves(grid.runs.runs, everything, classes),
             "without_error": without_error(grid.runs.runs, classes),
             "spread": spread(grid.runs.runs, [r.name for r in held])}
    if against:
        others = [read_measured(other) for other in against]
        whole["against_others"] = against_others(
            grid.rows, everything, {group: (fit.predicted, fit.constant)
                                    for group, fit in fits.items() if isinstance(fit, GroupFit)},
            [rows for rows, _ in others], [counts for _, counts in others],
            grids_another_day(path, against))
    return {"runs": path, "groups": report, "all_held_out": whole}


def by_copy_type(path: str, shares: tuple[ThreadShare, ...] = (),
                 jobs: int = forked.usable_cpus()) -> tuple[Grid, dict[str, float]]:
    """A grid and every cached run's prediction with its copy type held out (the rates fitted
    to the runs of the other copy types and bypass), as `held_out` ranks them: the copy
    groups' fits, not the other groups'."""
    grid = read_grid(path, shares=shares)
    fits, _ = _group_fits(grid, jobs, wanted=_is_copy_group)
    return grid, _copy_type_held_out(path, grid, fits)


def _is_copy_group(group: str) -> bool:
    return group.startswith("copy")


def _copy_type_held_out(path: str, grid: Grid, fits: dict[str, GroupFit | Unfitted]
                        ) -> dict[str, float]:
    """The copy groups partition the cached runs: each one's prediction, its copy type held
    out. A grid where no copy type can be held out is a UsageError naming it."""
    everything = {name: value for group, fit in fits.items() if _is_copy_group(group)
                  and isinstance(fit, GroupFit) for name, value in fit.predicted.items()}
    if not everything:
        distinct = len({row.config for row in grid.rows})
        raise UsageError(f"{path}: holding any copy type out leaves fewer than "
                         f"{timed_runs.MIN_CONFIGS} configurations to fit ({distinct} in all); "
                         f"predict it from another grid with --calibrated-on")
    return everything


@dataclass(frozen=True)
class GroupFit:
    """A group held out: its runs, the model's predictions for them from the rates fitted to
    every run outside it, and the constant guess (those runs' median)."""
    inside: list
    predicted: dict[str, float]
    constant: float


@dataclass(frozen=True)
class Unfitted:
    """A group whose runs outside it hold too few configurations to fit (a grid of few flush
    kinds: all asynchronous runs held out)."""
    runs: int
    fitted_to: int


def _group_fits(grid: Grid, jobs: int = 1, wanted: Callable[[str], bool] = lambda _: True
                ) -> tuple[dict[str, GroupFit | Unfitted], ScrRates]:
    """Each `wanted` group's fit, where enough configurations lie outside it, and the fit to
    every run (`_form_rank`'s): independent fits, `jobs` processes side by side (forked.py),
    the report the same however many."""
    members: dict[str, list] = {}
    for row in grid.rows:
        for group in filter(wanted, groups_of(row.config)):
            members.setdefault(group, []).append(row)
    fits: dict[str, GroupFit | Unfitted] = {}
    fitted_to: dict[str, list] = {}
    for group, inside in sorted(members.items()):
        configs = {row.config for row in inside}
        outside = [row for row in grid.rows if row.config not in configs]
        distinct = len({row.config for row in outside})
        if distinct < timed_runs.MIN_CONFIGS:
            fits[group] = Unfitted(len(inside), distinct)
        else:
            fitted_to[group] = outside
    runs = [*fitted_to.values(), grid.rows]
    rates = [msgspec.json.decode(found, type=ScrRates) for found in forked.each(
        [functools.partial(_fitted, grid, rows) for rows in runs], jobs)]
    for (group, outside), found in zip(fitted_to.items(), rates):
        inside = members[group]
        fits[group] = GroupFit(inside, {row.name: grid.predict.blocking_s(found, row)
                                        for row in inside},
                               statistics.median(row.blocking_s for row in outside))
    return dict(sorted(fits.items())), rates[-1]


def _fitted(grid: Grid, rows: list) -> bytes:
    """The rates fitted to `rows`, as a forked worker returns them (msgspec JSON keeps every
    float exactly)."""
    return msgspec.json.encode(fitting.fit_rates(rows, grid.predict, grid.runs.nodes,
                                                 profile=grid.profile))


def _group_report(grid: Grid, fit: GroupFit | Unfitted) -> dict:
    if isinstance(fit, Unfitted):
        return {"runs": fit.runs, "fitted_to": fit.fitted_to}
    inside = fit.inside
    return {
        "runs": len(inside),
        "median_error": _median_error(inside, fit.predicted),
        "constant_error": _median_error(inside, {r.name: fit.constant for r in inside}),
        "rank_correlation": fitting.spearman([r.blocking_s for r in inside],
                                             [fit.predicted[r.name] for r in inside])
        if len(inside) > 2 else None,
        "repeatability": repeatability(grid.runs.runs, [r.name for r in inside]),
        "spread": spread(grid.runs.runs, [r.name for r in inside]),
        "one_value_floor": _one_value_floor(inside)}


def _form_rank(grid: Grid, everything: ScrRates, held: list, measured: list[float]) -> float:
    """How well the model's form ranks these runs when fitted to every run of the grid
    (`everything`), the ranked ones included, which a held-out fit seldom beats by much
    (issue 48: 0.865 on the fifth grid, where the goal asks 0.9 held out). Below the goal,
    the form misses something, not a rate the held-out fit could not see."""
    return fitting.spearman(measured, [grid.predict.blocking_s(everything, r) for r in held])


def _class_of(config: Config) -> tuple:
    """A configuration's copy type and flush kind (synchronous or not, and SCR's cadence),
    what the model tells apart most surely; bypass is a class of its own."""
    if config.bypass:
        return ("bypass",)
    return (config.copy_type, config.flush_async, config.flush_every)


def _what_scr_does(config: Config) -> tuple:
    """A configuration as SCR v3.1.0 runs it: in bypass the application writes the parallel
    file system itself and SCR "flushes" only its summary, synchronously, whatever the flush
    settings and the copy type (scr-facts.md), so every bypass run is one configuration."""
    return ("bypass",) if config.bypass else (config,)


def _one_value_floor(rows) -> float:
    """The lowest median error of any prediction that gives one configuration one time (as
    every model does): where a group's runs include one configuration measured under two
    names (SCR's defaults and bypass), how far apart they came out bounds every model. A
    model above it is wrong, not merely beaten by the noise. Each configuration gets the
    value that minimises its runs' median error (for two, the mean of their two errors:
    the lower time); one run alone, none."""
    errors = []
    for one in {_what_scr_does(row.config) for row in rows}:
        measured = [row.blocking_s for row in rows if _what_scr_does(row.config) == one]
        # the median of relative errors is piecewise monotone between the measured times and
        # the points where two of them are equally far: its least is at one of those
        candidates = measured + [2 * a * b / (a + b) for a in measured for b in measured]
        best = min(candidates, key=lambda value: statistics.median(
            abs(value - m) / m for m in measured))
        errors += [abs(best - m) / m for m in measured]
    return statistics.median(errors)


def _median_error(rows, predicted: dict[str, float]) -> float:
    return statistics.median(abs(predicted[r.name] - r.blocking_s) / r.blocking_s for r in rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", default=os.path.join(HERE, "results", "real_scr_whole.json"))
    parser.add_argument("--calibrated-on", metavar="GRID.json",
                        help="instead of holding groups out: fit to every run of this grid "
                        "(another job on the same machine) and predict --runs with those rates")
    parser.add_argument("--against", metavar="GRID.json", nargs="+", default=[],
                        help="other grids of the same job: rank the held-out predictions by "
                        "their runs too (benchmarks/same_job.py)")
    parser.add_argument("--thread-shares-from", metavar="PROFILE.toml",
                        help="a grid whose profile predates transfer_thread_shares takes this "
                        "profile's (measured by `scrtune profile` on a machine of the kind)")
    parser.add_argument("--json", help="write the report here")
    parser.add_argument("--jobs", type=int, default=forked.usable_cpus(),
                        help="processes fitting the held-out groups side by side (default: "
                        "the CPUs this process may use); the report is the same however many")
    args = parser.parse_args()
    if args.against and args.calibrated_on:
        parser.error("--against ranks held-out predictions; --calibrated-on makes none")
    try:
        shares = load_profile(args.thread_shares_from).transfer_thread_shares \
            if args.thread_shares_from else ()
        report = transferred(args.calibrated_on, args.runs, shares) if args.calibrated_on \
            else held_out(args.runs, args.against, shares, args.jobs)
    except UsageError as exc:
        print(f"model_holdout: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.calibrated_on:
        print_transferred(report)
    else:
        print_held_out(report)
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
