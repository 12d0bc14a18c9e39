"""The study's model against the real-SCR grid: as shipped, and calibrated with leave-one-out.

    python benchmarks/study_calibration.py [benchmarks/results/real_scr_whole.json]

Reads what benchmarks/real_scr_tuning.py measured (every configuration's blocking time per
checkpoint, medians of its repetitions) and the trace and profile it used. Per configuration:

- shipped: `scrtune study`'s model (scrtune/study/model.py) with the measured profile and the
  trace's own call costs;
- calibrated (leave-one-out): the same model with SCR's own rates (`ScrRates`, what
  `scrtune calibrate` writes into a profile) fitted to all the other configurations only.

Printed: per configuration measured, shipped and calibrated seconds with their errors; the
median errors and the rank correlation (Spearman) of each with the measurements; and how well
the repetitions agree with each other, which bounds any model's rank correlation.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from scrtune.cli.study_cmd import read_workload  # noqa: E402
from scrtune.intents.inputs import load_profile  # noqa: E402
from scrtune.study import fit as fitting  # noqa: E402
from scrtune.study import runs as timed_runs  # noqa: E402


def main() -> None:
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results",
                                                              "real_scr_whole.json")
    with open(path) as handle:
        grid = json.load(handle)
    root = os.path.dirname(HERE)  # the paths in the file are the repository's
    profile = load_profile(os.path.join(root, grid["profile"]))
    runs = timed_runs.load_runs(path)
    rows = timed_runs.measured(runs, profile)
    load, costs, metadata_s = read_workload([os.path.join(root, grid["trace"])], profile,
                                            "calibrate")
    blocking_s = fitting.predictors(load, profile, costs, runs.nodes, runs.ranks_per_node,
                                    metadata_s).blocking_s
    predict = fitting.Predictors(blocking_s)  # blocking times alone, as the study measured
    shipped = {r.name: blocking_s(None, r) for r in rows}
    enough = len(rows) >= timed_runs.MIN_CONFIGS  # else the shipped model alone
    loo = fitting.leave_one_out(rows, predict, runs.nodes) if enough else shipped
    everything = fitting.fit_rates(rows, predict, runs.nodes) if enough else None
    reps = min(len(times) for times in runs.runs.values())
    print(f"machine: {grid['machine']}; {len(rows)} configurations, blocking seconds per "
          f"checkpoint (median of {reps} runs)\n")
    print("| configuration | measured s | shipped model s | error | calibrated (LOO) s | error |")
    print("|---|---:|---:|---:|---:|---:|")

    def error(p: float, m: float) -> float:
        return abs(p - m) / m

    for row in sorted(rows, key=lambda r: r.blocking_s):
        m = row.blocking_s
        print(f"| {row.name} | {m:.3f} | {shipped[row.name]:.3f} | "
              f"{100 * error(shipped[row.name], m):.0f}% | {loo[row.name]:.3f} | "
              f"{100 * error(loo[row.name], m):.0f}% |")
    for label, predicted in (("shipped", shipped), ("calibrated, leave-one-out", loo))[
            :1 + enough]:
        errors = [error(predicted[r.name], r.blocking_s) for r in rows]
        rho = fitting.spearman([r.blocking_s for r in rows], [predicted[r.name] for r in rows])
        print(f"\n{label}: median error {100 * statistics.median(errors):.0f}%, largest "
              f"{100 * max(errors):.0f}%, rank correlation {rho:.2f}")
    if everything is not None:
        print("\nfitted on all: " + ", ".join(f"{name} {getattr(everything, name):.3g}"
                                              for name in fitting.RATE_NAMES))
    print(_ceiling(runs, reps))


def _ceiling(runs: timed_runs.TimedRuns, reps: int) -> str:
    """How well one half of the repetitions ranks the configurations like the other half,
    and the reliability of the median of all of them (Spearman-Brown)."""
    names = sorted(runs.runs)

    def per_checkpoint(name: str, picks: range) -> float:
        return statistics.median(statistics.fmean(runs.runs[name][i].per_checkpoint_s)
                                 for i in picks)

    half = reps // 2
    rho = fitting.spearman([per_checkpoint(n, range(half)) for n in names],
                           [per_checkpoint(n, range(half, 2 * half)) for n in names])
    factor = reps / max(half, 1)
    reliability = factor * rho / (1 + (factor - 1) * rho) if rho > 0 else 0.0
    return (f"\nrepetitions: the first {half} and the next {half} rank the configurations "
            f"with a correlation of {rho:.2f}; the median of all {reps} has a reliability of "
            f"{reliability:.2f}, so no model can correlate with it beyond about "
            f"{math.sqrt(max(reliability, 0)):.2f}")


if __name__ == "__main__":
    main()
