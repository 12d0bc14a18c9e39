"""`scrtune calibrate`: SCR's own rates fitted to timed runs, fed to recommend and study.

The measurements are real: the blocking time of every checkpoint of 48 SCR configurations run
on the real SCR v3.1.0 (tests/data/real_scr_grid, see its README), with the job's own trace.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import statistics
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from scrtune.cli.study_cmd import read_workload
from scrtune.intents.inputs import ScrRates, load_profile
from scrtune.intents.model import flush_s
from scrtune.intents.overlap import MAX_STEPPED, timed_blocking_s
from scrtune.study import fit as fitting
from scrtune.study import runs as timed_runs
from scrtune.study.model import Config, machine, predict
from tests.conftest import data

GRID = data("real_scr_grid")
TRACE, RUNS, SYSTEM = f"{GRID}/trace", f"{GRID}/runs.json", f"{GRID}/sys.toml"


# the rates model-made times come from, in the tests that check the fit itself
TRUTH = ScrRates(nodes=2, app_pfs_write_bytes_per_s=5e8, cache_write_bytes_per_s=2e9,
                 encode_bytes_per_s=7e8, flush_bytes_per_s=3e8, flush_call_s=2e-3,
                 busy_core_slowdown=2.5, checkpoint_overhead_s=0.05)


@pytest.fixture(scope="module")
def workload():
    profile = load_profile(SYSTEM)
    load, costs, metadata_s = read_workload([TRACE], profile, "calibrate")
    return profile, load, costs, metadata_s


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


RESULTS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "benchmarks", "results")


def _calibrated_by_cli(run_cli, tmp_path: Path, name: str) -> Path:
    """`scrtune calibrate` on a stored grid's trace, runs and profile, as a user runs it."""
    grid = os.path.join(RESULTS_DIR, name)
    out = tmp_path / "sys.toml"
    done = run_cli("calibrate", f"{grid}/trace", "--runs", f"{grid}.json", "--system",
                   f"{grid}/sys.toml", "-o", str(out))
    assert done.returncode == 0, done.stderr
    return out


def test_recommend_and_study_answer_alike_on_cache_or_bypass_after_calibration(run_cli,
                                                                              tmp_path):
    """Calibrated on the eighth thread-count grid, for the DLIO trace (70 MiB a node), the
    study ranked bypass first at 2 nodes by goodput while recommend cached with PARTNER: its
    cache wrote faster (0.14 s against 0.19 s), and the encode and what a node loss takes
    were weighed only after the choice. Issue 48: one model, one answer, at every count."""
    out = _calibrated_by_cli(run_cli, tmp_path, "real_scr_threads_eighth")
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
    out = _calibrated_by_cli(run_cli, tmp_path, "real_scr_threads_eighth")
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


def test_async_flush_runs_alone_leave_the_flush_rate_and_slowdown_undetermined(workload):
    """Runs whose flushes all hide behind compute show a flush's rate and the slowdown of its
    threads only as a ratio: both are said to be undetermined, however well they fit (issue
    48: two assumed compute gaps gave 1.3 GB/s and 30 GiB/s, equally good)."""
    profile, load, costs, metadata_s = workload
    truth = TRUTH
    blocking_s = fitting.predictors(load, profile, costs, 2, 1, metadata_s).blocking_s
    noise = random.Random(7)
    rows = [msgspec.structs.replace(row, blocking_s=blocking_s(truth, row)
                                    * math.exp(noise.gauss(0, 0.05)))
            for row in timed_runs.measured(timed_runs.load_runs(RUNS), profile)
            if row.config.bypass or row.config.flush_async]
    found = fitting.fit_rates(rows, fitting.Predictors(blocking_s), 2, profile=profile)
    assert {"flush_bytes_per_s", "busy_core_slowdown"} <= set(found.undetermined)
    # the rates every configuration here depends on are determined
    assert "app_pfs_write_bytes_per_s" not in found.undetermined


def test_a_flushs_real_end_is_fitted_from_both_sides_a_bound_from_above(workload):
    """`real_scr_tuning.py --flush-ends` notes when each flush's bytes were all in the parallel
    file system: an asynchronous flush's duration, not SCR_DEBUG's bound. Runs whose real
    flushes took twice what their blocking times imply pull the fitted flush up toward
    them; the same seconds as bounds leave it where the blocking times put it."""
    profile, load, costs, metadata_s = workload
    predict = fitting.predictors(load, profile, costs, 2, 1, metadata_s)
    blocking_s, flush_s = predict.blocking_s, predict.flush_s
    rows = [msgspec.structs.replace(row, blocking_s=blocking_s(TRUTH, row),
                                    flush_s=2 * flush_s(TRUTH, row) if row.config.flush_async
                                    else None, flush_exact=row.config.flush_async)
            for row in timed_runs.measured(timed_runs.load_runs(RUNS), profile)
            if row.config.bypass or row.config.flush_async]

    def stretch(found: ScrRates) -> float:
        return statistics.median(flush_s(found, row) / flush_s(TRUTH, row) for row in rows
                                 if row.flush_s)

    exact = fitting.fit_rates(rows, predict, 2, profile=profile)
    bounds = fitting.fit_rates([msgspec.structs.replace(row, flush_exact=False) for row in rows],
                               predict, 2, profile=profile)
    # the blocking times pull back: a longer flush also slows the checkpoints it overlaps
    # (1.31x here; the bounds 0.98x)
    assert stretch(exact) > 1.25
    assert stretch(bounds) < 1.1


def test_the_runs_real_flush_ends_are_read_as_the_first_flushs_duration(tmp_path):
    """A run's `flush_end_s` gives an asynchronous configuration the first checkpoint's flush
    (the one no other flush precedes), the median over its runs; a synchronous one, whose
    flushes end inside SCR_Complete_output (negative), keeps SCR_DEBUG's time."""
    runs = json.load(open(RUNS))
    names = {"async": None, "sync": None}
    for name, config in runs["configs"].items():
        env = config["env"]
        kind = "async" if env.get("SCR_FLUSH_ASYNC") == "1" else "sync"
        if env.get("SCR_CACHE_BYPASS") == "0" and names[kind] is None:
            names[kind] = name
    for kind, ends in (("async", [[2.0, 9.0], [3.0, 9.0]]), ("sync", [[-0.1], [-0.2]])):
        for run, end in zip(runs["runs"][names[kind]], ends):
            run["flush_end_s"] = end
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    rows = {row.name: row for row in timed_runs.measured(
        timed_runs.load_runs(str(tmp_path / "runs.json")), load_profile(SYSTEM))}
    assert rows[names["async"]].flush_exact and rows[names["async"]].flush_s == 2.5
    assert not rows[names["sync"]].flush_exact
    assert rows[names["sync"]].flush_s == timed_runs.measured(
        timed_runs.load_runs(RUNS), load_profile(SYSTEM))[
        sorted(runs["runs"]).index(names["sync"])].flush_s


def test_flush_ends_the_benchmark_did_not_see_are_null_and_read_as_no_duration():
    """`real_scr_tuning.py --flush-ends` writes null for a checkpoint whose flush it did not
    see end while the job ran: scrtune's recommendation flushes every 10th checkpoint, so a
    5-checkpoint run flushes only its last, at SCR_Finalize. `calibrate` refused such a file
    ("Expected `float`, got `null`"); it now reads null as no duration, and a configuration
    whose first checkpoint was not flushed keeps SCR_DEBUG's time."""
    grid = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "benchmarks", "results", "real_scr_small_phases")
    runs = timed_runs.load_runs(f"{grid}.json")
    ends = runs.runs["(b) scrtune recommend"][0].flush_end_s
    assert ends is not None and ends[0] is None and ends[-1] is not None
    rows = {row.name: row for row in timed_runs.measured(runs, load_profile(f"{grid}/sys.toml"))}
    assert not rows["(b) scrtune recommend"].flush_exact
    every = rows["(c) cache SINGLE 1MB async/1 bound"]
    firsts = [t.flush_end_s[0] for t in runs.runs[every.name]]
    assert every.flush_exact and every.flush_s == statistics.median(firsts)


def test_asynchronous_flush_times_are_bounds_and_the_flush_rate_stays_near_the_profile(
        workload):
    """An asynchronous flush's SCR_DEBUG time runs until SCR noticed its end, in a later
    SCR_Complete_output: a flush that hid behind the compute shows its checkpoint period.
    Read as a duration, such times pulled the fitted flush far too slow; as bounds, they leave the
    flush rate to the runs that show it, and where none does, near the profile's parallel
    file system (test_held_out_under_a_per_call_cost_with_thread_counts, on real runs)."""
    profile, load, costs, metadata_s = workload
    predict = fitting.predictors(load, profile, costs, 2, 1, metadata_s)
    blocking_s, flush_s = predict.blocking_s, predict.flush_s
    rows = [msgspec.structs.replace(row, blocking_s=blocking_s(TRUTH, row),
                                    flush_s=flush_s(TRUTH, row) if row.config.flush_async
                                    else None)
            for row in timed_runs.measured(timed_runs.load_runs(RUNS), profile)
            if row.config.bypass or row.config.flush_async]
    # SCR noticed every asynchronous flush 3 s after its end: bounds, well above the truth
    noticed = [msgspec.structs.replace(row, flush_s=row.flush_s + 3.0) if row.flush_s else row
               for row in rows]
    found = fitting.fit_rates(noticed, predict, 2, profile=profile)
    ratios = [flush_s(found, row) / flush_s(TRUTH, row) for row in rows if row.flush_s]
    assert 0.5 < statistics.median(ratios) < 1.5  # not stretched toward the bounds
    assert profile.parallel is not None
    assert found.flush_bytes_per_s < 4 * profile.parallel.write_bytes_per_s  # no drift


def test_flush_times_in_the_runs_are_fitted_too(run_cli, tmp_path):
    """benchmarks/real_scr_tuning.py writes each run's flush seconds (SCR_DEBUG) and count."""
    grid = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "benchmarks", "results", "real_scr_grid")
    out = tmp_path / "sys-scr.toml"
    done = run_cli("calibrate", f"{grid}/trace", "--runs", f"{grid}.json", "--system",
                   f"{grid}/sys.toml", "-o", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "(flush times of 48)" in report["scr_rates"]["source"]
    assert report["scores"]["calibrated"]["rank_correlation"] > 0.85
    assert report["scores"]["calibrated flush times"]["median_error"] < 0.25


_STORED_REPORTS: dict[str, str] = {}  # a stored grid's report, as JSON: the same every time


def _held_out(tmp_path, grid: str, runs: str | None = None) -> dict:
    """model_holdout's report on benchmarks/results/GRID.json (or on `runs`, another file)."""
    stored = runs is None
    if stored and grid in _STORED_REPORTS:
        return json.loads(_STORED_REPORTS[grid])
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = tmp_path / f"{grid}-report.json"
    runs = runs or os.path.join(root, "benchmarks", "results", f"{grid}.json")
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "model_holdout.py"),
                           "--runs", runs, "--json", str(out)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    if stored:
        _STORED_REPORTS[grid] = out.read_text()
    return json.loads(out.read_text())


@pytest.mark.parametrize("grid, said", [
    ("real_scr_slowpfs", "at least 10 configurations, got 6 distinct ones"),
    ("real_scr_small_phases", "holding any copy type out leaves fewer than 10"),
    ("not-a-grid", "no field 'profile'")])
def test_model_holdout_says_in_one_line_why_it_cannot_hold_a_grid_out(tmp_path, grid, said):
    """A grid of too few configurations (in all, or to hold a copy type out: a traceback
    before), or a file that is no grid: one line and exit 2."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    runs = os.path.join(root, "benchmarks", "results", f"{grid}.json")
    if grid == "not-a-grid":
        runs = str(tmp_path / "runs.json")
        Path(runs).write_text("{}")
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "model_holdout.py"),
                           "--runs", runs], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2 and said in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) == 1 and not done.stdout


def test_held_out_by_configuration_group_the_model_meets_issue_48s_goals(tmp_path):
    """benchmarks/model_holdout.py on the real-SCR grid of 4 repetitions: every cached run
    predicted by rates fitted with its copy type held out (SCR's defaults held out with
    bypass, the same configuration), within 25% (median) and ranked with a correlation of at
    least 0.9; the model beats a constant guess on every group it holds out."""
    report = _held_out(tmp_path, "real_scr_whole")
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.25
    assert whole["rank_correlation"] >= 0.9
    for name, group in report["groups"].items():
        assert group["median_error"] < group["constant_error"], name


def test_held_out_under_a_per_call_cost_with_thread_counts(tmp_path):
    """The grid of transfer-thread counts (1, 2, 4) and buffers (1, 8, 64 MB) under a 2 ms
    write call: within 25% held out by copy type; a thread count held out is predicted within
    25% too (the model divides the calls' waits among min(CPUs, 16, files) threads)."""
    report = _held_out(tmp_path, "real_scr_threads")
    assert report["all_held_out"]["median_error"] <= 0.25
    for threads in (1, 2, 4):
        assert report["groups"][f"{threads} transfer threads"]["median_error"] <= 0.25
    # every synchronous flush held out: the asynchronous runs bound the flush rate from one
    # side only, and it stays near the profile's (fitted freely: 72 GB/s, 70% off)
    sync = report["groups"]["flush sync/1"]
    assert sync["median_error"] < sync["constant_error"]
    # within a copy type the asynchronous runs differ by their transfer threads' competition
    # (SINGLE: 0.19-0.22 s with 1 MB calls, 0.21-0.36 s with 64 MB and 1-4 threads); a model
    # without it ties them and ranked the held-out runs at 0.84. (0.91 while a background
    # flush slowed every checkpoint by its share of the period; 0.88 since it slows the one it
    # overlaps and SCR waits only for the flush it evicts; 0.86 since any flush alongside
    # slows it, which this grid, without a run that flushes rarely, separates from SCR's cache
    # writes by its synchronous runs alone: the goal's 0.9 is not met here)
    assert report["all_held_out"]["rank_correlation"] >= 0.86
    # one transfer thread held out: its flushes outlast the compute, and SCR (cache of 2)
    # does not wait for them at the next checkpoint (charged there, 12% against 10%)
    one = report["groups"]["1 transfer threads"]
    assert one["median_error"] < one["constant_error"]
    # the 1 MB runs alone show the 2 ms call: held out, the call leans on the profile's
    # measured latency (fitted freely it went to 1e-9 s, their flushes 36% low)
    small = report["groups"]["buffer 1 MiB"]
    assert small["median_error"] < small["constant_error"]
    # bypass held out: every write call of the trace pays the 2 ms, its 256 small ones too
    # (counted from the dominant write sizes: 52% off, the constant 39%)
    bypass = report["groups"]["bypass"]
    assert bypass["median_error"] < bypass["constant_error"]
    # beside each group, how far a run lies from its configuration's median, from the runs
    # themselves: 4 threads' is well below the constant's error (a flat group, not noise)
    four = report["groups"]["4 transfer threads"]
    assert four["spread"] == pytest.approx(_spread_of_runs(" 4 threads"), rel=1e-9)
    assert 0 < four["spread"] < four["constant_error"]


def test_a_thread_count_grid_measured_with_its_fresh_memory_rate_meets_the_goals(tmp_path):
    """The thread-count grid measured again on 2026-11-27 (the same command, 48 configurations
    x 3 runs), with the profile `scrtune profile` took that day, which has the node's
    fresh-memory rate (1.04 GB/s; the grids before it had none, so the model's mapped buffers
    cost them nothing). Held out by copy type: 6.9%, rank correlation 0.93 (10% and 0.91 as
    measured, before a flush alongside slowed a checkpoint whatever its threads did; 8.6%
    before the application's timed writes were fitted; the runs against themselves 0.93);
    the 4-thread group, which lost to the constant on the first thread-count grid (12%
    against 5%), 8.6% against 16%."""
    report = _held_out(tmp_path, "real_scr_threads_fresh")
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.25
    assert whole["rank_correlation"] >= 0.9
    for name, group in report["groups"].items():
        if name != "bypass":
            assert group["median_error"] < group["constant_error"], name
    # bypass held out (18% against the constant's 9%): no other group writes straight to the
    # parallel file system, so its rate is the profile's (578 MB/s), and that day's runs wrote
    # slower from their third checkpoint on (this machine's fresh memory; no page cache trim)
    bypass = report["groups"]["bypass"]
    assert bypass["runs"] == 2
    # its two runs are one configuration (in bypass SCR's flush settings change nothing),
    # measured 1.42 and 1.72 s: one time for both is at best 8.7% off (the median of two
    # errors is their mean, least at the lower time). The constant's 9.3% can be beaten by a
    # model that gives a configuration one time: the model's 18% is its own error
    defaults, named = sorted(_median_mean(_grid_runs("real_scr_threads_fresh")[name])
                             for name in ("(a) SCR defaults", "(c) bypass"))
    floor = (named - defaults) / named / 2
    assert bypass["one_value_floor"] == pytest.approx(floor, rel=1e-9)
    assert floor < bypass["constant_error"] < bypass["median_error"]


def test_the_applications_timed_writes_pin_the_cache_rate_a_held_out_copy_type_needs(
        run_cli, tmp_path):
    """Blocking times see the cache's write rate only beside the encode's: a PARTNER or XOR
    checkpoint is both (and SCR's own work on it). With SINGLE's runs held out, the search
    split them as it liked, the cache at 1.2 GB/s where the application's writes took 0.24 s
    for 403 MB (1.7 GB/s), and SINGLE came out 24% high on the fresh-memory grid. The runs'
    `phases_s` (what real_scr_tuning.py records) time the application's writes apart; those
    of the first checkpoint, which no flush overlaps, pin the rate: 7%."""
    profile, rows, blocking_s, predict = _threads_grid("real_scr_threads_fresh")
    single = [row for row in rows if not row.config.bypass and row.config.copy_type == "SINGLE"]
    others = [row for row in rows if row not in single]
    assert len(single) == 16 and all(row.write_s for row in rows)

    def held_out(fitted_to: list) -> tuple[float, ScrRates]:
        rates = fitting.fit_rates(fitted_to, predict, 2, profile=profile)
        return statistics.median(abs(blocking_s(rates, row) / row.blocking_s - 1)
                                 for row in single), rates

    timed, rates = held_out(others)
    untimed, _ = held_out([msgspec.structs.replace(row, write_s=None) for row in others])
    assert timed < 0.12 and untimed > 0.18, (timed, untimed)
    # the fitted cache reproduces the writes the runs timed
    writes = [predict.write_s(rates, row) / row.write_s for row in others
              if not row.config.bypass]
    assert 0.85 < statistics.median(writes) < 1.15
    # as a user runs it: calibrate says it fitted them, and how well
    grid = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "benchmarks", "results", "real_scr_threads_fresh")
    done = run_cli("calibrate", f"{grid}/trace", "--runs", f"{grid}.json", "--system",
                   f"{grid}/sys.toml", "-o", str(tmp_path / "sys-scr.toml"), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "the application's writes of 48" in report["scr_rates"]["source"]
    assert report["scores"]["calibrated application's writes"]["median_error"] < 0.1


def test_the_thread_count_grid_measured_a_third_time_ranks_above_the_goal(tmp_path):
    """The same command a third time (2026-11-27, 08:49-09:38): 7.8% held out by copy type
    (8.5% before the application's timed writes were fitted), rank correlation 0.925 (0.897
    before a flush beside a checkpoint slowed it whatever its threads did). The runs' own
    repeatability is 0.893 (odd against even repetitions, stepped up to all of them), which
    bounds a model near its square root, 0.945. Three
    groups go to the constant: one transfer thread (7.4% against 5.8%), PARTNER (6.7%
    against 4.5%; its runs agree with themselves at 0.45) and bypass (13% against 2%)."""
    report = _held_out(tmp_path, "real_scr_threads_again")
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.25
    assert whole["rank_correlation"] >= 0.9
    assert whole["rank_correlation"] <= math.sqrt(whole["repeatability"])
    lost = {name for name, group in report["groups"].items()
            if group["median_error"] >= group["constant_error"]}
    assert lost == {"1 transfer threads", "copy PARTNER", "bypass"}, lost
    # the flat groups: every PARTNER run within a few percent of the others, so the
    # constant is a good guess there, and the runs cannot rank them either
    partner = report["groups"]["copy PARTNER"]
    assert partner["constant_error"] < 0.05 and partner["repeatability"] < 0.5


def test_a_grid_at_a_quarter_of_the_scale_is_held_out_and_its_unknowns_said(tmp_path, run_cli):
    """The thread-count grid again at a quarter of the scale (144 MB a rank, 0.6 s of compute:
    every asynchronous flush outlasts it; tenth round). Held out by copy type 13%, rank 0.91,
    and it ranks the runs about as well as the other runs of each configuration do (0.92
    against 0.93). Before the thirty-second round it held 15%, rank 0.77: its profile timed
    the node-local store's writes at 262 MB/s (5 GB/s read), which made every transfer
    thread busy whatever its buffer, where the 1 MB buffers measured least. Each thread
    count and the 1 MB buffers held out beat the constant (the 1 MB ones 38% against 46%:
    still the model's worst group here)."""
    report = _held_out(tmp_path, "real_scr_threads_small")
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.20 and whole["rank_correlation"] >= 0.9
    assert whole["against_halves"]["model_rank"] >= whole["against_halves"]["repeat_rank"] - 0.03
    for group in ("1 transfer threads", "2 transfer threads", "4 transfer threads",
                  "buffer 1 MiB"):
        assert report["groups"][group]["median_error"] \
            < report["groups"][group]["constant_error"], group
    # fitted to all 48 configurations, the interference and the encode rate are not
    # determined (at a bound, or moving the runs by less than their noise): said so, never
    # printed as measured
    grid = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "benchmarks", "results", "real_scr_threads_small")
    done = run_cli("calibrate", f"{grid}/trace", "--runs", f"{grid}.json", "--system",
                   f"{grid}/sys.toml", "-o", str(tmp_path / "sys-scr.toml"), "--format", "json")
    assert done.returncode == 0, done.stderr
    rates = json.loads(done.stdout)["scr_rates"]
    assert {"flush_interference", "encode_bytes_per_s"} <= set(rates["undetermined"])
    assert "flush_bytes_per_s" not in rates["undetermined"]


def test_a_grid_whose_written_files_left_memory_is_held_out(tmp_path):
    """The thread-count grid run with the page cache dropped every 0.5 s and 256 MB of dirty
    pages (`--trim-cache-s 0.5 --dirty-mb 256`, eleventh round): no later-checkpoint step from
    the guest's memory. Held out by copy type 14%, rank 0.71 (the runs against themselves
    0.92): the median within the goal, the ranking not: every asynchronous configuration of a
    copy type is one time to the model, where with an asynchronous flush PARTNER's and XOR's
    second checkpoints measured 1.4-3.3x their first (synchronous: 0.95-1.2x); the job's own
    phases put it in the application's writes and the encode, not the flush (HISTORY.md,
    eleventh round: this guest's memory the candidate). Each thread count held out beats the
    constant, and SINGLE held out (an encode of none, fitted from PARTNER and XOR) by far."""
    report = _held_out(tmp_path, "real_scr_threads_trim")
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.25
    assert whole["rank_correlation"] >= 0.65
    for threads in (1, 2, 4):
        group = report["groups"][f"{threads} transfer threads"]
        assert group["median_error"] < group["constant_error"], threads
    single = report["groups"]["copy SINGLE"]
    assert single["median_error"] < single["constant_error"] / 4


def test_a_grid_that_noted_its_flushes_real_ends_is_held_out_closer(tmp_path):
    """The thread-count grid run again with `--flush-ends` (2026-11-26, a day the machine ran
    2-4x slower): each asynchronous configuration's first flush is fitted as the duration it
    was. The synchronous flushes held out come closer than from the same runs without those
    ends (2% against 9%), and one transfer thread held out (its flushes twice two threads')
    beats the constant guess (9% against 15%; without the ends 15%). benchmarks/HISTORY.md,
    seventh to ninth and thirty-second rounds: over every copy type held out the ends came
    closer (7% against 12%) until the busy share of a transfer thread was taken from the
    store's read rate; since, 9% against 8% (rank 0.81 against 0.88)."""
    noted = _held_out(tmp_path, "real_scr_threads_ends")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "benchmarks", "results", "real_scr_threads_ends.json")) as f:
        grid = json.load(f)
    for runs in grid["runs"].values():
        for run in runs:
            del run["flush_end_s"]
    (tmp_path / "without.json").write_text(json.dumps(grid))
    without = _held_out(tmp_path, "without", str(tmp_path / "without.json"))
    assert noted["all_held_out"]["median_error"] <= 0.1
    assert noted["groups"]["flush sync/1"]["median_error"] \
        < without["groups"]["flush sync/1"]["median_error"]
    one = noted["groups"]["1 transfer threads"]
    assert one["median_error"] < one["constant_error"]
    assert one["median_error"] < without["groups"]["1 transfer threads"]["median_error"]
    # four threads held out: their flushes end sooner, overlap the next checkpoint less, and
    # slow it while they copy (14% against the constant's 19%; 25% when every checkpoint was
    # slowed by the flush's share of the period)
    four = noted["groups"]["4 transfer threads"]
    assert four["median_error"] < four["constant_error"]


def _grid_runs(grid: str) -> dict[str, list[dict]]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "benchmarks", "results", f"{grid}.json")) as handle:
        return json.load(handle)["runs"]


def _median_mean(runs: list[dict]) -> float:
    """A configuration's blocking time: the median over its runs of each run's mean."""
    return statistics.median(statistics.fmean(run["per_checkpoint_s"]) for run in runs)


def _spread_of_runs(suffix: str) -> float:
    times = _grid_runs("real_scr_threads")
    spreads = []
    for name in (n for n in times if n.endswith(suffix)):
        means = [statistics.fmean(run["per_checkpoint_s"]) for run in times[name]]
        middle = statistics.median(means)
        spreads.append(statistics.median(abs(m - middle) / middle for m in means))
    assert len(spreads) == 9
    return statistics.median(spreads)


def _threads_grid(name: str = "real_scr_threads"):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    grid = os.path.join(root, "benchmarks", "results", name)
    profile = load_profile(f"{grid}/sys.toml")
    load, costs, metadata_s = read_workload([f"{grid}/trace"], profile, "calibrate")
    runs = timed_runs.load_runs(f"{grid}.json")
    args = (load, profile, costs, runs.nodes, runs.ranks_per_node, metadata_s)
    predict = fitting.predictors(*args)
    return profile, timed_runs.measured(runs, profile), predict.blocking_s, predict


def test_busy_transfer_threads_slow_the_checkpoints_they_overlap():
    """On the real SCR under a 2 ms write call, SINGLE asynchronous checkpoints took 0.19-0.22
    s with 1 MB file buffers whatever the thread count, and 0.21, 0.31 and 0.36 s with 64 MB
    buffers and 1, 2 and 4 threads: a thread copying big buffers competes with the rank, one
    that mostly waits on the file system's calls does not. Fitted to every other copy type,
    the model ranks the SINGLE runs about as they were measured."""
    profile, rows, blocking_s, predict = _threads_grid()
    others = [row for row in rows if row.config.copy_type != "SINGLE"]
    rates = fitting.fit_rates(others, predict, 2, profile=profile)
    single = [row for row in rows if row.config.copy_type == "SINGLE" and row.config.flush_async]
    assert len(single) == 12
    predicted = [blocking_s(rates, row) for row in single]
    # 0.78 (the runs against themselves: 0.96); without the threads' competition, -0.79
    assert fitting.spearman([row.blocking_s for row in single], predicted) >= 0.7


def test_the_fit_finds_the_per_call_cost_the_grid_was_run_with():
    """real_scr_threads was run with every write call to the "parallel file system" made to
    wait 2 ms (benchmarks/slowpfs.c): a cost set by hand, so known. The model is piecewise (a
    flush hides behind the compute or it does not) and the fit has local minima: from one
    start it stayed at 1e-9 s a call on these runs (0.1 ms with a copy type held out, where
    1 MB synchronous flushes then came out 36% low)."""
    profile, rows, blocking_s, predict = _threads_grid()
    found = fitting.fit_rates(rows, predict, 2, profile=profile)
    assert 1e-3 <= found.flush_call_s <= 4e-3
    # and said to be determined: its effect lies on a few runs, the 1 MB ones mostly, and
    # averaged over all 96 times it was diluted below the 5% that makes a rate determined
    assert "flush_call_s" not in found.undetermined


def test_with_the_1mb_runs_held_out_the_call_cost_leans_on_the_profiles_latency():
    """Only the runs with 1 MB file buffers show the 2 ms call strongly; fitted to the others
    the call went to the search's bound (1e-9 s) and the held-out 1 MB flushes came out far
    too fast. The profile measured the file system's call (2.1 ms): the fit leans on it."""
    profile, rows, blocking_s, predict = _threads_grid()
    assert profile.parallel is not None and profile.parallel.write_latency_s > 1e-3
    bigger = [row for row in rows if row.config.bypass or row.config.file_buf_bytes > 1 << 20]
    found = fitting.fit_rates(bigger, predict, 2, profile=profile)
    assert 1e-3 <= found.flush_call_s <= 4e-3


def test_a_timed_run_waits_only_for_the_flush_it_evicts():
    """SCR v3.1 starts each asynchronous flush when its checkpoint completes and waits in
    SCR_Start_output only for the flush of the dataset it evicts, SCR_CACHE_SIZE back
    (scr-facts.md). Measured on the real SCR (benchmarks/HISTORY.md, 2026-11-25: 8 checkpoints,
    SINGLE, 1 MB buffers, one thread, 2 ms a call, 1.5 s of compute; the first checkpoint 0.22
    s, SCR_DEBUG's flushes 3.4, 3.0 and 3.5 s): 1.88 s a checkpoint with a cache of 1 (each
    waits for the flush before it), 0.51 and 0.54 s with 2 and 3 (flushes overlap, waits come
    late). Flushes at once wait on their 384 calls side by side and share the bytes' rate.
    The model charged the overrun to every next checkpoint: about 1.7 s whatever the cache."""
    calls_s = 384 * 0.002
    measured = {1: (3.4, 1.88), 2: (3.0, 0.51), 3: (3.5, 0.535)}
    modelled = {}
    for cache_size, (one_flush_s, blocking_s) in measured.items():
        modelled[cache_size] = timed_blocking_s(0.22, one_flush_s, one_flush_s - calls_s, 1.5,
                                                0.0, 1, cache_size, 8)
        assert modelled[cache_size] == pytest.approx(blocking_s, rel=0.25), cache_size
    assert modelled[2] < modelled[1] / 3
    # a runs file may list millions of checkpoints in a run: stepped through MAX_STEPPED
    many = timed_blocking_s(0.22, 3.0, 2.2, 1.5, 0.5, 1, 2, 10**7)
    assert many == timed_blocking_s(0.22, 3.0, 2.2, 1.5, 0.5, 1, 2, MAX_STEPPED)


def test_runs_of_one_buffer_size_leave_the_call_at_the_profiles_latency(tmp_path):
    """real_scr_dirty_call (2026-11-26: 1 and 64 MB buffers, 1, 2 and 4 transfer threads, a 2
    ms write call, the kernel's dirty cache bounded to 256 MB). Fitted to the 64 MB runs alone,
    whose flushes are shorter with more threads and have 6 calls a rank, the call went to 114
    ms (the profile measured 2.2 ms), was said to be determined, and the held-out 1 MB runs
    (384 calls) came out 12x too slow. The call leans on the profile's measure; the runs of
    one buffer size cannot tell it, and say so."""
    profile, rows, blocking_s, predict = _threads_grid("real_scr_dirty_call")
    latency_s = profile.parallel.write_latency_s
    big = [row for row in rows if row.config.bypass or row.config.file_buf_bytes > 1 << 20]
    found = fitting.fit_rates(big, predict, 2, profile=profile)
    assert latency_s / 2 <= found.flush_call_s <= latency_s * 2
    assert "flush_call_s" in found.undetermined
    report = _held_out(tmp_path, "real_scr_dirty_call")
    small = report["groups"]["buffer 1 MiB"]
    assert small["median_error"] < min(small["constant_error"], 0.25)
    # the grid has two flush kinds: all asynchronous runs held out leave 8 configurations,
    # too few to fit 9 rates: said, not fitted
    assert report["groups"]["flush async/1 bound"] == {"runs": 19, "fitted_to": 8}
    # every thread count held out beats the constant guess (4 threads: 8% against 14%; 38%
    # when every checkpoint was slowed by the flush's share of the period)
    for threads in (1, 2, 4):
        group = report["groups"][f"{threads} transfer threads"]
        assert group["median_error"] < group["constant_error"], threads


def test_held_out_bypass_pays_every_write_call_of_the_trace():
    """Under the 2 ms call, SCR bypass took 1.07-1.10 s a checkpoint: a rank's 384 MiB in six
    64 MiB writes, and its metadata file in 256 writes of 1 KiB, each of which waits 2 ms (half
    a second). The model counted calls from the dominant write sizes, six, and with the
    bypass runs held out came out 52% low (a constant: 39%); the trace counts them all."""
    profile, rows, blocking_s, predict = _threads_grid()
    cached = [row for row in rows if not row.config.bypass]
    bypass = [row for row in rows if row.config.bypass]
    assert len(bypass) == 2  # bypass and SCR's defaults, which are bypass in v3.1.0
    rates = fitting.fit_rates(cached, predict, 2, profile=profile)
    constant = statistics.median(row.blocking_s for row in cached)
    for row in bypass:
        error = abs(blocking_s(rates, row) - row.blocking_s) / row.blocking_s
        assert error < 0.2 and error < abs(constant - row.blocking_s) / row.blocking_s, row.name


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


def test_study_reads_what_calibrate_wrote_for_the_threads_grid(run_cli, tmp_path):
    """The README's path: calibrate, then study with its output. On the threads grid every
    configuration's remark was empty and the table's free-text column 0 wide: a ValueError
    from textwrap, a traceback instead of the table."""
    grid = os.path.join(RESULTS_DIR, "real_scr_threads")
    out = _calibrated_by_cli(run_cli, tmp_path, "real_scr_threads")
    shown = run_cli("study", f"{grid}/trace", "--system", str(out), "--nodes", "2,8")
    assert shown.returncode == 0, shown.stderr
    assert "Traceback" not in shown.stderr
    headers = [line for line in shown.stdout.splitlines() if line.startswith("configuration ")]
    assert len(headers) == 2  # a table for each node count
    assert max(len(line) for line in shown.stdout.splitlines()) <= 100
    # a rate the runs did not determine is said to be held, not measured, where study uses it
    # (it printed "run 1x slower (the profile's scr_rates)" for the slowdown at its bound);
    # one they determine is not
    said = " ".join(shown.stdout.split())
    assert re.search(r"cache writes [\d.]+ \S+/s \(not determined by the runs\)", said)
    assert re.search(r"a background flush slows a checkpoint \d+% a busy transfer thread "
                     r"\(not determined by the runs\)", said)
    slower = re.search(r"run ([\d.]+)x slower \(the profile's scr_rates(.{5})", said)
    assert slower and float(slower.group(1)) > 1 and slower.group(2) != "; not"
    flush = re.search(r"per node at 2 nodes: flush [\d.]+ \S+/s(.{5})", said)
    assert flush and flush.group(1) != " (not"  # the flush rate is determined
    # recommend's cache-or-bypass choice says so too
    chosen = run_cli("recommend", f"{grid}/trace", "--system", str(out), "--nodes", "2",
                     "--format", "json")
    assert chosen.returncode == 0, chosen.stderr
    cache = next(i for i in json.loads(chosen.stdout)["intents"]
                 if i["name"] == "cache_or_bypass")
    assert any("cache writes" in line and "not determined by the runs" in line
               for line in cache["evidence"])


@pytest.mark.parametrize("grid", ["real_scr_threads_again", "real_scr_threads_fresh",
                                  "real_scr_threads_fourth"])
def test_a_flush_beside_a_checkpoint_slows_it_whatever_its_threads_do(tmp_path, grid):
    """SINGLE with 1 MB buffers under a 2 ms call: its transfer threads wait on the file
    system about three quarters of the time, so a slowdown per busy thread hardly charges
    them; yet a checkpoint with a flush beside it blocked 0.45-0.60 s, and scrtune's
    recommendation (the same copy and buffer, a flush every 10th checkpoint, so none beside
    most checkpoints) 0.30-0.31 s. Without a slowdown for any flush alongside, the fit gave
    SCR's cache writes that cost, and with SINGLE held out, PARTNER's and XOR's runs put it
    in their encode instead: SINGLE came out 44-62% off, the recommendation 21-58% off (the
    fourth grid was measured after the change)."""
    runs = _grid_runs(grid)
    alone = _median_mean(runs["(b) scrtune recommend"])
    beside = _median_mean(runs["(c) cache SINGLE 1MB async/1 bound"])
    assert beside > 1.3 * alone  # measured, not modelled
    report = _held_out(tmp_path, grid)
    assert report["groups"]["copy SINGLE"]["median_error"] <= 0.3
    assert report["groups"]["flush async/10 bound"]["median_error"] <= 0.15


def test_the_thread_count_grid_measured_after_the_change_loses_only_bypass(tmp_path):
    """The same command a fourth time (2026-11-27, 12:06-12:53), measured after the model
    learned that a flush alongside slows a checkpoint whatever its threads do, so fitted to
    none of its runs: held out by copy type 8.0%, rank correlation 0.890 (the model before
    the change: 9.6%, 0.901); the constant better on bypass alone (the model before: bypass
    and 8 MiB buffers); SINGLE held out 16% (before: 44%), scrtune's recommendation 4%
    (before: 45%). The goal's 0.9 is missed here by 0.01. With the application's timed
    writes fitted too (nineteenth round): 7.4%, rank 0.883, SINGLE 8.7%, the recommendation
    7.0%."""
    report = _held_out(tmp_path, "real_scr_threads_fourth")
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.25
    assert whole["rank_correlation"] >= 0.85
    lost = {name for name, group in report["groups"].items()
            if group["median_error"] >= group["constant_error"]}
    assert lost == {"bypass"}, lost
    assert report["groups"]["copy SINGLE"]["median_error"] <= 0.12
    assert report["groups"]["flush async/10 bound"]["median_error"] <= 0.15


def test_the_trimmed_grid_measured_with_its_phases_after_the_change(tmp_path):
    """The trimmed-page-cache command (`--trim-cache-s 0.5 --dirty-mb 256`) again, 2026-11-27
    17:51-18:34, now with each checkpoint's phases, measured after calibrate learned to fit
    the application's writes, so fitted to none of it. Held out by copy type: 13%, rank 0.73
    (the model before the change 17%, 0.69; SINGLE 34% -> 28%); the runs agree with
    themselves to 0.91. The median meets the goal, the rank does not: with an asynchronous
    flush PARTNER's and XOR's second checkpoint spends 2.8-3.0 s in SCR_Complete_output
    (0.6 s at the first, 0.7-0.9 s at the later ones), the step of this machine's memory
    when the second dataset needs new pages (the tenth and eleventh rounds), which the
    model has nothing for, as on the trimmed grid before."""
    report = _held_out(tmp_path, "real_scr_threads_trim_phases")
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.15
    assert 0.7 <= whole["rank_correlation"] < 0.9
    assert report["groups"]["copy SINGLE"]["median_error"] <= 0.30
    # the step, in the runs' own phases: SCR_Complete_output of the second checkpoint against
    # the first, asynchronous PARTNER and XOR; synchronous ones evict the first dataset
    # before writing the second and have no step
    runs = _grid_runs("real_scr_threads_trim_phases")

    def complete_s(copy: str, flush: str, index: int) -> float:
        return statistics.median(run["phases_s"][index][2] for name, times in runs.items()
                                 if f"cache {copy} " in name and f" {flush}/" in name
                                 for run in times)

    for copy in ("PARTNER", "XOR"):
        assert complete_s(copy, "async", 1) > 3 * complete_s(copy, "async", 0)
        assert complete_s(copy, "sync", 1) < 1.2 * complete_s(copy, "sync", 0)


def _transferred(tmp_path, calibration: str, grid: str) -> dict:
    """model_holdout --calibrated-on: rates fitted to every run of one stored grid, the runs
    of another predicted with them (each a stored grid's name, or a grid file's path)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

    def path(name: str) -> str:
        return name if name.endswith(".json") else os.path.join(RESULTS_DIR, f"{name}.json")

    out = tmp_path / f"{Path(path(calibration)).stem}-{Path(path(grid)).name}"
    done = subprocess.run([sys.executable, os.path.join(root, "benchmarks", "model_holdout.py"),
                           "--calibrated-on", path(calibration), "--runs", path(grid),
                           "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rank correlation" in done.stdout
    return json.loads(out.read_text())


def test_rates_calibrated_on_one_job_hold_for_its_next_measurement_and_scale_another(tmp_path):
    """`calibrate` writes SCR's rates into the system profile, which then serves every job.
    Fitted to every run of the fourth thread-count grid, they predict the third measurement
    of that job (another hour, fitted to none of it) within the goals: 6%, rank 0.94. Another
    job on the same machine (a quarter of the bytes, 0.6 s of compute, every flush outlasting
    it) they predict 23% off against the profile alone's 53%, but rank it 0.66, below the
    profile alone's 0.70: calibrate with the job that is to be tuned (README)."""
    same = _transferred(tmp_path, "real_scr_threads_fourth", "real_scr_threads_again")
    assert same["cached_runs"] == 46
    assert same["calibrated"]["median_error"] <= 0.25
    assert same["calibrated"]["rank_correlation"] >= 0.9
    assert same["calibrated"]["median_error"] < same["constant_error"]
    other = _transferred(tmp_path, "real_scr_threads_fourth", "real_scr_threads_small")
    assert other["calibrated"]["median_error"] <= 0.25
    assert other["calibrated"]["median_error"] < other["profile_alone"]["median_error"] / 2
    assert other["calibrated"]["rank_correlation"] < 0.8
    # the quarter-scale job measured again a day later (8 of its configurations and
    # scrtune's): its own grid's rates predict it 10% off, rank 1.00
    small = _transferred(tmp_path, "real_scr_threads_small", "real_scr_small_phases")
    assert small["calibrated"]["median_error"] <= 0.25
    assert small["calibrated"]["rank_correlation"] >= 0.9


def test_a_grid_too_small_to_fit_is_predicted_with_another_grids_rates(tmp_path):
    """`model_holdout.py --calibrated-on A --runs B` fits nothing to B, yet refused B when it
    held fewer configurations than a fit needs ("fitting 9 rates needs runs of at least 10
    configurations, got 6"). The slow file system grid of 2026-11-25 (the same job: 5
    checkpoints, 1.5 s of compute, 2 ms a write call; SINGLE with 1-128 MiB buffers and
    scrtune's recommendation) is too small to hold anything out: predicted with the fourth
    thread-count grid's rates, measured two days later, its 5 cached runs come out 13% off
    (the profile alone 25%, a constant 38%)."""
    small = _transferred(tmp_path, "real_scr_threads_fourth", "real_scr_slowpfs")
    assert small["cached_runs"] == 5
    assert small["calibrated"]["median_error"] <= 0.25
    assert small["calibrated"]["median_error"] < small["profile_alone"]["median_error"]
    assert small["calibrated"]["median_error"] < small["constant_error"]


def test_the_thread_count_grid_on_a_new_machine_of_the_kind_fitted_to_none_of_it(tmp_path):
    """The thread-count command a fifth time (2026-11-27 21:35-22:16), on a new machine of the
    project's kind (its own profile: 1.21 GB/s of fresh memory), the model unchanged since
    the nineteenth round. Held out by copy type: 11%, rank 0.85 (the runs agree with
    themselves to 0.90). The weak spot is SCR's per-checkpoint overhead against the slowdown
    beside a flush, which the blocking times do not tell apart here: scrtune's
    recommendation, the one configuration that starts no flush in 5 checkpoints, held out is
    predicted 41% high (the fit puts the overhead at 0.17 s and the slowdown near 0, where
    the fourth grid's gave 0.05 s and +90%). Measured, the recommendation still ran the job
    fastest: 10.50 s against the grid's best 10.80 s and SCR's defaults 15.61 s (-33%)."""
    report = _held_out(tmp_path, "real_scr_threads_fifth")
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.15
    assert 0.8 <= whole["rank_correlation"] < 0.9
    # fitted to every run, the ranked ones included, the model's form ranks them 0.87: here
    # the rank goal is out of reach of any held-out fit, and the report says so (issue 48)
    assert whole["rank_correlation"] - 0.03 < whole["form_rank_correlation"] < 0.9
    assert report["groups"]["flush async/10 bound"]["median_error"] > 0.3
    assert report["groups"]["bypass"]["median_error"] < report["groups"]["bypass"][
        "constant_error"]
    _the_recommendation_wins("real_scr_threads_fifth")


def _bypass_held_out(grid: str, allowance_bytes: float) -> tuple[float, float]:
    """A grid's bypass runs predicted by rates fitted to its cached runs (as model_holdout
    holds bypass out), its profile's parallel file system given `allowance_bytes` per node:
    the median error of the two bypass configurations, and the constant's."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "benchmarks", "results", f"{grid}.json")) as handle:
        recorded = json.load(handle)
    profile = load_profile(os.path.join(root, recorded["profile"]))
    assert profile.parallel is not None
    profile = msgspec.structs.replace(profile, parallel=msgspec.structs.replace(
        profile.parallel, dirty_allowance_bytes=allowance_bytes))
    load, costs, metadata_s = read_workload([os.path.join(root, recorded["trace"])], profile,
                                            "validate")
    runs = timed_runs.load_runs(os.path.join(root, "benchmarks", "results", f"{grid}.json"))
    rows = timed_runs.measured(runs, profile)
    predictors = fitting.predictors(load, profile, costs, runs.nodes, runs.ranks_per_node,
                                    metadata_s)
    cached = [row for row in rows if not row.config.bypass]
    rates = fitting.fit_rates(cached, predictors, runs.nodes, profile=profile)
    constant = statistics.median(row.blocking_s for row in cached)
    bypass = [row for row in rows if row.config.bypass]
    assert len(bypass) == 2
    return (statistics.median(abs(predictors.blocking_s(rates, row) / row.blocking_s - 1)
                              for row in bypass),
            statistics.median(abs(constant / row.blocking_s - 1) for row in bypass))


@pytest.mark.parametrize("grid, before, after", [("real_scr_dirty_call", 0.4, 0.1),
                                                 ("real_scr_threads_trim_phases", 0.15, 0.15)])
def test_bypass_writes_beyond_the_kernels_dirty_allowance_go_at_the_file_systems_rate(
        grid, before, after):
    """SCR never syncs a bypass checkpoint's writes: they wait in the page cache until the
    kernel's dirty background threshold, then go at the file system's rate (issue 48: under
    an unbounded kernel the 4th and 5th checkpoints of 400 MB a node took 2.1 s where the
    first three took 0.7 s; under --dirty-mb 256 every checkpoint took 1.1-1.5 s). These
    grids bounded the kernel's dirty pages to 256 MB (64 MB background, shared by the two
    nodes one machine poses as). Held out, with the allowance the bypass runs are predicted
    within `after` and better than the constant; without it, more than `before` off."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "benchmarks", "results", f"{grid}.json")) as handle:
        assert json.load(handle)["dirty_mb"] == 256
    unknown, _ = _bypass_held_out(grid, 0.0)
    known, constant = _bypass_held_out(grid, (64 << 20) / 2)
    assert unknown > before
    assert known < after and known < constant


def test_the_thread_count_grid_a_sixth_time_with_the_kernels_dirty_allowance_measured(tmp_path):
    """The thread-count command again (2026-11-28 00:02-00:46), its profile now with the
    kernel's dirty allowance as `scrtune profile` read it (2.44 GB, 1.22 GB for each of the two
    nodes this machine poses as), the kernel left as it was, fitted to none of it. Bypass's
    4th and 5th checkpoints went at the file system's rate, as the allowance says. Held out
    by copy type: 9.3%, rank 0.895 (the runs against themselves 0.93); bypass held out 7%
    against the constant's 12% (17% without the allowance). (b) ran the job fastest: 10.16 s
    against the grid's best 11.00 s and SCR's defaults 15.17 s (-33%)."""
    grid = "real_scr_threads_sixth"
    report = _near_the_goal(tmp_path, grid)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    profile = load_profile(os.path.join(root, "benchmarks", "results", grid, "sys.toml"))
    assert profile.parallel is not None
    allowance = profile.parallel.dirty_allowance_bytes
    assert 0.5e9 < allowance < 2e9  # a node's share of 10% of the machine's free memory
    unknown, _ = _bypass_held_out(grid, 0.0)
    known, constant = _bypass_held_out(grid, allowance)
    assert known < constant < unknown
    assert report["groups"]["bypass"]["median_error"] == pytest.approx(known, rel=0.05)
    _bypass_spills_and_the_recommendation_wins(grid)


def test_the_thread_count_grid_a_seventh_time_fitted_to_none_of_it(tmp_path):
    """The thread-count command a seventh time (2026-11-28 03:03-03:49, the machine quiet),
    the model unchanged since the twenty-first round: the measurement that decided against
    charging SCR's work completing each flush (HISTORY.md, twenty-second round: with it
    11.1%, rank 0.866). Held out by copy type: 9.5%, rank 0.886 (the runs against themselves
    0.96); every group but PARTNER (9.4% against the constant's 6.1%) beats the constant,
    bypass too (12.7% against 14.1%); bypass's 4th and 5th checkpoints went at the file
    system's rate, past the profile's allowance (1.23 GB a node). scrtune's recommendation
    ran the job in 10.27 s, the grid's best 11.56 s and SCR's defaults 16.01 s (-36%)."""
    grid = "real_scr_threads_seventh"
    assert _groups_lost(_near_the_goal(tmp_path, grid)) <= {"copy PARTNER"}
    _bypass_spills_and_the_recommendation_wins(grid)


def test_the_thread_count_grid_an_eighth_time_meets_the_goal_fitted_to_none_of_it(tmp_path):
    """The thread-count command an eighth time (2026-11-28 05:48-06:35, the machine quiet),
    the model unchanged since the twenty-first round: the first thread-count grid on which
    the held-out model meets all three of issue 48's goals. Held out by copy type: 8.4%, rank
    0.921 (the runs against themselves 0.91), every group better than the constant, bypass
    2% against 15%, PARTNER 5% against 8%. It also decided against leaning the interference
    on 0.35 (HISTORY.md, twenty-third round: 6.7%, but rank 0.914). scrtune's recommendation
    ran the job in 10.65 s, the grid's best 11.40 s and SCR's defaults 16.35 s (-35%)."""
    grid = "real_scr_threads_eighth"
    _meets_every_goal(tmp_path, grid)
    _bypass_spills_and_the_recommendation_wins(grid)


def test_the_thread_count_grid_a_ninth_time_on_a_new_machine_meets_the_goal(tmp_path):
    """The thread-count command a ninth time (2026-11-28 17:45-18:23, the machine quiet), on
    a new machine of the kind, the timed model unchanged since the twenty-first round. Held
    out by copy type: 9.4%, rank 0.936 (the runs against themselves 0.94; the model's form,
    fitted to every run, 0.93), every group better than the constant (PARTNER 5% against 6%,
    bypass 15% against 24%, 8 MiB buffers 13% against 15%). Its jobs ran faster than the
    eighth grid's machine (SCR's defaults 13.23 s against 16.35 s), and the eighth grid's
    rates predict it 66% off: rates are the machine's. scrtune's recommendation ran the job
    in 9.54 s, the grid's best 10.06 s and SCR's defaults 13.23 s (-28%)."""
    grid = "real_scr_threads_ninth"
    _meets_every_goal(tmp_path, grid)
    _the_recommendation_wins(grid)


def test_the_thread_count_grid_a_tenth_time_on_the_ninths_machine(tmp_path):
    """The thread-count command a tenth time (2026-11-28 19:42-20:20, the machine quiet), on
    the machine that measured the ninth, the timed model unchanged. Held out by copy type:
    8.0%, but rank 0.8996, under the goal's 0.9 (the runs against themselves 0.94), and the
    64 MiB buffers lose to the constant (19.7% against 15.3%: every one over-predicted, by
    as much when fitted to every run, SINGLE's synchronous flush 1.20 s against 0.985 s
    measured): the goals held on the ninth and not on its repetition. What does hold on one
    machine is its calibration: the ninth grid's rates predict the tenth 8.1% off (a
    constant 16.3%, the profile alone 61%) and the tenth's the ninth 6%, where the eighth
    grid's, from another machine, were 66% off the ninth. scrtune's recommendation ran the
    job in 9.37 s, the grid's best 10.03 s and SCR's defaults 13.01 s (-28%)."""
    grid = "real_scr_threads_tenth"
    assert _groups_lost(_near_the_goal(tmp_path, grid)) <= {"buffer 64 MiB"}
    same_machine = _transferred(tmp_path, "real_scr_threads_ninth", grid)
    assert same_machine["calibrated"]["median_error"] < 0.15
    assert same_machine["calibrated"]["median_error"] < 0.75 * same_machine["constant_error"]
    other_machine = _transferred(tmp_path, "real_scr_threads_eighth", "real_scr_threads_ninth")
    assert other_machine["calibrated"]["median_error"] > 3 * same_machine["calibrated"][
        "median_error"]
    _the_recommendation_wins(grid)


def test_the_thread_count_grid_an_eleventh_time_the_third_on_one_machine(tmp_path):
    """The thread-count command an eleventh time (2026-11-28 23:39-00:17), the third on the
    machine of the ninth and tenth, the timed model unchanged. Held out by copy type it is
    further from the goals than either: 14.4%, rank 0.81 (the runs against themselves 0.92),
    and a constant better on 4 threads, 64 MiB buffers and, by half a point, PARTNER. Of the
    three measurements on one machine one meets the goals. What holds on all three is the
    calibration: fitted to every run of the ninth or the tenth grid, the model predicts the
    eleventh 7% off (a constant 24-27%, the profile alone 60%), and the eleventh's rates the
    tenth 9% (a constant 17%). scrtune's recommendation ran the job in 9.70 s, the grid's
    best 10.07 s and SCR's defaults 13.10 s (-26%)."""
    grid = "real_scr_threads_eleventh"
    report = _thread_grid_held_out(tmp_path, grid)
    assert 0.75 <= report["all_held_out"]["rank_correlation"] < 0.9
    assert _groups_lost(report) <= {"4 transfer threads", "buffer 64 MiB", "copy PARTNER"}
    for calibration in ("real_scr_threads_ninth", "real_scr_threads_tenth"):
        predicted = _transferred(tmp_path, calibration, grid)
        assert predicted["calibrated"]["median_error"] < 0.1
        assert predicted["calibrated"]["median_error"] < 0.5 * predicted["constant_error"]
    _the_recommendation_wins(grid)


def test_the_thread_count_grid_a_twelfth_time_with_six_runs_a_configuration(tmp_path):
    """The thread-count command a twelfth time (2026-11-29 04:31-05:51, a new machine of the
    kind, quiet), with six runs of every configuration instead of three, the timed model
    unchanged: were the grids that miss the rank goal held back by the runs' own noise?
    No. Held out by copy type 9.9%, rank 0.87 (the runs against themselves 0.92); fitted to
    every run, the model's form ranks them 0.86, so more runs do not lift it to the goal's
    0.9: its form does not rank this grid. A constant is better on 4 threads (7.7% against
    7.1%) and 8 MiB buffers (17.2% against 16.2%). (Since the thirty-second round's busy
    share: 11.0%, rank 0.86, form 0.86, the same groups lost.) Either half of the runs
    alone: 13% and 0.84, 9% and 0.87; the rates fitted to every run of the first half
    predict the second 12% off (a constant 20%, the profile alone 68%). scrtune's
    recommendation ran the job in 9.83 s, the grid's best 10.62 s and SCR's defaults 14.37 s
    (-32%)."""
    grid = "real_scr_threads_twelfth"
    assert {len(times) for times in _grid_runs(grid).values()} == {6}
    report = _thread_grid_held_out(tmp_path, grid)
    whole = report["all_held_out"]
    assert 0.8 <= whole["rank_correlation"] < 0.9
    assert whole["form_rank_correlation"] < 0.9 <= whole["repeatability"]
    # yet against half of the runs it ranks them as well as the other half does (0.85 and
    # 0.85, split 20 ways): the configurations lie closer together than the runs' noise
    against = whole["against_halves"]
    assert against["splits"] == 20
    assert against["model_rank"] >= against["repeat_rank"] - 0.02
    assert _groups_lost(report) <= {"4 transfer threads", "buffer 8 MiB"}
    with open(os.path.join(RESULTS_DIR, f"{grid}.json")) as handle:
        recorded = json.load(handle)
    halves = []
    for name, part in (("first", slice(0, 3)), ("second", slice(3, 6))):
        # each copy keeps the grid's profile and trace, named from the repository's root
        half = {**recorded, "runs": {config: times[part]
                                     for config, times in recorded["runs"].items()}}
        halves.append(tmp_path / f"{grid}-{name}.json")
        halves[-1].write_text(json.dumps(half))
    predicted = _transferred(tmp_path, str(halves[0]), str(halves[1]))
    calibrated = predicted["calibrated"]["median_error"]
    assert calibrated < 0.75 * predicted["constant_error"]
    assert calibrated < 0.25 * predicted["profile_alone"]["median_error"]
    _the_recommendation_wins(grid)


def test_the_quarter_scale_grid_measured_again_meets_the_goals(tmp_path):
    """The quarter-scale command again (2026-11-29 08:40-08:59, the twelfth grid's machine,
    quiet), after the thirty-second round's busy share, fitted to none of it. Its profile
    timed /dev/shm's writes at 2.1 GB/s (the first measurement's 262 MB/s). Held out by copy
    type 8.7%, rank 0.95, every group better than the constant: the first time this job
    meets all three goals. Against half of the runs the model ranks the rest 0.92, a repeat
    0.86. The busy share as it was gave 9.5%, 0.95 here: the change mattered where the
    profile's write rate was off. Across jobs on one machine, the full-scale twelfth grid's
    rates predict this job 9% off (rank 0.83; the profile alone 62%). scrtune's
    recommendation ran it in 4.38 s, the grid's best 4.83 s, SCR's defaults 8.95 s (-51%)."""
    grid = "real_scr_threads_small_again"
    _meets_every_goal(tmp_path, grid)
    predicted = _transferred(tmp_path, "real_scr_threads_twelfth", grid)
    assert predicted["calibrated"]["median_error"] < 0.15
    assert predicted["calibrated"]["median_error"] \
        < 0.25 * predicted["profile_alone"]["median_error"]
    _the_recommendation_wins(grid)


def test_the_quarter_scale_grid_a_third_time_meets_the_goals_again(tmp_path):
    """The quarter-scale command a third time (2026-11-29 11:23-11:40, the same machine,
    quiet), the model unchanged since the second, fitted to none of it: held out by copy type
    8.3%, rank 0.94, every group better than the constant, so the goals held on a repetition
    (the full-scale grids' did not, the tenth's after the ninth). Against half of the runs
    the model ranks the rest 0.95, a repeat 0.91. The second measurement's rates predict this
    one 5% off (rank 0.94; the profile alone 72%, a constant 26%), the full-scale
    thirteenth's 19%. scrtune's recommendation 4.34 s a job, the grid's best 4.65 s, SCR's
    defaults 8.39 s (-48%)."""
    grid = "real_scr_threads_small_third"
    _meets_every_goal(tmp_path, grid)
    predicted = _transferred(tmp_path, "real_scr_threads_small_again", grid)
    assert predicted["calibrated"]["median_error"] < 0.1
    assert predicted["calibrated"]["rank_correlation"] >= 0.9
    assert predicted["calibrated"]["median_error"] \
        < 0.25 * predicted["constant_error"]
    _the_recommendation_wins(grid)


def test_the_thread_count_grid_a_thirteenth_time_after_the_busy_share_change(tmp_path):
    """The full-scale thread-count command a thirteenth time (2026-11-29 09:23-10:00, the
    twelfth grid's machine, quiet), after the thirty-second round's busy share, fitted to
    none of it. Held out by copy type 11.5%, rank 0.86 (the busy share as it was: 10.1%,
    0.86); only bypass lost to the constant (32% against 24%). Against half of the runs the
    model ranks the rest 0.87, a repeat 0.89: on this job the change bought nothing, and the
    rank goal stays missed by about what the runs' noise allows. scrtune's recommendation ran
    the job in 9.51 s, the grid's best 10.21 s, SCR's defaults 13.50 s (-30%)."""
    grid = "real_scr_threads_thirteenth"
    report = _thread_grid_held_out(tmp_path, grid)
    whole = report["all_held_out"]
    assert 0.8 <= whole["rank_correlation"] < 0.9
    assert whole["against_halves"]["model_rank"] >= whole["against_halves"]["repeat_rank"] - 0.03
    assert _groups_lost(report) <= {"bypass"}
    _the_recommendation_wins(grid)


def _thread_grid_held_out(tmp_path, grid: str) -> dict:
    """A thread-count grid's 46 cached runs held out by copy type, within a median error of
    15% (issue 48's goal: 25%)."""
    report = _held_out(tmp_path, grid)
    whole = report["all_held_out"]
    assert whole["runs"] == 46 and whole["median_error"] <= 0.15
    return report


def _near_the_goal(tmp_path, grid: str) -> dict:
    """Near issue 48's goals without meeting them all: a rank correlation from 0.85 to 0.95."""
    report = _thread_grid_held_out(tmp_path, grid)
    assert 0.85 <= report["all_held_out"]["rank_correlation"] < 0.95
    return report


def _meets_every_goal(tmp_path, grid: str) -> None:
    """Issue 48's goals: a rank correlation of 0.9 or more, and every group better than a
    constant guess; and against half of the runs the model ranks the rest at least as well
    as the other half does (a repeat of the measurement)."""
    report = _thread_grid_held_out(tmp_path, grid)
    whole = report["all_held_out"]
    assert whole["rank_correlation"] >= 0.9
    assert not _groups_lost(report)
    assert whole["against_halves"]["model_rank"] >= whole["against_halves"]["repeat_rank"]


def test_a_flush_that_outlasts_the_compute_of_a_fast_cadence_is_still_asynchronous(run_cli,
                                                                                 tmp_path):
    """A job that checkpoints after 0.3 s of compute, under a 2 ms call: its flush outlasts
    the compute. The core-affinity intent let it hide behind one gap and chose a synchronous
    flush (SINGLE, 31 MB, every 10th); SCR lets it run until the checkpoint two later must
    evict its dataset, and the intent now steps SCR's flushes as the study's model does.
    Measured on the real SCR, the two side by side (real_scr_evict_ab.json, 14 checkpoints,
    3 runs each): asynchronous, every 10th, blocks less. The model fitted to none of it (the
    eighth grid's rates) predicts the runs; recommend chooses the asynchronous flush for the
    first such job on its own profile, and for the second once calibrated (its own profile
    timed the flush at 2.2 s, 3.6 s beside the ranks; SCR took about 2 s beside them)."""
    grid = "real_scr_evict_ab"
    runs = _grid_runs(grid)
    asynchronous = _median_mean(runs["(c) cache SINGLE 1MB async/10 bound"])
    synchronous = _median_mean(runs["(c) cache SINGLE 31MB sync/10"])
    assert asynchronous < 0.95 * synchronous  # measured: 0.43 s a checkpoint against 0.48 s
    assert _median_mean(runs["(b) scrtune recommend"]) < 0.95 * synchronous
    predicted = _transferred(tmp_path, "real_scr_threads_eighth", grid)
    assert predicted["calibrated"]["median_error"] < 0.1

    def chosen(name: str, system: str) -> dict:
        done = run_cli("recommend", os.path.join(RESULTS_DIR, name, "trace"), "--system",
                       system, "--nodes", "2", "--job-interval-s", "trace", "--format", "json")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)["scr"]

    first = chosen("real_scr_evict", os.path.join(RESULTS_DIR, "real_scr_evict", "sys.toml"))
    calibrated = tmp_path / "calibrated.toml"
    done = run_cli("calibrate", os.path.join(RESULTS_DIR, grid, "trace"), "--runs",
                   os.path.join(RESULTS_DIR, "real_scr_threads_eighth.json"), "--system",
                   os.path.join(RESULTS_DIR, grid, "sys.toml"), "-o", str(calibrated))
    assert done.returncode == 0, done.stderr
    for scr in (first, chosen(grid, str(calibrated))):
        assert scr["SCR_FLUSH_ASYNC"] == "1" and scr["SCR_FILE_BUF_SIZE"] == "1MB", scr
        assert scr["SCR_COPY_TYPE"] == "SINGLE" and scr.get("SCR_FLUSH", "10") == "10", scr


def _groups_lost(report: dict) -> set[str]:
    """The groups a constant guess predicts better than the held-out model."""
    return {name for name, group in report["groups"].items()
            if "median_error" in group and group["median_error"] > group["constant_error"]}


def _bypass_spills_and_the_recommendation_wins(grid: str) -> None:
    """In a thread-count grid's own runs: of 403 MB a bypass checkpoint, the first and third
    went into the page cache, the 4th and 5th, past the 1.2 GB allowance, at the file
    system's rate; and the recommendation wins (below)."""
    runs = _grid_runs(grid)["(c) bypass"]
    writes = [statistics.median(run["phases_s"][index][1] for run in runs) for index in range(5)]
    assert min(writes[3:]) > 2 * max(writes[0], writes[2])
    _the_recommendation_wins(grid)


def _the_recommendation_wins(grid: str) -> None:
    """scrtune's recommendation ran the grid's job faster than every other configuration,
    and more than a quarter faster than SCR's defaults (median wall times)."""
    wall = {name: statistics.median(run["wall_s"] for run in times)
            for name, times in _grid_runs(grid).items()}
    tuned = wall.pop("(b) scrtune recommend")
    assert tuned < min(wall.values()) and tuned < 0.75 * wall["(a) SCR defaults"]
