"""benchmarks/same_job.py through model_holdout.py --against (issue 48): the held-out
predictions and a grid's own runs ranked by the other measurements of the same job."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

from scrtune.errors import UsageError
from scrtune.study.fit import spearman
from scrtune.study.model import Config
from scrtune.study.runs import Measured
from tests.grid_reports import (
    HOLDOUT,
    RESULTS_DIR,
    benchmark_module,
    grid_runs,
    groups_lost,
    median_mean,
    the_recommendation_wins,
)

# the full-scale thread-count job, measured on several days and machines
FULL_SCALE = ["real_scr_threads", "real_scr_threads_fourth", "real_scr_threads_again",
              "real_scr_threads_fresh", "real_scr_threads_ends", "real_scr_threads_fifth",
              "real_scr_threads_sixth", "real_scr_threads_seventh", "real_scr_threads_eighth",
              "real_scr_threads_ninth", "real_scr_threads_tenth", "real_scr_threads_eleventh",
              "real_scr_threads_twelfth", "real_scr_threads_thirteenth"]


QUARTER_SCALE = ["real_scr_threads_small", "real_scr_threads_small_again",
                 "real_scr_threads_small_third", "real_scr_threads_small_fourth"]


@pytest.fixture(scope="module")
def same_job():
    return benchmark_module("same_job")


def _path(grid: str) -> str:
    return os.path.join(RESULTS_DIR, f"{grid}.json")


def _holdout(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, HOLDOUT, *args], capture_output=True, text=True,
                          timeout=600)


def _against(grid: str, others: list[str], tmp_path) -> tuple[dict, str]:
    """model_holdout's report on a stored grid against other stored grids, and what it
    printed."""
    out = tmp_path / "report.json"
    done = _holdout("--runs", _path(grid), "--against", *map(_path, others), "--json",
                    str(out))
    assert done.returncode == 0, done.stderr
    return json.loads(out.read_text()), done.stdout


def _rows(times: dict[str, float]) -> list[Measured]:
    return [Measured(name=name, checkpoints=5, blocking_s=value,
                     config=Config(bypass=False, file_buf_bytes=int(name[1:]) << 20))
            for name, value in times.items()]


def test_other_grids_at_other_speeds_give_this_grids_times_back(same_job):
    """Two other grids of the same relative times, one twice as slow: the pooled measurement
    is this grid's own times, so this grid's runs rank 1.0 and a model that predicts them
    exactly has no error; a configuration one grid lacks is left out."""
    mine = {"c1": 1.0, "c2": 2.0, "c3": 4.0, "c4": 3.0}
    others = [_rows({name: 2 * value for name, value in mine.items()}),
              _rows({name: value for name, value in mine.items() if name != "c4"})]
    exact = dict(mine)
    report = same_job.against_others(_rows(mine), exact, {"buffer": (exact, 2.5)}, others,
                                     [{name: 3 for name in mine}, {"c1": 3, "c2": 3, "c3": 3}])
    assert report["configurations"] == 3 and report["grids"] == 2
    assert report["own_runs_rank"] == 1.0 and report["model_rank"] == 1.0
    assert report["median_error"] == pytest.approx(0.0, abs=1e-12)
    assert report["runs_a_configuration"] == 6
    group = report["groups"]["buffer"]
    assert group["configurations"] == 3 and group["median_error"] == pytest.approx(0.0, abs=1e-12)
    # the constant 2.5 against 1, 2 and 4 (this grid's mean of the three, 7/3, sets the scale)
    assert group["constant_error"] == pytest.approx(0.375)


def test_fewer_than_three_configurations_in_common_give_no_comparison(same_job):
    mine = {"c1": 1.0, "c2": 2.0, "c3": 4.0}
    report = same_job.against_others(_rows(mine), mine, {}, [_rows({"c1": 1.0, "c2": 2.0})],
                                     [{"c1": 3, "c2": 3}])
    assert report is None


def test_a_grid_of_another_job_is_refused_naming_it_and_the_setting():
    done = _holdout("--runs", _path("real_scr_threads_thirteenth"),
                    "--against", _path("real_scr_threads_small"))
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "real_scr_threads_small.json" in done.stderr and "compute_s" in done.stderr


def test_against_a_copy_of_itself_the_figures_are_the_grids_own(tmp_path):
    """The grid's own file as the other measurement: its runs rank themselves 1.0 and the
    model's figures against it are the held-out report's own (rank, error, every group's
    errors and the constant's)."""
    grid = _path("real_scr_threads_thirteenth")
    out = tmp_path / "report.json"
    done = _holdout("--runs", grid, "--against", grid, "--json", str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())
    whole, others = report["all_held_out"], report["all_held_out"]["against_others"]
    assert others["grids"] == 1 and others["configurations"] == whole["runs"] == 46
    assert others["own_runs_rank"] == pytest.approx(1.0)
    assert others["model_rank"] == pytest.approx(whole["rank_correlation"], abs=1e-9)
    assert others["median_error"] == pytest.approx(whole["median_error"], abs=1e-9)
    for name, group in others["groups"].items():
        assert group["median_error"] == pytest.approx(report["groups"][name]["median_error"])
        assert group["constant_error"] == pytest.approx(
            report["groups"][name]["constant_error"])
    assert "this grid's own runs 1.00" in done.stdout


def test_the_thirteenth_grid_against_the_twelve_before_it(tmp_path):
    """The pooled measurement recomputed here from the grids' raw runs (each configuration's
    median run mean over its grid's mean, averaged over the grids): the thirteenth grid's own
    runs rank it as reported. The cached configurations are ranked (bypass is held out apart);
    scrtune's recommendation, a different configuration from grid to grid, is left out."""
    target, others = FULL_SCALE[-1], FULL_SCALE[:-1]
    out = tmp_path / "report.json"
    done = _holdout("--runs", _path(target), "--against", *map(_path, others), "--json",
                    str(out))
    assert done.returncode == 0, done.stderr
    report = json.loads(out.read_text())["all_held_out"]["against_others"]
    runs = {grid: grid_runs(grid) for grid in FULL_SCALE}
    names = sorted(name for name in runs[target] if name.startswith("(c) cache")
                   and all(name in runs[grid] for grid in others))
    assert report["configurations"] == len(names) == 45 and report["grids"] == 13

    def relative(grid: str) -> dict[str, float]:
        times = {name: median_mean(runs[grid][name]) for name in names}
        mean = statistics.fmean(times.values())
        return {name: value / mean for name, value in times.items()}

    pooled = [statistics.fmean(relative(grid)[name] for grid in others) for name in names]
    own = relative(target)
    assert report["own_runs_rank"] == pytest.approx(spearman(pooled, [own[n] for n in names]))
    assert report["runs_a_configuration"] == statistics.median(
        sum(len(runs[grid][name]) for grid in others) for name in names)
    # the first grid did not record when its checkpoints ended: the days are not known
    assert report["grids_another_day"] is None and "another day" not in done.stdout


def _grid_ending(path, *ends_unix_s: float) -> str:
    runs = {"c1": [{"blocking_s": 1.0, "checkpoint_end_unix_s": list(ends_unix_s)}]}
    path.write_text(json.dumps({"runs": runs}))
    return str(path)


def test_the_days_a_grid_was_measured_on_are_its_checkpoints_ends_in_utc(same_job, tmp_path):
    """A grid run across midnight UTC was measured on both days; another grid shares a day
    with it when it ran on either, and a grid that did not record its checkpoints' ends
    leaves the count unknown."""
    midnight = 1796083200.0  # 2026-12-01 00:00 UTC
    across = _grid_ending(tmp_path / "across.json", midnight - 60, midnight + 60)
    before = _grid_ending(tmp_path / "before.json", midnight - 7200)
    later = _grid_ending(tmp_path / "later.json", midnight + 86400 * 2)
    unknown = _grid_ending(tmp_path / "unknown.json")
    assert same_job.measured_days(across) == {"2026-11-30", "2026-12-01"}
    assert same_job.measured_days(unknown) == frozenset()
    assert same_job.grids_another_day(across, [before, later]) == 1
    assert same_job.grids_another_day(before, [later, later]) == 2
    assert same_job.grids_another_day(across, [before, unknown]) is None


def test_a_grid_whose_times_are_not_numbers_is_refused_naming_it(same_job, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"runs": {"c1": [{"checkpoint_end_unix_s": ["soon"]}]}}))
    with pytest.raises(UsageError, match="bad.json"):
        same_job.measured_days(str(bad))


def test_the_quarter_scale_job_a_fifth_time_against_the_four_before_it(tmp_path):
    """The quarter-scale thread-count command a fifth time (2026-11-30 05:14-05:31, a fresh
    machine, quiet: a run 1% from its configuration's median), fitted to none of it. Held out
    by copy type 7%, rank 0.95, the constant better on one group (1 transfer thread, 12%
    against 10%); against the four earlier grids of the job (12 runs a configuration): the
    model 0.96, the grid's own runs 0.98, every group better than the constant, so all three
    goals against the job's other measurements, as on the four before it. scrtune's
    recommendation 4.36 s a job, the grid's best 5.02 s, SCR's defaults 8.85 s (-51%)."""
    grid = "real_scr_threads_small_fifth"
    report, printed = _against(grid, QUARTER_SCALE, tmp_path)
    whole, others = report["all_held_out"], report["all_held_out"]["against_others"]
    assert whole["median_error"] <= 0.25 and whole["rank_correlation"] >= 0.9
    assert groups_lost(report) <= {"1 transfer threads"}
    assert others["median_error"] <= 0.25
    # 2026-11-30 against 2026-11-26 and three grids of 2026-11-29
    _every_group_against_grids_of_other_days(others, printed, 4)
    the_recommendation_wins(grid)


def _every_group_against_grids_of_other_days(others: dict, printed: str, grids: int) -> None:
    """Against `grids` other grids, all measured on other days (and the report says so): the
    model ranks their runs 0.9 or more and beats the constant on every group."""
    assert others["grids"] == grids and others["model_rank"] >= 0.9
    assert all(group["median_error"] < group["constant_error"]
               for group in others["groups"].values()), others["groups"]
    assert others["grids_another_day"] == grids
    assert f"{grids} of the {grids} other grids measured on another day" in printed


def test_the_quarter_scale_job_a_sixth_time_loses_four_threads_alone(tmp_path):
    """The quarter-scale command a sixth time (2026-12-01 16:20-16:43, the afternoon of the
    twenty-third full-scale grid; a run 3% from its configuration's median), the model
    unchanged, fitted to none of it: 6.6%, rank 0.927, the constant better on 4 transfer
    threads alone; against the job's five earlier grids, all of other days (15 runs a
    configuration), 0.945 and every group better than the constant. The thread power that
    met every goal on the full-scale grid that afternoon (0.3) loses two thread groups here:
    the power differs with the job (HISTORY, forty-ninth round). scrtune's recommendation ran
    the job in 4.83 s, the grid's best 5.76 s, SCR's defaults 9.86 s."""
    grid = "real_scr_threads_small_sixth"
    report, printed = _against(grid, [*QUARTER_SCALE, "real_scr_threads_small_fifth"],
                               tmp_path)
    whole, others = report["all_held_out"], report["all_held_out"]["against_others"]
    assert whole["median_error"] <= 0.25 and whole["rank_correlation"] >= 0.9
    assert groups_lost(report) == {"4 transfer threads"}
    _every_group_against_grids_of_other_days(others, printed, 5)
    the_recommendation_wins(grid)


def test_the_twenty_third_grid_five_runs_a_configuration_against_the_same_days(tmp_path):
    """The full-scale command a twenty-third time, five runs a configuration (2026-12-01
    14:15-15:36; busy shares 0.233, 0.692, 0.968; a run 8% from its configuration's median),
    the model unchanged, fitted to none of it: 7.8%, every group better than the constant,
    rank 0.870, under the 10th percentile (0.888) of what a model without error would rank
    runs this noisy, and against half of the runs 0.881 where a repeat ranks them 0.885: on
    this grid the rank's shortfall is the model's. Against the three grids of the same day
    (9 runs a configuration) the model ranks them 0.896, the grid's own runs 0.93. scrtune's
    recommendation ran the job in 10.48 s, the grid's best 12.17 s, SCR's defaults 16.52 s."""
    grid, same_day = "real_scr_threads_twenty_third", [
        "real_scr_threads_twentieth", "real_scr_threads_twenty_first",
        "real_scr_threads_twenty_second"]
    report, printed = _against(grid, same_day, tmp_path)
    whole, others = report["all_held_out"], report["all_held_out"]["against_others"]
    assert whole["median_error"] <= 0.09 and not groups_lost(report)
    assert 0.85 <= whole["rank_correlation"] < whole["without_error"]["low_rank"] < 0.9
    halves = whole["against_halves"]
    assert abs(halves["model_rank"] - halves["repeat_rank"]) <= 0.01
    assert others["grids_another_day"] == 0 and "another day" not in printed
    assert 0.88 <= others["model_rank"] < others["own_runs_rank"]
    assert min(len(runs) for runs in grid_runs(grid).values()) == 5
    the_recommendation_wins(grid)
