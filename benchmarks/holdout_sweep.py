"""Issue 48's goals over every stored grid at once: model_holdout.py on each, one table.

    python benchmarks/holdout_sweep.py \\
        --thread-shares-from benchmarks/results/real_scr_threads_fourteenth/sys.toml

Each grid is held out by configuration group as `model_holdout.py --runs GRID.json` does (one
subprocess a grid, fitting in one process, `--jobs` grids at a time; a grid takes 5-20 s on
the standard machine). Per grid:
the held-out median error and rank correlation over every cached run (its copy type held out)
and the groups the constant guess matches or beats; whether the grid meets all three goals
(median error <= 25%, rank correlation >= 0.9, better than the constant on every group). Then
over the grids: the mean and median of the errors, the mean rank correlation, the groups lost
and the grids meeting every goal, the figures RESULTS.md's model row and HISTORY.md's rounds
compare forms by. To score a change to the model, run the copy of this script in a checkout
that has it (each checkout's model_holdout.py imports its own scrtune).

Grids: by default the stored grids of configurations (benchmarks/results/real_scr_whole.json,
real_scr_grid.json, real_scr_dirty.json, real_scr_dirty_call.json, real_scr_threads*.json).
`--thread-shares-from`: the busy shares given to grids whose profile predates them (the
protocol since issue 48's fortieth round: the fourteenth grid's). Exit codes: 0 done, 2 a grid
that model_holdout cannot read or hold out (its one-line reason, naming the grid).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

from holdout_report import MAX_MEDIAN_ERROR, MIN_RANK_CORRELATION, groups_lost  # this folder

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = os.path.join(HERE, "results")
HOLDOUT = os.path.join(HERE, "model_holdout.py")
STORED = ("real_scr_whole", "real_scr_grid", "real_scr_dirty", "real_scr_dirty_call")


class SweepError(Exception):
    """A grid model_holdout refused: its one-line reason."""


@dataclass(frozen=True)
class GridScore:
    grid: str  # the file's name without .json
    runs: int  # cached runs held out by copy type
    median_error: float
    rank_correlation: float
    groups_lost: tuple[str, ...]  # the constant guess as good or better

    @property
    def meets_goals(self) -> bool:
        return self.median_error <= MAX_MEDIAN_ERROR \
            and self.rank_correlation >= MIN_RANK_CORRELATION and not self.groups_lost


@dataclass(frozen=True)
class Summary:
    """Over the grids: what forms are compared by."""
    grids: int
    mean_error: float
    median_error: float
    mean_rank: float
    groups_lost: int
    meeting_every_goal: tuple[str, ...]


@dataclass(frozen=True)
class Sweep:
    grids: tuple[GridScore, ...]

    def summary(self) -> Summary:
        errors = [g.median_error for g in self.grids]
        return Summary(len(self.grids), statistics.fmean(errors), statistics.median(errors),
                       statistics.fmean(g.rank_correlation for g in self.grids),
                       sum(len(g.groups_lost) for g in self.grids),
                       tuple(g.grid for g in self.grids if g.meets_goals))


def stored_grids() -> list[str]:
    threads = sorted(glob.glob(os.path.join(RESULTS, "real_scr_threads*.json")))
    return [os.path.join(RESULTS, f"{name}.json") for name in STORED] + threads


def score(report: dict, grid: str) -> GridScore:
    """One grid's figures from model_holdout's --json report."""
    whole = report["all_held_out"]
    return GridScore(grid, whole["runs"], whole["median_error"], whole["rank_correlation"],
                     tuple(groups_lost(report["groups"])))


def held_out(path: str, shares_from: str | None, workdir: str) -> GridScore:
    name = os.path.splitext(os.path.basename(path))[0]
    out = os.path.join(workdir, f"{name}.json")
    # one process a grid: the sweep holds out `--jobs` grids at once, and each grid's own
    # fits side by side on every CPU as well put twice as many processes as CPUs to work
    command = [sys.executable, HOLDOUT, "--runs", path, "--json", out, "--jobs", "1"]
    if shares_from:
        command += ["--thread-shares-from", shares_from]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        said = done.stderr.strip().splitlines()
        reason = said[-1].removeprefix("model_holdout: ") if said else \
            f"{path}: model_holdout exited {done.returncode}"
        raise SweepError(reason)
    with open(out) as handle:
        return score(json.load(handle), name)


def sweep(paths: Sequence[str], shares_from: str | None = None, jobs: int = 2) -> Sweep:
    with tempfile.TemporaryDirectory(prefix="holdout-sweep-") as workdir, \
            ThreadPoolExecutor(max(jobs, 1)) as pool:
        scores = pool.map(lambda path: held_out(path, shares_from, workdir), paths)
        return Sweep(tuple(scores))


def table(result: Sweep) -> str:
    lines = [f"{'grid':36} {'runs':>4} {'error':>6} {'rank':>6}  goals  groups lost"]
    for g in result.grids:
        lines.append(f"{g.grid:36} {g.runs:4d} {g.median_error:6.1%} "
                     f"{g.rank_correlation:6.3f}  {'all' if g.meets_goals else '   '}    "
                     f"{', '.join(g.groups_lost) or '-'}")
    s = result.summary()
    lines.append(f"{s.grids} grids: median error mean {s.mean_error:.2%}, median "
                 f"{s.median_error:.2%}; mean rank {s.mean_rank:.3f}; groups lost "
                 f"{s.groups_lost}; every goal on {len(s.meeting_every_goal)}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("grids", nargs="*", metavar="GRID.json",
                        help="grids of real_scr_tuning.py --json (default: the stored ones)")
    parser.add_argument("--thread-shares-from", metavar="PROFILE.toml")
    parser.add_argument("--jobs", type=int, default=len(os.sched_getaffinity(0)),
                        help="grids held out at once (default: the CPUs)")
    parser.add_argument("--format", choices=("table", "json"), default="table")
    args = parser.parse_args(argv)
    try:
        result = sweep(args.grids or stored_grids(), args.thread_shares_from, args.jobs)
    except SweepError as exc:
        print(f"holdout_sweep: {exc}", file=sys.stderr)
        return 2
    if args.format == "json":
        print(json.dumps({"grids": [{**asdict(g), "meets_goals": g.meets_goals}
                                    for g in result.grids],
                          "summary": asdict(result.summary())},
                         indent=1))
    else:
        print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
