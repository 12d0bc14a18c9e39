"""`scrtune calibrate`: SCR's own rates fitted to timed runs, fed to recommend and study.

The measurements are real: the blocking time of every checkpoint of 48 SCR configurations run
on the real SCR v3.1.0 (tests/data/real_scr_grid, see its README), with the job's own trace.
"""

from __future__ import annotations

import json
import math
import random
import statistics

import msgspec
import pytest

from scrtune.cli.study_cmd import read_workload
from scrtune.intents.inputs import ScrRates, load_profile
from scrtune.intents.model import flush_s
from scrtune.study import fit as fitting
from scrtune.study.model import Config, machine, predict
from tests.conftest import data

GRID = data("real_scr_grid")
TRACE, RUNS, SYSTEM = f"{GRID}/trace", f"{GRID}/runs.json", f"{GRID}/sys.toml"


@pytest.fixture(scope="module")
def workload():
    profile = load_profile(SYSTEM)
    load, costs, metadata_s = read_workload([TRACE], profile, "calibrate")
    return profile, load, costs, metadata_s


def test_the_fit_finds_the_rates_that_made_the_times(workload):
    """Times made by the model itself from known rates, with 5% noise: the fit predicts the
    noiseless times closely and finds the rates that matter to them."""
    profile, load, costs, metadata_s = workload
    truth = ScrRates(nodes=2, app_pfs_write_bytes_per_s=5e8, cache_write_bytes_per_s=2e9,
                     encode_bytes_per_s=7e8, flush_bytes_per_s=3e8, flush_call_s=2e-3,
                     busy_core_slowdown=2.5, checkpoint_overhead_s=0.05)
    blocking_s = fitting.predictor(load, profile, costs, 2, 1, metadata_s)
    noise = random.Random(7)
    runs = fitting.load_runs(RUNS)
    rows = [msgspec.structs.replace(row, blocking_s=blocking_s(truth, row)
                                    * math.exp(noise.gauss(0, 0.05)))
            for row in fitting.measured(runs, profile)]
    found = fitting.fit_rates(rows, blocking_s, 2)
    errors = [abs(blocking_s(found, r) / blocking_s(truth, r) - 1) for r in rows]
    assert statistics.median(errors) < 0.04
    assert found.flush_bytes_per_s == pytest.approx(truth.flush_bytes_per_s, rel=0.15)
    assert found.encode_bytes_per_s == pytest.approx(truth.encode_bytes_per_s, rel=0.25)
    assert found.app_pfs_write_bytes_per_s == pytest.approx(truth.app_pfs_write_bytes_per_s,
                                                            rel=0.15)


def test_calibrated_on_real_scr_the_model_ranks_the_grid(run_cli, tmp_path):
    out = tmp_path / "sys-scr.toml"
    done = run_cli("calibrate", TRACE, "--runs", RUNS, "--system", SYSTEM, "-o", str(out),
                   "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    given, calibrated = report["scores"]["profile as given"], report["scores"]["calibrated"]
    assert calibrated["median_error"] < 0.2 < given["median_error"]
    assert calibrated["rank_correlation"] > 0.85 > given["rank_correlation"]
    assert len(report["configurations"]) == 48
    rates = load_profile(str(out)).scr_rates
    assert rates is not None and rates.nodes == 2
    # SCR's real flush is slower than the synced copy `scrtune profile` timed
    assert rates.flush_bytes_per_s < load_profile(SYSTEM).parallel.write_bytes_per_s
    # calibrating a calibrated profile replaces its rates: one [scr_rates] table
    again = tmp_path / "again.toml"
    assert run_cli("calibrate", TRACE, "--runs", RUNS, "--system", str(out), "-o",
                   str(again)).returncode == 0
    assert again.read_text().count("[scr_rates]") == 1
    assert "rank correlation" in run_cli("calibrate", TRACE, "--runs", RUNS, "--system",
                                         SYSTEM, "-o", str(out), "--force").stdout


def test_recommend_and_study_use_the_rates_and_agree(workload, run_cli, tmp_path):
    profile, load, costs, metadata_s = workload
    rates = ScrRates(nodes=2, app_pfs_write_bytes_per_s=5e8, cache_write_bytes_per_s=2e9,
                     encode_bytes_per_s=7e8, flush_bytes_per_s=3e8, busy_core_slowdown=3.0)
    calibrated = msgspec.structs.replace(profile, scr_rates=rates, nodes=2)
    sync = Config(bypass=False, copy_type="SINGLE", flush_every=1)
    study_flush = predict(load, machine(calibrated, costs), sync, 2, 1).flush_s
    per_node = load.ckpt_bytes / load.hosts
    assert study_flush == pytest.approx(per_node / 3e8, rel=1e-6)
    assert flush_s(load, calibrated) == pytest.approx(study_flush, rel=1e-6)  # one answer
    # the flat parallel file system shares its aggregate among more nodes
    assert predict(load, machine(calibrated, costs), sync, 8, 1).flush_s == \
        pytest.approx(study_flush * 4, rel=1e-6)
    text = open(SYSTEM).read() + "\n[scr_rates]\nnodes = 2\napp_pfs_write_bytes_per_s = 5e8\n" \
        "cache_write_bytes_per_s = 2e9\nencode_bytes_per_s = 7e8\nflush_bytes_per_s = 3e8\n"
    (tmp_path / "sys.toml").write_text(text)
    done = run_cli("recommend", TRACE, "--system", str(tmp_path / "sys.toml"), "--nodes", "2",
                   "--format", "json")
    assert done.returncode == 0, done.stderr
    evidence = [e for i in json.loads(done.stdout)["intents"] for e in i["evidence"]]
    assert any("encode 667.6 MiB/s (measured through SCR)" in e for e in evidence), evidence


@pytest.mark.parametrize("change, said", [
    (lambda d: d.pop("nodes"), "nodes"),
    (lambda d: d["runs"].update({"ghost": [{"per_checkpoint_s": [1.0]}]}), "runs.ghost"),
    (lambda d: d["runs"].update({k: [{"per_checkpoint_s": [-1.0]}] for k in list(d["runs"])[:1]}),
     "finite seconds"),
    (lambda d: d.update(runs=dict(list(d["runs"].items())[:3])), "at least 9 configurations"),
    (lambda d: d["configs"].update({k: {"env": {"SCR_FILE_BUF_SIZE": "lots"}}
                                    for k in d["configs"]}), "SCR parameters"),
])
def test_bad_runs_are_one_line_naming_what(run_cli, tmp_path, change, said):
    runs = json.load(open(RUNS))
    change(runs)
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    done = run_cli("calibrate", TRACE, "--runs", str(tmp_path / "runs.json"), "--system",
                   SYSTEM, "-o", str(tmp_path / "out.toml"))
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr
    assert not (tmp_path / "out.toml").exists()


def test_an_existing_out_or_bad_rates_are_refused(run_cli, tmp_path):
    out = tmp_path / "out.toml"
    out.write_text("kept")
    done = run_cli("calibrate", TRACE, "--runs", RUNS, "--system", SYSTEM, "-o", str(out))
    assert done.returncode == 2 and "--force" in done.stderr and out.read_text() == "kept"
    bad = tmp_path / "bad.toml"
    bad.write_text(open(SYSTEM).read() + "\n[scr_rates]\napp_pfs_write_bytes_per_s = 5e8\n"
                   "cache_write_bytes_per_s = 2e9\nencode_bytes_per_s = 7e8\n"
                   "flush_bytes_per_s = -3\n")
    done = run_cli("recommend", TRACE, "--system", str(bad))
    assert done.returncode == 2 and "scr_rates.flush_bytes_per_s" in done.stderr, done.stderr
