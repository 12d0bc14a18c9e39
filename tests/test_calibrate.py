"""`scrtune calibrate`: SCR's own rates fitted to timed runs, fed to recommend and study.

The measurements are real: the blocking time of every checkpoint of 48 SCR configurations run
on the real SCR v3.1.0 (tests/data/real_scr_grid, see its README), with the job's own trace.
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics

import msgspec
import pytest

from scrtune.intents.inputs import ScrRates, load_profile
from scrtune.intents.model import flush_s
from scrtune.study import fit as fitting
from scrtune.study import runs as timed_runs
from scrtune.study.model import Config, machine, predict
from tests.conftest import data
from tests.grid_reports import (
    RESULTS_DIR,
    RUNS,
    SYSTEM,
    TRACE,
    TRUTH,
    calibrated_by_cli,
)


def test_the_fit_finds_the_rates_that_made_the_times(workload):
    """Times made by the model itself from known rates, with 5% noise: the fit predicts the
    noiseless times closely and finds the rates that matter to them."""
    profile, load, costs, metadata_s = workload
    truth = TRUTH
    blocking_s = fitting.predictors(load, profile, costs, 2, 1, metadata_s).blocking_s
    noise = random.Random(7)
    runs = timed_runs.load_runs(RUNS)
    rows = [msgspec.structs.replace(row, blocking_s=blocking_s(truth, row)
                                    * math.exp(noise.gauss(0, 0.05)))
            for row in timed_runs.measured(runs, profile)]
    found = fitting.fit_rates(rows, fitting.Predictors(blocking_s), 2)
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
    # one rank a node here: the busiest rank's node flushes last
    per_node = max(load.ckpt_bytes / load.hosts, load.busiest_rank_bytes)
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
     "must be seconds from 0"),
    (lambda d: d.update(runs=dict(list(d["runs"].items())[:3])), "at least 10 configurations"),
    (lambda d: next(iter(d["runs"].values()))[0].update(flush_end_s=[1.5, 1e99]),
     "flush_end_s must be seconds within"),
    (lambda d: next(iter(d["runs"].values()))[0].update(flush_end_s=["soon"]), "flush_end_s"),
    # a checkpoint's phases are its three calls' seconds: two, or a negative one, are refused
    (lambda d: next(iter(d["runs"].values()))[0].update(phases_s=[[0.1, 0.2]]), "phases_s"),
    (lambda d: next(iter(d["runs"].values()))[0].update(phases_s=[[0.0, -0.2, 0.3]]),
     "phase times must be seconds from 0"),
    (lambda d: next(iter(d["runs"].values()))[0].update(phases_s=[[0.0, 1e99, 0.3]]),
     "phase times must be seconds from 0"),
    (lambda d: d["configs"].update({k: {"env": {"SCR_FILE_BUF_SIZE": "lots"}}
                                    for k in d["configs"]}), "env.SCR_FILE_BUF_SIZE: 'lots'"),
    # issue 48: typos were modelled as SCR's defaults, and names counted as configurations
    (lambda d: next(iter(d["configs"].values()))["env"].update(SCR_COPY_TYP="XOR"),
     "env.SCR_COPY_TYP: not an SCR parameter"),
    (lambda d: next(iter(d["configs"].values()))["env"].update(SCR_COPY_TYPE="BOGUS"),
     "env.SCR_COPY_TYPE: 'BOGUS' is not one of"),
    (lambda d: d.update(
        configs={f"same {i}": {"env": {"SCR_COPY_TYPE": "xor" if i % 2 else "XOR"}}
                 for i in range(12)},
        runs={f"same {i}": [{"per_checkpoint_s": [1.0]}] for i in range(12)}),
     "got 1 distinct ones among 12 names"),
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


def test_rates_the_runs_do_not_determine_are_said_and_not_taken_as_measured(run_cli, tmp_path):
    """Runs without PARTNER or XOR say nothing of the encode rate: it is left at the profile's
    network rate, marked undetermined, and never printed as measured (issue 48: the search's
    bound, 931 GiB/s, was). On the whole real grid the interference of a background flush sits
    at its lower bound: undetermined too."""
    runs = json.load(open(RUNS))
    plain = {name for name, config in runs["configs"].items()
             if config["env"].get("SCR_COPY_TYPE", "XOR") == "SINGLE"
             or config["env"].get("SCR_CACHE_BYPASS") == "1"}
    runs["configs"] = {k: v for k, v in runs["configs"].items() if k in plain}
    runs["runs"] = {k: v for k, v in runs["runs"].items() if k in plain}
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    out = tmp_path / "sys-scr.toml"
    done = run_cli("calibrate", TRACE, "--runs", str(tmp_path / "runs.json"), "--system",
                   SYSTEM, "-o", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    rates = load_profile(str(out)).scr_rates
    assert "encode_bytes_per_s" in rates.undetermined
    assert rates.encode_bytes_per_s == load_profile(SYSTEM).network_bytes_per_s
    said = next(line for line in out.read_text().splitlines()
                if line.startswith("encode_bytes_per_s"))
    assert "not determined" in said
    shown = run_cli("recommend", TRACE, "--system", str(out), "--nodes", "2")
    assert "measured through SCR" not in shown.stdout
    whole = tmp_path / "whole.toml"
    assert run_cli("calibrate", TRACE, "--runs", RUNS, "--system", SYSTEM, "-o",
                   str(whole)).returncode == 0
    whole_rates = load_profile(str(whole)).scr_rates
    assert "flush_interference" in whole_rates.undetermined
    # no per-call cost on this grid's disk: the runs cannot tell one (the threads grid's 2 ms
    # call is found and determined: test_the_fit_finds_the_per_call_cost_...)
    assert "flush_call_s" in whole_rates.undetermined


def test_a_rank_over_tied_predictions_says_how_many_values_they_take(run_cli):
    """The uncalibrated profile predicts one time for every configuration of a copy type and
    flush kind: on the thirteenth thread-count grid it ranked the runs 0.91 at a 53% median
    error, the calibrated model 0.88 at 8%, because Spearman's correlation ranks tied
    predictions as equals. Each score says how many values its predictions take, and the
    readable line says it where they tie."""
    grid = os.path.join(RESULTS_DIR, "real_scr_threads_thirteenth")
    args = ("calibrate", f"{grid}/trace", "--runs", f"{grid}.json", "--system",
            f"{grid}/sys.toml", "-o", "-")
    done = run_cli(*args, "--format", "json")
    assert done.returncode == 0, done.stderr
    scores = json.loads(done.stderr)["scores"]
    given, calibrated = scores["profile as given"], scores["calibrated"]
    rows = json.loads(done.stderr)["configurations"]
    assert given["configurations"] == calibrated["configurations"] == len(rows) == 48
    for label, score in (("profile as given", given), ("calibrated", calibrated)):
        assert score["distinct_predictions"] == len({row[label] for row in rows})
    assert given["distinct_predictions"] < calibrated["distinct_predictions"] < len(rows)
    text = run_cli(*args)
    assert text.returncode == 0, text.stderr
    said = " ".join(text.stderr.split())
    assert (f"(the predictions take {given['distinct_predictions']} values for 48: tied ones "
            "rank as equals)") in said


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
    # a slowdown is a share, not seconds
    bad.write_text(open(SYSTEM).read() + "\n[scr_rates]\napp_pfs_write_bytes_per_s = 5e8\n"
                   "cache_write_bytes_per_s = 2e9\nencode_bytes_per_s = 7e8\n"
                   "flush_bytes_per_s = 3e8\nflush_overlap_slowdown = 500\n")
    done = run_cli("recommend", TRACE, "--system", str(bad))
    assert done.returncode == 2 and "scr_rates.flush_overlap_slowdown" in done.stderr \
        and "a slowdown from 0" in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr


def test_the_cache_choice_follows_the_calibrated_rates_as_the_study_does(workload):
    """Calibrated, SCR's own rates decide cache or bypass in recommend as in the study's model
    (issue 48: after calibration the study said caching wins from 4 nodes and recommend still
    said bypass)."""
    from scrtune.intents import cache

    profile, load, costs, metadata_s = workload
    at_four = msgspec.structs.replace(profile, nodes=4)
    rates = ScrRates(nodes=2, app_pfs_write_bytes_per_s=2e8, cache_write_bytes_per_s=4e9,
                     encode_bytes_per_s=7e8, flush_bytes_per_s=3e8, checkpoint_overhead_s=0.01)
    calibrated = msgspec.structs.replace(at_four, scr_rates=rates)
    box = machine(calibrated, costs, metadata_s)
    study_bypass = predict(load, box, Config(bypass=True), 4, 1).blocking_s
    study_cache = predict(load, box, Config(bypass=False, copy_type="SINGLE", flush_every=1000),
                          4, 1).blocking_s
    chosen = cache.derive(load, calibrated).value
    assert chosen.bypass == (study_bypass <= study_cache) is False
    assert chosen.cache_write_s == pytest.approx(study_cache, rel=0.1)
    assert chosen.bypass_write_s == pytest.approx(study_bypass, rel=0.1)
    # the same rates the other way round: both say bypass
    slow_cache = msgspec.structs.replace(calibrated, scr_rates=msgspec.structs.replace(
        rates, app_pfs_write_bytes_per_s=4e9, cache_write_bytes_per_s=2e8))
    box = machine(slow_cache, costs, metadata_s)
    assert cache.derive(load, slow_cache).value.bypass
    assert predict(load, box, Config(bypass=True), 4, 1).blocking_s < \
        predict(load, box, Config(bypass=False, copy_type="SINGLE", flush_every=1000), 4,
                1).blocking_s
    # a page cache that takes almost none of a checkpoint unsynced: bypass goes at the file
    # system's rate (slower here than the application's fitted pace) in both, and both
    # still choose alike
    assert slow_cache.parallel is not None
    tight = msgspec.structs.replace(slow_cache, parallel=msgspec.structs.replace(
        slow_cache.parallel, dirty_allowance_bytes=1 << 20))
    box = machine(tight, costs, metadata_s)
    study_bypass = predict(load, box, Config(bypass=True), 4, 1).blocking_s
    study_cache = predict(load, box, Config(bypass=False, copy_type="SINGLE", flush_every=1000),
                          4, 1).blocking_s
    chosen = cache.derive(load, tight).value
    assert chosen.bypass_write_s == pytest.approx(study_bypass, rel=0.1)
    assert chosen.bypass == (study_bypass <= study_cache)
    assert chosen.bypass_write_s > 2 * cache.derive(load, slow_cache).value.bypass_write_s


def test_recommend_and_study_answer_alike_on_cache_or_bypass_after_calibration(run_cli,
                                                                              tmp_path):
    """Calibrated on the eighth thread-count grid, for the DLIO trace (70 MiB a node), the
    study ranked bypass first at 2 nodes by goodput while recommend cached with PARTNER: its
    cache wrote faster (0.14 s against 0.19 s), and the encode and what a node loss takes
    were weighed only after the choice. Issue 48: one model, one answer, at every count."""
    out = calibrated_by_cli(run_cli, tmp_path, "real_scr_threads_eighth")
    axes = tmp_path / "grid.toml"
    axes.write_text('copy_type = ["SINGLE", "PARTNER", "XOR"]\n')
    answers = {}
    for nodes in ("2", "3", "4", "8"):
        study = run_cli("study", data("dlio_train_ckpt"), "--system", str(out), "--nodes",
                        nodes, "--grid", str(axes), "--format", "json")
        assert study.returncode == 0, study.stderr
        chosen = run_cli("recommend", data("dlio_train_ckpt"), "--system", str(out),
                         "--nodes", nodes, "--format", "json")
        assert chosen.returncode == 0, chosen.stderr
        bypass = json.loads(chosen.stdout)["scr"]["SCR_CACHE_BYPASS"] == "1"
        assert bypass == json.loads(study.stdout)["rows"][0]["config"]["bypass"], nodes
        answers[nodes] = bypass
    assert answers["2"] and not answers["8"]  # bypass at few nodes, caching at more


def test_recommend_and_study_flush_alike_when_the_flush_outlasts_the_compute(run_cli,
                                                                           tmp_path):
    """The eighth grid's job keeps its own cadence (1.45 s of compute between checkpoints);
    planned for 8 nodes its flush takes 5.4 s, for 64 nodes 43 s, flushed every 10th
    checkpoint. SCR waits for that flush when the checkpoint two later must evict it. The
    core-affinity intent weighed one compute gap and chose a synchronous flush at 8 nodes,
    the study ten gaps and ranked an asynchronous one first even at 64 (issue 48): now both
    step SCR's flushes through as a timed run settles, and agree."""
    out = calibrated_by_cli(run_cli, tmp_path, "real_scr_threads_eighth")
    trace = os.path.join(RESULTS_DIR, "real_scr_threads_eighth", "trace")
    axes = tmp_path / "grid.toml"
    axes.write_text('copy_type = ["SINGLE"]\nbypass = [false]\nflush_async = [false, true]\n'
                    "flush_every = [10]\nfile_buf_bytes = [1048576, 32505856]\n")
    flushed = {}
    for nodes in ("8", "64"):
        asked = ("--system", str(out), "--nodes", nodes, "--job-interval-s", "trace")
        study = run_cli("study", trace, *asked, "--grid", str(axes), "--format", "json")
        assert study.returncode == 0, study.stderr
        chosen = run_cli("recommend", trace, *asked, "--format", "json")
        assert chosen.returncode == 0, chosen.stderr
        scr = json.loads(chosen.stdout)["scr"]
        assert scr["SCR_CACHE_BYPASS"] == "0" and scr.get("SCR_FLUSH", "10") == "10", scr
        flushed[nodes] = scr.get("SCR_FLUSH_ASYNC") == "1"
        best = json.loads(study.stdout)["rows"][0]["config"]
        assert flushed[nodes] == best["flush_async"], (nodes, best)
    assert flushed == {"8": True, "64": False}


def test_the_redundancy_choice_weighs_the_encode_as_the_study_does(workload):
    """Calibrated, the intent and the study's model charge one encode per copy type (issue 48:
    `recommend` wrote the parity at SCR's fitted cache rate and `study` at the profile's store
    rate, 5x slower: recommend chose XOR where study ranked SINGLE first)."""
    from scrtune.intents import redundancy

    profile, load, costs, metadata_s = workload
    # the quarter-scale grid's profile timed its tmpfs at 250 MiB/s; SCR wrote it at 1.3 GiB/s
    slow_store = msgspec.structs.replace(profile.node_local, write_bytes_per_s=2.5e8)
    rates = ScrRates(nodes=2, app_pfs_write_bytes_per_s=2e8, cache_write_bytes_per_s=4e9,
                     encode_bytes_per_s=2e9, flush_bytes_per_s=3e8)
    calibrated = msgspec.structs.replace(profile, nodes=4, node_local=slow_store,
                                         scr_rates=rates)
    box = machine(calibrated, costs, metadata_s)

    def study_s(copy_type: str) -> float:
        unflushed = Config(bypass=False, copy_type=copy_type, flush_every=0)
        return predict(load, box, unflushed, 4, 1).blocking_s

    candidates = {c.scheme: c for c in redundancy.derive(load, calibrated).value.candidates}
    for scheme in ("PARTNER", "XOR", "RS"):
        assert candidates[scheme].encode_s > 0.01
        assert study_s(scheme) - study_s("SINGLE") == \
            pytest.approx(candidates[scheme].encode_s, rel=1e-6), scheme
    # and the encode is the fitted one: the profile's store rate is not in it
    per_node = max(load.ckpt_bytes / load.hosts, load.busiest_rank_bytes)
    assert candidates["PARTNER"].encode_s == pytest.approx(per_node / 2e9 + per_node / 4e9)


def test_the_profiles_rates_are_shared_as_its_tiers_scale_before_the_fit_leans_on_them():
    """Fitted rates are per node at the runs' node count; a profile's, per node at one node.
    A parallel file system that does not scale (the profile's 1.0 per doubling) gives each of
    2 nodes half: SCR's flush on the real grids went at 238 and 397 MB/s a node, the
    profile's 484 and 792 MB/s at one node; the flush rate leaned on the unshared figure."""
    profile = load_profile(SYSTEM)
    assert profile.parallel is not None and profile.node_local is not None
    flat = msgspec.structs.replace(profile, parallel=msgspec.structs.replace(
        profile.parallel, scaling_per_doubling=1.0))
    one, two = (fitting.uncalibrated(flat, nodes) for nodes in (1, 2))
    flush = fitting.FLUSH_RATE
    assert math.exp(two[flush]) == pytest.approx(profile.parallel.write_bytes_per_s / 2)
    assert math.exp(one[flush]) == pytest.approx(profile.parallel.write_bytes_per_s)
    # node-local stores scale with the nodes: a node's rate is its own at any count
    cache = fitting.RATE_NAMES.index("cache_write_bytes_per_s")
    assert math.exp(two[cache]) == pytest.approx(profile.node_local.write_bytes_per_s)


def test_every_rate_the_profile_holds_is_one_row_of_the_fit_table_and_written_back():
    """The fit's start, bounds and unmeasured values were four arrays indexed like the rate
    names: adding a rate meant editing each in step. They come from one table now; a rate
    `ScrRates` holds but the table lacks would be neither fitted nor written by calibrate,
    and one left at a value outside its own bounds would be clipped without a word."""
    from scrtune.cli.calibrate_cmd import render_rates
    from scrtune.study.fitted_rates import HIGH, LOW, RATES, START

    held = [name for name in ScrRates.__struct_fields__
            if name not in ("source", "nodes", "undetermined")]
    assert [rate.name for rate in RATES] == held
    profile = load_profile(SYSTEM)
    for given in (profile, None):
        unmeasured = [rate.unmeasured(given, 2) for rate in RATES]
        for rate, value in zip(RATES, unmeasured):
            assert rate.low <= (rate.start if value is None else value) <= rate.high, rate.name
    assert all(LOW <= START) and all(START <= HIGH)
    # every rate is written back, each with its own wording, and the file parses
    rates = fitting.rates_of(fitting.uncalibrated(profile, 2), 2, "test")
    written = render_rates(rates)
    for rate in RATES:
        line = next(line for line in written.splitlines() if line.startswith(rate.name))
        assert line.endswith(rate.shown(getattr(rates, rate.name))), line
    assert "+0% beside a flush" in written and "x1.00" in written
