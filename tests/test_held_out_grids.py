"""The thread-count grid measured again and again (the sixth to twelfth time; the
quarter-scale job), each held out by copy type against issue 48's goals: a median error
within 25%, a rank correlation of 0.9 or more, better than a constant guess on every group.
The full-scale grid's later measurements: test_held_out_fresh_grids.py."""

from __future__ import annotations

import json
import os
import statistics

import pytest

from scrtune.intents.inputs import load_profile
from tests.grid_reports import (
    RESULTS_DIR,
    bypass_held_out,
    bypass_spills_and_the_recommendation_wins,
    grid_runs,
    groups_lost,
    held_out,
    held_out_with_shares,
    meets_every_goal,
    near_the_goal,
    the_recommendation_wins,
    thread_grid_held_out,
    transferred,
)


def test_the_thread_count_grid_a_sixth_time_with_the_kernels_dirty_allowance_measured():
    """The thread-count command again (2026-11-28 00:02-00:46), its profile now with the
    kernel's dirty allowance as `scrtune profile` read it (2.44 GB, 1.22 GB for each of the two
    nodes this machine poses as), the kernel left as it was, fitted to none of it. Bypass's
    4th and 5th checkpoints went at the file system's rate, as the allowance says. Held out
    by copy type: 9.3%, rank 0.895 (the runs against themselves 0.93); bypass held out 7%
    against the constant's 12% (17% without the allowance; 3% since the allowance is
    written at the pace of fresh memory). (b) ran the job fastest: 10.16 s
    against the grid's best 11.00 s and SCR's defaults 15.17 s (-33%)."""
    grid = "real_scr_threads_sixth"
    report = near_the_goal(grid)
    profile = load_profile(os.path.join(RESULTS_DIR, grid, "sys.toml"))
    assert profile.parallel is not None
    allowance = profile.parallel.dirty_allowance_bytes
    assert 0.5e9 < allowance < 2e9  # a node's share of 10% of the machine's free memory
    unknown = bypass_held_out(grid, 0.0).error
    held = bypass_held_out(grid, allowance)
    known, constant = held.error, held.constant_error
    assert known < constant < unknown
    assert report["groups"]["bypass"]["median_error"] == pytest.approx(known, rel=0.05)
    bypass_spills_and_the_recommendation_wins(grid)


def test_the_thread_count_grid_a_seventh_time_fitted_to_none_of_it():
    """The thread-count command a seventh time (2026-11-28 03:03-03:49, the machine quiet),
    the model unchanged since the twenty-first round: the measurement that decided against
    charging SCR's work completing each flush (HISTORY.md, twenty-second round: with it
    11.1%, rank 0.866). Held out by copy type: 9.5%, rank 0.886 (the runs against themselves
    0.96); every group but PARTNER (9.4% against the constant's 6.1%) beats the constant,
    bypass too (12.7% against 14.1%); bypass's 4th and 5th checkpoints went at the file
    system's rate, past the profile's allowance (1.23 GB a node). scrtune's recommendation
    ran the job in 10.27 s, the grid's best 11.56 s and SCR's defaults 16.01 s (-36%)."""
    grid = "real_scr_threads_seventh"
    assert groups_lost(near_the_goal(grid)) <= {"copy PARTNER"}
    bypass_spills_and_the_recommendation_wins(grid)


def test_the_thread_count_grid_an_eighth_time_meets_the_goal_fitted_to_none_of_it():
    """The thread-count command an eighth time (2026-11-28 05:48-06:35, the machine quiet),
    the model unchanged since the twenty-first round: the first thread-count grid on which
    the held-out model meets all three of issue 48's goals. Held out by copy type: 8.4%, rank
    0.921 (the runs against themselves 0.91), every group better than the constant, bypass
    2% against 15%, PARTNER 5% against 8%. It also decided against leaning the interference
    on 0.35 (HISTORY.md, twenty-third round: 6.7%, but rank 0.914). scrtune's recommendation
    ran the job in 10.65 s, the grid's best 11.40 s and SCR's defaults 16.35 s (-35%)."""
    grid = "real_scr_threads_eighth"
    meets_every_goal(grid)
    bypass_spills_and_the_recommendation_wins(grid)


def test_the_thread_count_grid_a_ninth_time_on_a_new_machine_meets_the_goal():
    """The thread-count command a ninth time (2026-11-28 17:45-18:23, the machine quiet), on
    a new machine of the kind, the timed model unchanged since the twenty-first round. Held
    out by copy type: 9.4%, rank 0.936 (the runs against themselves 0.94; the model's form,
    fitted to every run, 0.93), every group better than the constant (PARTNER 5% against 6%,
    bypass 15% against 24%, 8 MiB buffers 13% against 15%). Its jobs ran faster than the
    eighth grid's machine (SCR's defaults 13.23 s against 16.35 s), and the eighth grid's
    rates predict it 66% off: rates are the machine's. scrtune's recommendation ran the job
    in 9.54 s, the grid's best 10.06 s and SCR's defaults 13.23 s (-28%). Since the flush
    maps afresh only the buffers of the files that carry the bytes (the forty-first round,
    the kernel's page faults): 5.7%, rank 0.943, but 1 and 4 transfer threads lost to the
    constant (the double count had stood in for their flush lengths)."""
    grid = "real_scr_threads_ninth"
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.08 and whole["rank_correlation"] >= 0.9
    assert groups_lost(report) <= {"1 transfer threads", "4 transfer threads"}
    the_recommendation_wins(grid)


def test_the_thread_count_grid_a_tenth_time_on_the_ninths_machine():
    """The thread-count command a tenth time (2026-11-28 19:42-20:20, the machine quiet), on
    the machine that measured the ninth, the timed model unchanged. Held out by copy type:
    8.0%, but rank 0.8996, under the goal's 0.9 (the runs against themselves 0.94), and the
    64 MiB buffers lose to the constant (19.7% against 15.3%: every one over-predicted, by
    as much when fitted to every run, SINGLE's synchronous flush 1.20 s against 0.985 s
    measured): the goals held on the ninth and not on its repetition. What does hold on one
    machine is its calibration: the ninth grid's rates predict the tenth 8.1% off (a
    constant 16.3%, the profile alone 61%) and the tenth's the ninth 6%, where the eighth
    grid's, from another machine, were 66% off the ninth. scrtune's recommendation ran the
    job in 9.37 s, the grid's best 10.03 s and SCR's defaults 13.01 s (-28%). Since the flush
    maps afresh only the buffers of the files that carry the bytes (the forty-first round):
    6.1%, rank 0.906, the 64 MiB buffers better than the constant, 1 transfer thread not."""
    grid = "real_scr_threads_tenth"
    assert groups_lost(near_the_goal(grid)) <= {"1 transfer threads"}
    same_machine = transferred("real_scr_threads_ninth", grid)
    assert same_machine["calibrated"]["median_error"] < 0.15
    assert same_machine["calibrated"]["median_error"] < 0.75 * same_machine["constant_error"]
    other_machine = transferred("real_scr_threads_eighth", "real_scr_threads_ninth")
    assert other_machine["calibrated"]["median_error"] > 3 * same_machine["calibrated"][
        "median_error"]
    the_recommendation_wins(grid)


def test_the_thread_count_grid_an_eleventh_time_the_third_on_one_machine():
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
    report = thread_grid_held_out(grid)
    assert 0.75 <= report["all_held_out"]["rank_correlation"] < 0.9
    assert groups_lost(report) <= {"4 transfer threads", "buffer 64 MiB", "copy PARTNER"}
    for calibration in ("real_scr_threads_ninth", "real_scr_threads_tenth"):
        predicted = transferred(calibration, grid)
        assert predicted["calibrated"]["median_error"] < 0.1
        assert predicted["calibrated"]["median_error"] < 0.5 * predicted["constant_error"]
    the_recommendation_wins(grid)


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
    assert {len(times) for times in grid_runs(grid).values()} == {6}
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert 0.8 <= whole["rank_correlation"] < 0.9
    assert whole["form_rank_correlation"] < 0.9 <= whole["repeatability"]
    # yet against half of the runs it ranks them as well as the other half does (0.85 and
    # 0.85, split 20 ways): the configurations lie closer together than the runs' noise
    against = whole["against_halves"]
    assert against["splits"] == 20
    assert against["model_rank"] >= against["repeat_rank"] - 0.02
    assert groups_lost(report) <= {"4 transfer threads", "buffer 8 MiB"}
    with open(os.path.join(RESULTS_DIR, f"{grid}.json")) as handle:
        recorded = json.load(handle)
    halves = []
    for name, part in (("first", slice(0, 3)), ("second", slice(3, 6))):
        # each copy keeps the grid's profile and trace, named from the repository's root
        half = {**recorded, "runs": {config: times[part]
                                     for config, times in recorded["runs"].items()}}
        halves.append(tmp_path / f"{grid}-{name}.json")
        halves[-1].write_text(json.dumps(half))
    predicted = transferred(str(halves[0]), str(halves[1]))
    calibrated = predicted["calibrated"]["median_error"]
    assert calibrated < 0.75 * predicted["constant_error"]
    assert calibrated < 0.25 * predicted["profile_alone"]["median_error"]
    the_recommendation_wins(grid)


def test_the_quarter_scale_grid_measured_again_meets_the_goals():
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
    meets_every_goal(grid)
    predicted = transferred("real_scr_threads_twelfth", grid)
    assert predicted["calibrated"]["median_error"] < 0.15
    assert predicted["calibrated"]["median_error"] \
        < 0.25 * predicted["profile_alone"]["median_error"]
    the_recommendation_wins(grid)


def test_the_quarter_scale_grid_a_third_time_meets_the_goals_again():
    """The quarter-scale command a third time (2026-11-29 11:23-11:40, the same machine,
    quiet), the model unchanged since the second, fitted to none of it: held out by copy type
    8.3%, rank 0.94, every group better than the constant, so the goals held on a repetition
    (the full-scale grids' did not, the tenth's after the ninth). Against half of the runs
    the model ranks the rest 0.95, a repeat 0.91. The second measurement's rates predict this
    one 5% off (rank 0.94; the profile alone 72%, a constant 26%), the full-scale
    thirteenth's 19%. scrtune's recommendation 4.34 s a job, the grid's best 4.65 s, SCR's
    defaults 8.39 s (-48%)."""
    grid = "real_scr_threads_small_third"
    meets_every_goal(grid)
    predicted = transferred("real_scr_threads_small_again", grid)
    assert predicted["calibrated"]["median_error"] < 0.1
    assert predicted["calibrated"]["rank_correlation"] >= 0.9
    assert predicted["calibrated"]["median_error"] \
        < 0.25 * predicted["constant_error"]
    the_recommendation_wins(grid)


def test_the_quarter_scale_grid_a_fourth_time_meets_the_goals_a_third_time_running():
    """The quarter-scale command a fourth time (2026-11-29 14:43-15:01, the same machine,
    quiet), the model unchanged since the second, fitted to none of it: held out by copy type
    7.7%, rank 0.94, every group better than the constant, the third measurement of this job
    in a row to meet all three goals. Against half of the runs the model ranks the rest 0.94,
    a repeat 0.92. The third measurement's rates predict this one 7% off (rank 0.94; the
    profile alone 74%, a constant 17%), the full-scale thirteenth's 22%. scrtune's
    recommendation 4.30 s a job, the grid's best 4.81 s, SCR's defaults 8.58 s (-50%)."""
    grid = "real_scr_threads_small_fourth"
    meets_every_goal(grid)
    predicted = transferred("real_scr_threads_small_third", grid)
    assert predicted["calibrated"]["median_error"] < 0.1
    assert predicted["calibrated"]["rank_correlation"] >= 0.9
    assert predicted["calibrated"]["median_error"] < 0.5 * predicted["constant_error"]
    the_recommendation_wins(grid)


FULL_SCALE = ["real_scr_threads", "real_scr_threads_again", "real_scr_threads_fresh",
              *(f"real_scr_threads_{n}" for n in ("fourth", "fifth", "sixth", "seventh",
                                                  "eighth", "ninth", "tenth", "eleventh",
                                                  "twelfth", "thirteenth"))]


def test_within_a_class_the_model_resolves_the_quarter_scale_job_not_the_full_scale_one():
    """Against half of the runs, each copy type and flush kind's mean taken from the other
    half scores what a model right about every class and blind within one would. The
    held-out model ranks the quarter-scale job's runs well above it on each of its three
    latest measurements (0.92-0.95 against 0.85-0.86): there the configurations within a class
    differ by more than the runs' noise, and the model tells them apart. On the 13 full-scale
    thread-count grids it is about level with the class means (means 0.888 and 0.883): within
    a class those configurations lie closer together than its form resolves (issue 48)."""
    for grid in ("real_scr_threads_small_again", "real_scr_threads_small_third",
                 "real_scr_threads_small_fourth"):
        halves = held_out(grid)["all_held_out"]["against_halves"]
        assert halves["model_rank"] > halves["class_means_rank"] + 0.05, grid
    full = [held_out(grid)["all_held_out"]["against_halves"] for grid in FULL_SCALE]
    model = sum(halves["model_rank"] for halves in full) / len(full)
    classes = sum(halves["class_means_rank"] for halves in full) / len(full)
    assert abs(model - classes) < 0.02 and 0.85 < model < 0.9


def test_an_older_grid_given_a_measured_busy_share_is_predicted_closer():
    """The eleventh grid's profile (2026-11-28) predates the busy-share probe; given the
    fourteenth grid's (this machine's kind), held out by copy type it comes out 10.5% off,
    rank 0.86, PARTNER alone lost to the constant, where the model without them said 14.3%,
    0.82, three groups lost (4 transfer threads, 64 MiB buffers, PARTNER): the busy share
    the dispatch and the interference take, measured, prices the buffers the profile's
    computed one misordered. Since the flush maps afresh only the buffers of the files that
    carry the bytes (the forty-first round): given the shares 7.6%, 0.86, PARTNER lost;
    without them 12.8%, 0.82, 4 transfer threads lost (64 MiB buffers no longer, either way).
    Since a flush's bytes stream faster with more threads (the forty-second round): given
    the shares 10.1%, 0.856, PARTNER lost; without them 12.4%, 0.797, no group lost: the
    shares still bring the error and the rank closer, the groups no longer."""
    grid = "real_scr_threads_eleventh"
    given = held_out_with_shares(grid, "real_scr_threads_fourteenth")
    without = held_out(grid)
    assert given["all_held_out"]["median_error"] < without["all_held_out"]["median_error"]
    assert given["all_held_out"]["rank_correlation"] > without["all_held_out"][
        "rank_correlation"] + 0.03
    assert groups_lost(given) <= {"copy PARTNER"}


def test_four_transfer_threads_cost_singles_asynchronous_checkpoints_in_their_completion():
    """Eight interleaved runs of each of SINGLE's asynchronous free-thread configurations at
    full scale (benchmarks/results/real_scr_single_threads_precise.json, HISTORY thirty-fifth
    round): 4 transfer threads block more than 1 at every buffer, beyond the runs' spread at
    8 MiB. At 8 and 64 MiB the extra is in SCR_Complete_output, where the flush's threads
    start beside the ranks' last collectives (0.2 s a checkpoint); at 1 MiB, whose threads
    wait on their calls, not there."""
    with open(os.path.join(RESULTS_DIR, "real_scr_single_threads_precise.json")) as handle:
        runs = json.load(handle)["runs"]

    def of(buffer: str, threads: int) -> list[dict]:
        name = f"(c) cache SINGLE {buffer} async/1 free {threads} thread" + \
            ("s" if threads > 1 else "")
        assert len(runs[name]) == 8
        return runs[name]

    for buffer in ("1MB", "8MB", "64MB"):
        one, four = ([run["blocking_s"] for run in of(buffer, n)] for n in (1, 4))
        assert statistics.median(four) > statistics.median(one), buffer
        # SCR_Complete_output after the first checkpoint (its flush has none before it)
        completing = [statistics.median(statistics.median(run["phases_s"][i][2]
                                                          for run in of(buffer, n))
                                        for i in range(1, 5)) for n in (1, 4)]
        extra_s = completing[1] - completing[0]
        assert (extra_s > 0.1) if buffer != "1MB" else (extra_s < 0.05), (buffer, completing)
    one, four = ([run["blocking_s"] for run in of("8MB", n)] for n in (1, 4))
    assert statistics.quantiles(one, n=4)[2] < statistics.quantiles(four, n=4)[0]


def test_a_flush_costs_its_completion_at_any_gap_and_its_overlap_only_at_a_short_one():
    """The full-scale job at 0.4 s and 4 s of compute between checkpoints (HISTORY,
    forty-fifth round; 2026-12-01, quiet): with 4 s every flush is over (its bytes in the
    prefix) seconds before the next checkpoint, yet SCR_Complete_output of the checkpoints
    after the first still grows with the threads at 8 MiB (0.19, 0.32, 0.44 s with 1, 2 and 4)
    and not at 1 MiB: the cost is the threads just started, not an overlap. With 0.4 s four
    threads' flushes end in less than half of one thread's time and overlap less of the next
    checkpoint, yet block as much: what they save in overlap they cost a second."""
    def of(grid: str, buffer: str, threads: int) -> list[dict]:
        # AXL's own count is the machine's CPUs (2): that configuration says no count
        name = f"(c) cache SINGLE {buffer} async/1 free" + \
            {1: " 1 thread", 2: "", 4: " 4 threads"}[threads]
        return grid_runs(grid)[name]

    def completing_s(runs: list[dict]) -> float:  # after the first: it has no flush before it
        return statistics.median(statistics.median(run["phases_s"][i][2] for run in runs)
                                 for i in range(1, 5))

    def flush_ends_s(runs: list[dict]) -> list[float]:
        return [end for run in runs for end in run["flush_end_s"] if end is not None]

    long_gap = {(buffer, n): of("real_scr_gap_long", buffer, n)
                for buffer in ("1MB", "8MB") for n in (1, 2, 4)}
    assert max(end for runs in long_gap.values() for end in flush_ends_s(runs)) < 3.5  # < 4 s
    eight = [completing_s(long_gap["8MB", n]) for n in (1, 2, 4)]
    assert eight[0] + 0.08 < eight[1] and eight[1] + 0.08 < eight[2], eight
    one = [completing_s(long_gap["1MB", n]) for n in (1, 2, 4)]
    assert max(one) - min(one) < 0.06, one
    short_gap = {n: of("real_scr_gap_short", "8MB", n) for n in (1, 4)}
    ends = {n: statistics.median(flush_ends_s(runs)) for n, runs in short_gap.items()}
    assert ends[4] < 0.5 * ends[1] and ends[1] > 0.4  # one thread's flush outlasts the gap
    blocking = {n: statistics.median(run["blocking_s"] for run in runs)
                for n, runs in short_gap.items()}
    assert abs(blocking[4] / blocking[1] - 1) < 0.15, blocking


def test_one_gap_s_rates_carry_to_the_job_at_a_shorter_gap_and_rank_it_at_a_longer():
    """The nineteenth full-scale grid's rates (1.5 s of compute between checkpoints) predict
    the same job at 0.4 s 10% off, rank 0.94 (a constant 29%), and at 4 s at rank 0.98 but
    26% low (a constant 58%): fitted at one gap, the model charges to the flush's overlap
    with the next checkpoint part of what the flush costs whatever the gap (the test above),
    and this machine's page-cache writeback slows every flush from the second checkpoint of
    the 4 s job on (from the fourth at 0.4 and 1.5 s), which the model, counting bytes, puts
    later. HISTORY, forty-fifth round."""
    short = transferred("real_scr_threads_nineteenth", "real_scr_gap_short")
    assert short["calibrated"]["median_error"] <= 0.12
    assert short["calibrated"]["rank_correlation"] >= 0.9
    assert short["calibrated"]["median_error"] < 0.5 * short["constant_error"]
    longer = transferred("real_scr_threads_nineteenth", "real_scr_gap_long")
    assert longer["calibrated"]["rank_correlation"] >= 0.95
    assert longer["calibrated"]["median_error"] < 0.5 * longer["constant_error"]


ALLOWANCE_GRIDS = [f"real_scr_threads_{n}" for n in
                   ("sixth", "seventh", "eighth", "ninth", "tenth", "eleventh", "twelfth",
                    "thirteenth")]


def test_bypass_held_out_writes_within_the_dirty_allowance_at_the_pace_of_fresh_memory():
    """The eight full-scale grids whose profiles measured the kernel's dirty allowance, bypass
    held out (no cached run determines the application's unsynced pace, so the model takes it
    from the profile): within the allowance at the pace fresh memory was timed at, a median
    9% off over the grids, every one within 25% and better than a constant, where the file
    system's synced rate put it 14% off, the thirteenth 32% (worse than a constant, 24%).
    The runs' first checkpoints, all within the allowance, wrote 403 MB a node in
    0.1-0.25 s beyond their write calls."""
    memory, synced = {}, {}
    for grid in ALLOWANCE_GRIDS:
        profile = load_profile(os.path.join(RESULTS_DIR, grid, "sys.toml"))
        assert profile.parallel is not None and profile.fresh_memory_bytes_per_s > 0
        allowance = profile.parallel.dirty_allowance_bytes
        held = bypass_held_out(grid, allowance)
        memory[grid], constant, synced[grid] = (held.error, held.constant_error,
                                                held.synced_pace_error)
        if grid.endswith("thirteenth"):
            assert memory[grid] < constant < synced[grid]
    assert max(memory.values()) <= 0.25 < max(synced.values())
    assert statistics.median(memory.values()) < 0.8 * statistics.median(synced.values())
