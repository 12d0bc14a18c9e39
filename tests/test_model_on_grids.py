"""The study's model against what stored real-SCR grids measured: flush times as the runs
give them, transfer threads beside the ranks, the per-call cost, evictions, bypass writes and
the kernel's dirty allowance, and a flush that outlasts a fast cadence (issue 48)."""

from __future__ import annotations

import json
import math
import os
import random
import re
import statistics

import msgspec
import pytest

from scrtune.intents.inputs import ScrRates, load_profile
from scrtune.intents.overlap import MAX_STEPPED, timed_blocking_s
from scrtune.study import fit as fitting
from scrtune.study import runs as timed_runs
from tests.grid_reports import (
    RESULTS_DIR,
    RUNS,
    SYSTEM,
    TRUTH,
    benchmark_module,
    bypass_held_out,
    calibrated_by_cli,
    grid_runs,
    held_out,
    median_mean,
    threads_grid,
    transferred,
)


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
    grid = os.path.join(RESULTS_DIR, "real_scr_small_phases")
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
    grid = os.path.join(RESULTS_DIR, "real_scr_grid")
    out = tmp_path / "sys-scr.toml"
    done = run_cli("calibrate", f"{grid}/trace", "--runs", f"{grid}.json", "--system",
                   f"{grid}/sys.toml", "-o", str(out), "--format", "json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert "(flush times of 48)" in report["scr_rates"]["source"]
    assert report["scores"]["calibrated"]["rank_correlation"] > 0.85
    assert report["scores"]["calibrated flush times"]["median_error"] < 0.25


def test_busy_transfer_threads_slow_the_checkpoints_they_overlap():
    """On the real SCR under a 2 ms write call, SINGLE asynchronous checkpoints took 0.19-0.22
    s with 1 MB file buffers whatever the thread count, and 0.21, 0.31 and 0.36 s with 64 MB
    buffers and 1, 2 and 4 threads: a thread copying big buffers competes with the rank, one
    that mostly waits on the file system's calls does not. Fitted to every other copy type,
    the model ranks the SINGLE runs about as they were measured."""
    profile, rows, blocking_s, predict = threads_grid()
    others = [row for row in rows if row.config.copy_type != "SINGLE"]
    rates = fitting.fit_rates(others, predict, 2, profile=profile)
    single = [row for row in rows if row.config.copy_type == "SINGLE" and row.config.flush_async]
    assert len(single) == 12
    predicted = [blocking_s(rates, row) for row in single]
    # 0.78 (the runs against themselves: 0.96); without the threads' competition, -0.79;
    # 0.91 by the forty-first round, 0.65 since a flush's bytes stream faster with more
    # threads (HISTORY, forty-second round: one thread's longer flush overlaps more of the
    # next checkpoint, where on this grid one thread's runs blocked least)
    assert fitting.spearman([row.blocking_s for row in single], predicted) >= 0.6


def test_the_fit_finds_the_per_call_cost_the_grid_was_run_with():
    """real_scr_threads was run with every write call to the "parallel file system" made to
    wait 2 ms (benchmarks/slowpfs.c): a cost set by hand, so known. The model is piecewise (a
    flush hides behind the compute or it does not) and the fit has local minima: from one
    start it stayed at 1e-9 s a call on these runs (0.1 ms with a copy type held out, where
    1 MB synchronous flushes then came out 36% low)."""
    profile, rows, blocking_s, predict = threads_grid()
    found = fitting.fit_rates(rows, predict, 2, profile=profile)
    assert 1e-3 <= found.flush_call_s <= 4e-3
    # and said to be determined: its effect lies on a few runs, the 1 MB ones mostly, and
    # averaged over all 96 times it was diluted below the 5% that makes a rate determined
    assert "flush_call_s" not in found.undetermined


def test_with_the_1mb_runs_held_out_the_call_cost_leans_on_the_profiles_latency():
    """Only the runs with 1 MB file buffers show the 2 ms call strongly; fitted to the others
    the call went to the search's bound (1e-9 s) and the held-out 1 MB flushes came out far
    too fast. The profile measured the file system's call (2.1 ms): the fit leans on it."""
    profile, rows, blocking_s, predict = threads_grid()
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


def test_runs_of_one_buffer_size_leave_the_call_at_the_profiles_latency():
    """real_scr_dirty_call (2026-11-26: 1 and 64 MB buffers, 1, 2 and 4 transfer threads, a 2
    ms write call, the kernel's dirty cache bounded to 256 MB). Fitted to the 64 MB runs alone,
    whose flushes are shorter with more threads and have 6 calls a rank, the call went to 114
    ms (the profile measured 2.2 ms), was said to be determined, and the held-out 1 MB runs
    (384 calls) came out 12x too slow. The call leans on the profile's measure; the runs of
    one buffer size cannot tell it, and say so."""
    profile, rows, blocking_s, predict = threads_grid("real_scr_dirty_call")
    latency_s = profile.parallel.write_latency_s
    big = [row for row in rows if row.config.bypass or row.config.file_buf_bytes > 1 << 20]
    found = fitting.fit_rates(big, predict, 2, profile=profile)
    assert latency_s / 2 <= found.flush_call_s <= latency_s * 2
    assert "flush_call_s" in found.undetermined
    report = held_out("real_scr_dirty_call")
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
    profile, rows, blocking_s, predict = threads_grid()
    cached = [row for row in rows if not row.config.bypass]
    bypass = [row for row in rows if row.config.bypass]
    assert len(bypass) == 2  # bypass and SCR's defaults, which are bypass in v3.1.0
    rates = fitting.fit_rates(cached, predict, 2, profile=profile)
    constant = statistics.median(row.blocking_s for row in cached)
    for row in bypass:
        error = abs(blocking_s(rates, row) - row.blocking_s) / row.blocking_s
        assert error < 0.2 and error < abs(constant - row.blocking_s) / row.blocking_s, row.name


def test_study_reads_what_calibrate_wrote_for_the_threads_grid(run_cli, tmp_path):
    """The README's path: calibrate, then study with its output. On the threads grid every
    configuration's remark was empty and the table's free-text column 0 wide: a ValueError
    from textwrap, a traceback instead of the table."""
    grid = os.path.join(RESULTS_DIR, "real_scr_threads")
    out = calibrated_by_cli(run_cli, tmp_path, "real_scr_threads")
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
def test_a_flush_beside_a_checkpoint_slows_it_whatever_its_threads_do(grid):
    """SINGLE with 1 MB buffers under a 2 ms call: its transfer threads wait on the file
    system about three quarters of the time, so a slowdown per busy thread hardly charges
    them; yet a checkpoint with a flush beside it blocked 0.45-0.60 s, and scrtune's
    recommendation (the same copy and buffer, a flush every 10th checkpoint, so none beside
    most checkpoints) 0.30-0.31 s. Without a slowdown for any flush alongside, the fit gave
    SCR's cache writes that cost, and with SINGLE held out, PARTNER's and XOR's runs put it
    in their encode instead: SINGLE came out 44-62% off, the recommendation 21-58% off (the
    fourth grid was measured after the change)."""
    runs = grid_runs(grid)
    alone = median_mean(runs["(b) scrtune recommend"])
    beside = median_mean(runs["(c) cache SINGLE 1MB async/1 bound"])
    assert beside > 1.3 * alone  # measured, not modelled
    report = held_out(grid)
    assert report["groups"]["copy SINGLE"]["median_error"] <= 0.3
    assert report["groups"]["flush async/10 bound"]["median_error"] <= 0.15


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
    with open(os.path.join(RESULTS_DIR, f"{grid}.json")) as handle:
        assert json.load(handle)["dirty_mb"] == 256
    unknown = bypass_held_out(grid, 0.0).error
    held = bypass_held_out(grid, (64 << 20) / 2)
    known, constant = held.error, held.constant_error
    assert unknown > before
    assert known < after and known < constant


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
    runs = grid_runs(grid)
    asynchronous = median_mean(runs["(c) cache SINGLE 1MB async/10 bound"])
    synchronous = median_mean(runs["(c) cache SINGLE 31MB sync/10"])
    assert asynchronous < 0.95 * synchronous  # measured: 0.43 s a checkpoint against 0.48 s
    assert median_mean(runs["(b) scrtune recommend"]) < 0.95 * synchronous
    predicted = transferred("real_scr_threads_eighth", grid)
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


def test_one_threads_flush_takes_longer_than_four_as_the_real_flush_ends_did():
    """Ground truth from the flush-ends grid (each flush's real end, polled on the parallel
    file system): with 64 MiB buffers, whose few calls leave the threads' waits out of it,
    one transfer thread's first flush took 1.46-2.0x as long as four's (median of 3 runs,
    each copy type). Fitted to every run of the grid, the model's one-thread flush is longer
    than its four-thread one by more than the calls explain (1.12x: a flush's bytes stream
    faster with more threads copying, by their count to the power 0.1; before, 1.007x), and
    by less than was measured (that power fits the blocking times of the 26 stored grids;
    0.5-0.8 fits these flushes: HISTORY, forty-second round)."""
    holdout = benchmark_module("model_holdout")
    name = "real_scr_threads_ends"
    grid = holdout.read_grid(os.path.join(RESULTS_DIR, f"{name}.json"))
    rates = fitting.fit_rates(grid.rows, grid.predict, grid.runs.nodes, profile=grid.profile)
    runs = grid_runs(name)
    rows = {row.name: row for row in grid.rows}
    for copy_type in ("SINGLE", "PARTNER", "XOR"):
        one, four = (f"(c) cache {copy_type} 64MB async/1 free {count}"
                     for count in ("1 thread", "4 threads"))
        measured = (statistics.median(run["flush_end_s"][0] for run in runs[one])
                    / statistics.median(run["flush_end_s"][0] for run in runs[four]))
        predicted = grid.predict.flush_s(rates, rows[one]) / grid.predict.flush_s(rates,
                                                                                rows[four])
        assert 1.08 < predicted < measured, copy_type
