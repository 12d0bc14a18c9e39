"""benchmarks/holdout_sweep.py: issue 48's goals over stored grids in one command, as
RESULTS.md's model row counts them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.grid_reports import RESULTS_DIR, ROOT, groups_lost, held_out

SWEEP = os.path.join(ROOT, "benchmarks", "holdout_sweep.py")


def _sweep(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SWEEP, *args], capture_output=True, text=True,
                          timeout=600)


def test_the_sweep_scores_a_grid_as_model_holdout_reports_it():
    done = _sweep("--format", "json", os.path.join(RESULTS_DIR, "real_scr_whole.json"))
    assert done.returncode == 0, done.stderr
    swept = json.loads(done.stdout)
    report = held_out("real_scr_whole")
    whole = report["all_held_out"]
    [grid] = swept["grids"]
    assert grid["grid"] == "real_scr_whole" and grid["runs"] == whole["runs"]
    assert grid["median_error"] == whole["median_error"]
    assert grid["rank_correlation"] == whole["rank_correlation"]
    assert set(grid["groups_lost"]) == groups_lost(report)
    # the 4-run grid meets every goal (test_held_out's own check of it), and the sweep says so
    assert grid["meets_goals"] is True
    assert swept["summary"]["meeting_every_goal"] == ["real_scr_whole"]
    assert swept["summary"]["groups_lost"] == 0


def test_a_grid_the_sweep_cannot_hold_out_is_one_line_and_exit_2(tmp_path):
    missing = tmp_path / "nowhere.json"
    done = _sweep(str(missing))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert str(missing) in line and "Traceback" not in done.stderr
    not_a_grid = tmp_path / "runs.json"
    not_a_grid.write_text('{"runs": {}}')
    done = _sweep(str(not_a_grid))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert str(not_a_grid) in line and "profile" in line
