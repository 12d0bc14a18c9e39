"""benchmarks/holdout_by_configuration.py: the model's error configuration by configuration
over several grids of one job, held out as model_holdout.py's report holds it out."""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys

from tests.grid_reports import RESULTS_DIR, ROOT, held_out

SCRIPT = os.path.join(ROOT, "benchmarks", "holdout_by_configuration.py")
GRIDS = ("real_scr_threads_twenty_seventh", "real_scr_threads_twenty_eighth")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True,
                          timeout=600)


def test_each_grid_is_held_out_as_the_report_holds_it_out():
    done = _run("--format", "json", *(os.path.join(RESULTS_DIR, f"{g}.json") for g in GRIDS))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    for grid in GRIDS:
        configs = out["grids"][grid]
        whole = held_out(grid)["all_held_out"]
        # the same held-out predictions the report's median error is taken over
        assert len(configs) == whole["runs"]
        errors = [abs(c["predicted_s"] - c["measured_s"]) / c["measured_s"]
                  for c in configs.values()]
        assert math.isclose(statistics.median(errors), whole["median_error"], rel_tol=1e-9)
    rows = out["configurations"]
    assert [r["mean_log_ratio"] for r in rows] == sorted(r["mean_log_ratio"] for r in rows)
    for row in rows:
        ratios = [math.log(g[row["name"]]["predicted_s"] / g[row["name"]]["measured_s"])
                  for g in out["grids"].values() if row["name"] in g]
        assert row["grids"] == len(ratios) == 2
        assert math.isclose(row["mean_log_ratio"], statistics.fmean(ratios), abs_tol=1e-12)


def test_the_table_names_every_configuration_and_a_bad_grid_is_one_line_and_exit_2(tmp_path):
    grid = os.path.join(RESULTS_DIR, f"{GRIDS[0]}.json")
    done = _run(grid)
    assert done.returncode == 0, done.stderr
    assert "(b) scrtune recommend" in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("46 configurations over 1 grid,")
    missing = tmp_path / "nowhere.json"
    done = _run(grid, str(missing))
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert str(missing) in line and "Traceback" not in done.stderr
