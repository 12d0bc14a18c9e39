"""Where the model errs, configuration by configuration, over several measurements of a job
(issue 48): each grid held out by copy type as `model_holdout.py` ranks it, each
configuration's prediction over its measured median, the log of that ratio averaged over
the grids that measured the configuration.

    python benchmarks/holdout_by_configuration.py \\
        benchmarks/results/real_scr_threads_{sixteenth,seventeenth,eighteenth}.json

A configuration's mean log ratio many standard errors from zero, the same sign on grid after
grid, is the model's form; one that scatters about zero is the grids' noise. Per
configuration: the grids that measured it, the mean and standard deviation of
log(predicted / measured), the mean over its standard error, and the median of its measured
blocking times (seconds a checkpoint). `--format json` adds every grid's measured and
predicted time of every configuration. `--thread-shares-from` as for model_holdout.py.
Exit codes: 0 done, 2 a grid it cannot read or hold out (one line naming it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from model_holdout import by_copy_type  # this folder

from scrtune.errors import UsageError
from scrtune.intents.inputs import ThreadShare, load_profile


@dataclass(frozen=True)
class ConfigurationResidual:
    name: str  # the configuration as the grids name it
    grids: int  # the grids that measured it
    mean_log_ratio: float  # mean over them of log(predicted / measured)
    sd_log_ratio: float  # their standard deviation (0 with one grid)
    standard_errors: float  # the mean over its standard error (0 where it has none)
    measured_s: float  # the median of the grids' measured blocking times a checkpoint


def per_grid(paths: Sequence[str], shares: tuple[ThreadShare, ...] = ()
             ) -> dict[str, dict[str, tuple[float, float]]]:
    """Each grid's cached configurations: (measured, predicted with its copy type held out)."""
    times = {}
    for path in paths:
        grid, predicted = by_copy_type(path, shares)
        times[os.path.basename(path).removesuffix(".json")] = {
            row.name: (row.blocking_s, predicted[row.name])
            for row in grid.rows if row.name in predicted}
    return times


def by_configuration(times: dict[str, dict[str, tuple[float, float]]]
                     ) -> list[ConfigurationResidual]:
    """Every configuration any grid measured, the model's most negative mean first."""
    names = sorted({name for grid in times.values() for name in grid})
    out = []
    for name in names:
        pairs = [grid[name] for grid in times.values() if name in grid]
        ratios = [math.log(predicted / measured) for measured, predicted in pairs]
        mean = statistics.fmean(ratios)
        sd = statistics.stdev(ratios) if len(ratios) > 1 else 0.0
        out.append(ConfigurationResidual(
            name=name, grids=len(ratios), mean_log_ratio=mean, sd_log_ratio=sd,
            standard_errors=mean / (sd / math.sqrt(len(ratios))) if sd > 0 else 0.0,
            measured_s=statistics.median(measured for measured, _ in pairs)))
    return sorted(out, key=lambda row: row.mean_log_ratio)


def print_table(rows: list[ConfigurationResidual], grids: int) -> None:
    print(f"{'configuration':46} {'grids':>5} {'mean log(pred/meas)':>19} {'sd':>6} "
          f"{'/ s.e.':>7} {'measured':>9}")
    for row in rows:
        print(f"{row.name:46} {row.grids:5d} {row.mean_log_ratio:+19.3f} "
              f"{row.sd_log_ratio:6.3f} {row.standard_errors:+7.1f} {row.measured_s:8.3f}s")
    print(f"{len(rows)} configurations over {grids} grid{'' if grids == 1 else 's'}, each held "
          "out by copy type")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grids", nargs="+", metavar="GRID.json",
                        help="grids of one job (benchmarks/real_scr_tuning.py --json)")
    parser.add_argument("--thread-shares-from", metavar="PROFILE.toml",
                        help="busy shares for a grid whose profile predates them")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args()
    try:
        shares = load_profile(args.thread_shares_from).transfer_thread_shares \
            if args.thread_shares_from else ()
        times = per_grid(args.grids, shares)
    except UsageError as exc:
        print(f"holdout_by_configuration: {exc}", file=sys.stderr)
        sys.exit(2)
    rows = by_configuration(times)
    if args.format == "json":
        json.dump({"configurations": [asdict(row) for row in rows],
                   "grids": {grid: {name: {"measured_s": measured, "predicted_s": predicted}
                                    for name, (measured, predicted) in configs.items()}
                             for grid, configs in times.items()}}, sys.stdout, indent=1)
        print()
    else:
        print_table(rows, len(times))


if __name__ == "__main__":
    main()
