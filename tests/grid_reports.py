"""Stored real-SCR grids as the model's tests read them: the seed grid the fit is checked on,
and benchmarks/results' grids held out, transferred and summarised (shared by
test_calibrate, test_model_on_grids, test_held_out, test_held_out_grids and
test_held_out_fresh_grids)."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import statistics
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import msgspec

from scrtune.cli.study_cmd import read_workload
from scrtune.intents.inputs import ScrRates, load_profile
from scrtune.study import fit as fitting
from scrtune.study import runs as timed_runs
from tests.conftest import data

GRID = data("real_scr_grid")
TRACE, RUNS, SYSTEM = f"{GRID}/trace", f"{GRID}/runs.json", f"{GRID}/sys.toml"


# the rates model-made times come from, in the tests that check the fit itself
TRUTH = ScrRates(nodes=2, app_pfs_write_bytes_per_s=5e8, cache_write_bytes_per_s=2e9,
                 encode_bytes_per_s=7e8, flush_bytes_per_s=3e8, flush_call_s=2e-3,
                 busy_core_slowdown=2.5, checkpoint_overhead_s=0.05)


def seed_workload():
    """The seed grid's profile, its trace's workload, its tiers' costs and its metadata
    call's seconds (conftest's session fixture `workload` reads them once)."""
    profile = load_profile(SYSTEM)
    load, costs, metadata_s = read_workload([TRACE], profile, "calibrate")
    return profile, load, costs, metadata_s


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "benchmarks", "results")
HOLDOUT = os.path.join(ROOT, "benchmarks", "model_holdout.py")


def benchmark_module(name: str):
    """benchmarks/NAME.py imported as a module (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(
        f"benchmarks_{name}", os.path.join(ROOT, "benchmarks", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    # a dataclass's module must be importable by name while it is defined
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def calibrated_by_cli(run_cli, tmp_path: Path, name: str) -> Path:
    """`scrtune calibrate` on a stored grid's trace, runs and profile, as a user runs it."""
    grid = os.path.join(RESULTS_DIR, name)
    out = tmp_path / "sys.toml"
    done = run_cli("calibrate", f"{grid}/trace", "--runs", f"{grid}.json", "--system",
                   f"{grid}/sys.toml", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def held_out(grid: str, runs: str | None = None) -> dict:
    """model_holdout's report on benchmarks/results/GRID.json (or on `runs`, another file),
    as `--json` writes it (a stored grid's once a session: the same every time)."""
    if runs is not None:
        return json.loads(_as_written(_holdout().held_out(runs)))
    return json.loads(_stored_report(grid))


@functools.cache
def _stored_report(grid: str) -> str:
    return _as_written(_holdout().held_out(os.path.join(RESULTS_DIR, f"{grid}.json")))


def held_out_with_shares(grid: str, shares_from: str) -> dict:
    """model_holdout's report on a stored grid whose profile predates the transfer threads'
    busy shares, given those of `shares_from` (a stored grid's name: its profile's)."""
    shares = load_profile(os.path.join(RESULTS_DIR, shares_from, "sys.toml"))
    return json.loads(_as_written(_holdout().held_out(
        os.path.join(RESULTS_DIR, f"{grid}.json"), shares=shares.transfer_thread_shares)))


def grid_runs(grid: str) -> dict[str, list[dict]]:
    with open(os.path.join(RESULTS_DIR, f"{grid}.json")) as handle:
        return json.load(handle)["runs"]


def median_mean(runs: list[dict]) -> float:
    """A configuration's blocking time: the median over its runs of each run's mean."""
    return statistics.median(statistics.fmean(run["per_checkpoint_s"]) for run in runs)


def threads_grid(name: str = "real_scr_threads"):
    grid = os.path.join(RESULTS_DIR, name)
    profile = load_profile(f"{grid}/sys.toml")
    load, costs, metadata_s = read_workload([f"{grid}/trace"], profile, "calibrate")
    runs = timed_runs.load_runs(f"{grid}.json")
    args = (load, profile, costs, runs.nodes, runs.ranks_per_node, metadata_s)
    predict = fitting.predictors(*args)
    return profile, timed_runs.measured(runs, profile), predict.blocking_s, predict


def transferred(calibration: str, grid: str) -> dict:
    """model_holdout --calibrated-on: rates fitted to every run of one stored grid, the runs
    of another predicted with them (each a stored grid's name, or a grid file's path)."""
    return json.loads(_as_written(_holdout().transferred(_grid_path(calibration),
                                                         _grid_path(grid))))


def transferred_as_run(tmp_path, calibration: str, grid: str) -> dict:
    """The same, `model_holdout.py --calibrated-on A --runs B --json F` run as its users run
    it: what it printed names the rank correlation, and F holds the report."""
    out = tmp_path / f"{Path(_grid_path(calibration)).stem}-{Path(_grid_path(grid)).name}"
    done = subprocess.run([sys.executable, HOLDOUT, "--calibrated-on", _grid_path(calibration),
                           "--runs", _grid_path(grid), "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rank correlation" in done.stdout
    return json.loads(out.read_text())


def _grid_path(name: str) -> str:
    return name if name.endswith(".json") else os.path.join(RESULTS_DIR, f"{name}.json")


# The held-out reports of the tests are model_holdout's functions called here, not the script
# run in a subprocess for each: a run spent 3 of its 8-12 s importing and reading before it
# fitted (the script itself: transferred_as_run, test_holdout_sweep, the one-line errors of
# test_held_out). Its fits go side by side on this process's CPUs, as the script's do.
@functools.cache
def _holdout():
    return benchmark_module("model_holdout")


def _as_written(report: dict) -> str:
    """A report as `--json` writes it (tuples become lists, keys strings)."""
    return json.dumps(report)


@dataclass(frozen=True)
class BypassHeldOut:
    """A grid's two bypass configurations held out: median errors, as fractions."""
    error: float  # the model's
    constant_error: float  # the median blocking time of the cached runs
    synced_pace_error: float  # the model's, unsynced writes paced at the synced rate


def bypass_held_out(grid: str, allowance_bytes: float) -> BypassHeldOut:
    """A grid's bypass runs predicted by rates fitted to its cached runs (as model_holdout
    holds bypass out), its profile's parallel file system given `allowance_bytes` per node.
    The same fit also predicts them with the application's unsynced writes paced at the file
    system's synced rate (the rate no cached run determines), as the model had it before the
    fresh-memory pace."""
    with open(os.path.join(RESULTS_DIR, f"{grid}.json")) as handle:
        recorded = json.load(handle)
    profile = load_profile(os.path.join(ROOT, recorded["profile"]))
    assert profile.parallel is not None
    profile = msgspec.structs.replace(profile, parallel=msgspec.structs.replace(
        profile.parallel, dirty_allowance_bytes=allowance_bytes))
    load, costs, metadata_s = read_workload([os.path.join(ROOT, recorded["trace"])], profile,
                                            "validate")
    runs = timed_runs.load_runs(os.path.join(RESULTS_DIR, f"{grid}.json"))
    rows = timed_runs.measured(runs, profile)
    predictors = fitting.predictors(load, profile, costs, runs.nodes, runs.ranks_per_node,
                                    metadata_s)
    cached = [row for row in rows if not row.config.bypass]
    rates = fitting.fit_rates(cached, predictors, runs.nodes, profile=profile)
    assert "app_pfs_write_bytes_per_s" in rates.undetermined
    synced = msgspec.structs.replace(
        rates, app_pfs_write_bytes_per_s=profile.parallel.write_bytes_per_s)
    constant = statistics.median(row.blocking_s for row in cached)
    bypass = [row for row in rows if row.config.bypass]
    assert len(bypass) == 2

    def error(predict) -> float:
        return statistics.median(abs(predict(row) / row.blocking_s - 1) for row in bypass)

    return BypassHeldOut(error(lambda row: predictors.blocking_s(rates, row)),
                         error(lambda row: constant),
                         error(lambda row: predictors.blocking_s(synced, row)))


def thread_grid_held_out(grid: str) -> dict:
    """A thread-count grid's 46 cached runs held out by copy type, within a median error of
    15% (issue 48's goal: 25%)."""
    report = held_out(grid)
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.15
    return report


def near_the_goal(grid: str) -> dict:
    """Near issue 48's goals without meeting them all: a rank correlation from 0.85 to 0.95."""
    report = thread_grid_held_out(grid)
    assert 0.85 <= report["all_held_out"]["rank_correlation"] < 0.95
    return report


def meets_every_goal(grid: str, repeat_slack: float = 0.0) -> dict:
    """Issue 48's goals: a rank correlation of 0.9 or more, and every group better than a
    constant guess; and against half of the runs the model ranks the rest at least as well
    as the other half does (a repeat of the measurement), within `repeat_slack`."""
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["rank_correlation"] >= 0.9
    assert not groups_lost(report)
    halves = whole["against_halves"]
    assert halves["model_rank"] >= halves["repeat_rank"] - repeat_slack
    return report


def groups_lost(report: dict) -> set[str]:
    """The groups a constant guess predicts better than the held-out model."""
    return {name for name, group in report["groups"].items()
            if "median_error" in group and group["median_error"] > group["constant_error"]}


def bypass_spills_and_the_recommendation_wins(grid: str) -> None:
    """In a thread-count grid's own runs: of 403 MB a bypass checkpoint, the first and third
    went into the page cache, the 4th and 5th, past the 1.2 GB allowance, at the file
    system's rate; and the recommendation wins (below)."""
    runs = grid_runs(grid)["(c) bypass"]
    writes = [statistics.median(run["phases_s"][index][1] for run in runs) for index in range(5)]
    assert min(writes[3:]) > 2 * max(writes[0], writes[2])
    the_recommendation_wins(grid)


def the_recommendation_wins(grid: str) -> None:
    """scrtune's recommendation ran the grid's job faster than every other configuration,
    and more than a quarter faster than SCR's defaults (median wall times)."""
    wall = {name: statistics.median(run["wall_s"] for run in times)
            for name, times in grid_runs(grid).items()}
    tuned = wall.pop("(b) scrtune recommend")
    assert tuned < min(wall.values()) and tuned < 0.75 * wall["(a) SCR defaults"]
