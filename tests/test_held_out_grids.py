"""The thread-count grid measured again and again (the sixth time on; the quarter-scale job),
each held out by copy type against issue 48's goals: a median error within 25%, a rank
correlation of 0.9 or more, better than a constant guess on every group."""

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


def test_the_thread_count_grid_a_thirteenth_time_after_the_busy_share_change():
    """The full-scale thread-count command a thirteenth time (2026-11-29 09:23-10:00, the
    twelfth grid's machine, quiet), after the thirty-second round's busy share, fitted to
    none of it. Held out by copy type 11.5%, rank 0.86 (the busy share as it was: 10.1%,
    0.86); only bypass lost to the constant (32% against 24%). Against half of the runs the
    model ranks the rest 0.87, a repeat 0.89: on this job the change bought nothing, and the
    rank goal stays missed by about what the runs' noise allows. scrtune's recommendation ran
    the job in 9.51 s, the grid's best 10.21 s, SCR's defaults 13.50 s (-30%)."""
    grid = "real_scr_threads_thirteenth"
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert 0.8 <= whole["rank_correlation"] < 0.9
    assert whole["against_halves"]["model_rank"] >= whole["against_halves"]["repeat_rank"] - 0.03
    assert groups_lost(report) <= {"bypass"}
    the_recommendation_wins(grid)


def test_the_thread_count_grid_a_fourteenth_time_with_its_threads_busy_shares_measured():
    """The full-scale command a fourteenth time (2026-11-30 09:40-10:18, quiet), its profile
    measuring a transfer thread's busy share (0.16, 0.42 and 0.63 with 1, 8 and 64 MiB calls
    under the 2 ms call), so the fortieth round's dispatch is priced; fitted to none of it.
    Held out by copy type 8.3%, rank 0.899 (the model without the shares: 8.5%, 0.899); lost
    to the constant: 4 transfer threads, 64 MiB buffers and PARTNER (without the shares 8 MiB
    buffers too). Against the 14 other full-scale grids it ranks the configurations 0.94 (the
    grid's own runs 0.95), 5.5% off (without the shares 6.9%). scrtune's recommendation ran
    the job in 9.84 s, the grid's best 11.00 s, SCR's defaults 15.07 s (-35%). Since the
    flush maps afresh only the buffers of the files that carry the bytes (the forty-first
    round): 7.2%, rank 0.906, 4 transfer threads alone lost. Since a flush's bytes stream
    faster with more threads (the forty-second round): 6.0%, rank 0.916, every group better
    than the constant, and against half of the runs 0.930 (a repeat 0.908): every goal."""
    grid = "real_scr_threads_fourteenth"
    profile = load_profile(os.path.join(RESULTS_DIR, grid, "sys.toml"))
    shares = {share.buffer_bytes >> 20: share.busy_share
              for share in profile.transfer_thread_shares}
    assert sorted(shares) == [1, 8, 64] and shares[1] < shares[8] < shares[64]
    report = meets_every_goal(grid)
    assert report["all_held_out"]["median_error"] <= 0.08
    the_recommendation_wins(grid)


def test_the_thread_count_grid_a_fifteenth_time_meets_every_goal():
    """The full-scale command a fifteenth time (2026-11-30 12:23-13:00, quiet), its profile
    measuring the busy shares with the probe made repeatable (0.134, 0.544 and 0.946 with 1,
    8 and 64 MiB calls under the 2 ms call), fitted to none of it. With the flush mapping
    afresh only the buffers of the files that carry the bytes: held out by copy type 5.5%,
    rank 0.906, every group better than the constant (before that change 7.8%, 0.901, 64 MiB
    buffers lost); against half of each configuration's runs it ranks the rest 0.914, a
    repeat of the measurement 0.916. scrtune's recommendation ran the job in 9.93 s, the
    grid's best 10.89 s, SCR's defaults 15.01 s (-34%). Since a flush's bytes stream faster
    with more threads (the forty-second round): 5.9%, rank 0.914, every group; against half
    of the runs 0.9153, a repeat 0.9156."""
    meets_the_goals_with_its_own_busy_shares("real_scr_threads_fifteenth")


def test_the_thread_count_grid_a_sixteenth_time_meets_every_goal():
    """The full-scale command a sixteenth time (2026-11-30 15:17-15:55, quiet; busy shares
    0.142, 0.531 and 0.945), measured after the power of the threads a flush's bytes stream
    with was chosen on the 26 stored grids, and fitted to none of it. Held out by copy type
    5.4%, rank 0.918, every group better than the constant (the model before the change:
    5.9%, 0.893, every group: the rank short of the goal); against half of each
    configuration's runs it ranks the rest 0.924, a repeat 0.926; against the other 16
    full-scale grids 0.957 (its own runs 0.939), 5.0% off, 8 MiB buffers lost. scrtune's
    recommendation ran the job in 9.77 s, the grid's best 10.81 s (SINGLE, 1 MiB, 4 free
    threads), SCR's defaults 15.02 s (-35%)."""
    meets_the_goals_with_its_own_busy_shares("real_scr_threads_sixteenth")


def test_the_thread_count_grid_a_seventeenth_time_after_the_change_loses_8_mib_alone():
    """The full-scale command a seventeenth time (2026-11-30 16:47-17:25, quiet; busy shares
    0.139, 0.586 and 0.946), the first measured with the flush's thread power in the model
    (the sixteenth was measured before it, with the choice made), fitted to none of it. Held
    out by copy type 5.3%, rank 0.928, against half of the runs 0.936 (a repeat 0.920); the
    constant better on 8 MiB buffers alone (8.4% against 7.1%); the model before the change
    4.9%, 0.918, 1 transfer thread lost too. scrtune's recommendation ran the job in 9.79 s,
    the grid's best 10.72 s, SCR's defaults 15.19 s (-36%)."""
    meets_all_but_one_group("real_scr_threads_seventeenth", "buffer 8 MiB")


def test_the_thread_count_grid_an_eighteenth_time_falls_short_where_a_repeat_does():
    """The full-scale command an eighteenth time (2026-11-30 19:38-20:18, quiet; busy shares
    0.133, 0.531 and 0.942), the second measured with the flush's thread power in the model,
    fitted to none of it. Held out by copy type 8.3%, rank 0.892, 8 and 64 MiB buffers and
    XOR lost to the constant (XOR by a tie, 6.0% each); but a repeat of this measurement ranks
    its runs only 0.887, and the model against half of them ranks the rest 0.901. Before the
    change (power 0): 7.4%, 0.881, the same three lost. scrtune's recommendation ran the job
    in 9.84 s, the grid's best 10.84 s, SCR's defaults 14.93 s (-34%)."""
    grid = "real_scr_threads_eighteenth"
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.09 and whole["rank_correlation"] >= 0.88
    halves = whole["against_halves"]
    assert halves["repeat_rank"] < 0.9 <= halves["model_rank"]
    assert groups_lost(report) <= {"buffer 8 MiB", "buffer 64 MiB", "copy XOR"}
    the_recommendation_wins(grid)


def test_the_thread_count_grid_a_nineteenth_time_loses_64_mib_alone():
    """The full-scale command a nineteenth time (2026-11-30 22:12-22:50, quiet; busy shares
    0.145, 0.552 and 0.95), the third measured with the flush's thread power in the model and
    the first after the forty-fourth round (not adopted), fitted to none of it. Held out by
    copy type 5.5%, rank 0.935, against half of the runs 0.943 (a repeat 0.911); the constant
    better on 64 MiB buffers alone (8.6% against 7.1%). The stretched dispatch at power 0.3
    (HISTORY, forty-fourth round) would give 6.8%, 0.922, no group lost. scrtune's
    recommendation ran the job in 9.85 s, the grid's best 10.88 s (SINGLE 1 MiB, 4 free
    threads), SCR's defaults 15.17 s (-35%)."""
    meets_all_but_one_group("real_scr_threads_nineteenth", "buffer 64 MiB")


def test_the_thread_count_grid_a_twentieth_time_meets_every_goal():
    """The full-scale command a twentieth time (2026-12-01 04:58-05:44, quiet; busy shares
    0.229, 0.684 and 0.945), measured after the forty-sixth round chose its candidates (a
    freshly mapped buffer's threads at a reused buffer's share, SCR's dispatch work 0.10 or
    0.15 s) and fitted to none of it. Held out by copy type 5.8%, rank 0.905, every group
    better than the constant; against half of the runs 0.913, a repeat 0.877. The candidates
    lose one transfer thread here (12% and 14% against 11%), and the second the rank too
    (0.88): not adopted. scrtune's recommendation ran the job in 10.64 s, the grid's best
    11.45 s (SINGLE 8 MiB, bound threads), SCR's defaults 15.41 s (-31%)."""
    meets_the_goals_with_its_own_busy_shares("real_scr_threads_twentieth")


def test_the_thread_count_grid_a_twenty_first_time_wins_every_group_its_rank_at_its_noise():
    """The full-scale command a twenty-first time (2026-12-01 10:41-11:23, quiet; busy shares
    0.168, 0.597 and 0.969), the model unchanged since the twentieth, fitted to none of it.
    Held out by copy type 4.9%, every group better than the constant, but rank 0.843: its
    runs lie 5% from their configuration's median (2-3% on the grids before), and a model
    without error would rank runs as noisy 0.86 (0.83-0.90 over the noise's draws); against
    half of them the model ranks the rest 0.863, the other half 0.842. Against the four
    grids before it (12 runs of each configuration) the held-out predictions rank 0.94, this
    grid's own runs 0.84. scrtune's recommendation ran the job in 10.36 s, the grid's best
    11.06 s (SINGLE 8 MiB, free threads), SCR's defaults 14.75 s (-30%)."""
    whole = wins_every_group_its_rank_at_its_noise("real_scr_threads_twenty_first", 0.06)
    assert whole["without_error"]["high_rank"] <= 0.91  # no model reaches 0.9 but by luck
    halves = whole["against_halves"]
    assert halves["model_rank"] >= halves["repeat_rank"]


def test_the_thread_count_grid_a_twenty_second_time_wins_every_group_its_rank_at_its_noise():
    """The full-scale command a twenty-second time (2026-12-01 12:23-13:09, quiet; busy
    shares 0.196, 0.635 and 0.97), the model unchanged, fitted to none of it: 6.8%, every
    group better than the constant (bypass closest, 12.2% against 12.5%), rank 0.890 where a
    model without error would rank runs as noisy 0.91 (0.88-0.95; a run 6% from its
    configuration's median). scrtune's recommendation ran the job in 10.91 s, the grid's
    best 11.51 s, SCR's defaults 16.51 s (-34%)."""
    wins_every_group_its_rank_at_its_noise("real_scr_threads_twenty_second", 0.08)


def test_the_thread_count_grid_a_twenty_fourth_time_meets_every_goal():
    """The full-scale command a twenty-fourth time (2026-12-01 18:16-19:05, quiet; busy
    shares 0.214, 0.627 and 0.971), the model unchanged since the forty-ninth round kept its
    thread power, fitted to none of it: 10.6%, rank 0.914 (a model without error 0.93,
    0.90-0.96 on runs as noisy), every group better than the constant (bypass closest, 4.7%
    against 4.9%; one transfer thread 9.6% against 11.0%); against half of the runs 0.894, a
    repeat 0.901. A busy share raised for threads that share the rank's core (2s / (1 + s)),
    chosen before this grid was scored, loses one transfer thread here (13.0% against 11.0%):
    not adopted. scrtune's recommendation ran the job in 11.24 s, the grid's best 12.39 s
    (SINGLE 8 MiB, free threads), SCR's defaults 16.91 s (-34%)."""
    meets_every_goal_within_its_noise("real_scr_threads_twenty_fourth", repeat_slack=0.02)


def test_the_thread_count_grid_a_twenty_fifth_time_meets_every_goal():
    """The full-scale command a twenty-fifth time (2026-12-01 21:43-22:31, quiet; busy shares
    0.218, 0.668 and 0.972), measured after the fifty-first round left the model unchanged,
    fitted to none of it: 9.2%, rank 0.903 (a model without error 0.90, 0.86-0.93 on runs as
    noisy), every group better than the constant (bypass closest, 9.0% against 9.2%); against
    half of the runs 0.911 where a repeat ranks them 0.875; against the five grids before it
    (17 runs a configuration) 0.916, every group. scrtune's recommendation ran the job in
    11.49 s, the grid's best 11.93 s (SINGLE 8 MiB, free threads), SCR's defaults 17.06 s."""
    meets_every_goal_within_its_noise("real_scr_threads_twenty_fifth")


def test_the_thread_count_grid_a_twenty_sixth_time_meets_every_goal():
    """The full-scale command a twenty-sixth time (2026-12-02 03:36-04:26, quiet; busy shares
    0.214, 0.662 and 0.953), measured after the fifty-second round set aside a flush taken in
    rounds of files, fitted to none of it: 9.6%, rank 0.934 (a model without error 0.90,
    0.87-0.93 on runs as noisy), every group better than the constant (bypass closest, 7.6%
    against 8.3%), the third fresh full-scale grid running; against half of the runs 0.92
    where a repeat ranks them 0.87; against the five grids before it (17 runs a
    configuration) 0.90, every group. scrtune's recommendation ran the job in 11.30 s, the
    grid's best 12.25 s (SINGLE 8 MiB, free threads), SCR's defaults 17.13 s (-34%)."""
    meets_every_goal_within_its_noise("real_scr_threads_twenty_sixth")


def test_the_thread_count_grid_a_twenty_seventh_time_loses_four_threads_by_a_third_of_a_point():
    """The full-scale command a twenty-seventh time (2026-12-02 06:24-07:06, quiet; busy
    shares 0.201, 0.636 and 0.956), measured after the fifty-second round kept its second
    candidate for it, fitted to none of it: 8.1%, rank 0.890 where a model without error
    would rank runs as noisy 0.90 (0.86-0.93); against half of the runs 0.892, a repeat
    0.872; against the five grids before it 0.93. The constant better on 4 transfer threads
    alone, 7.5% against 7.8%: six of those nine configurations (PARTNER's and XOR's) lie
    within 5% of each other, and of the model's errors SINGLE's 1 MiB is the largest (-31%,
    the slowest SINGLE with 4 threads here where the eleven grids before had it the fastest
    or tied). The candidate (the overlap meets the flush's last round) gives 8.1%, 0.889
    and the same loss: not adopted. scrtune's recommendation ran the job in 10.26 s, the
    grid's best 11.37 s (SINGLE 8 MiB, bound threads), SCR's defaults 15.52 s (-34%)."""
    grid = "real_scr_threads_twenty_seventh"
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.09
    assert whole["without_error"]["low_rank"] <= whole["rank_correlation"]
    halves = whole["against_halves"]
    assert halves["model_rank"] >= halves["repeat_rank"]
    assert groups_lost(report) <= {"4 transfer threads"}
    four = report["groups"]["4 transfer threads"]
    assert four["median_error"] <= four["constant_error"] + 0.01
    the_recommendation_wins(grid)


def test_the_thread_count_grid_a_twenty_eighth_time_wins_every_group_its_rank_at_its_noise():
    """The full-scale command a twenty-eighth time (2026-12-02 07:18-08:01, quiet; busy
    shares 0.191, 0.607 and 0.955), the model unchanged, fitted to none of it: 5.6%, every
    group better than the constant (one transfer thread closest, 12.3% against 13.3%), rank
    0.886 where a model without error would rank runs as noisy 0.90 (0.87-0.92); against
    half of the runs 0.904, a repeat 0.878; against the five grids before it (17 runs a
    configuration) 0.96, every group. The fifty-third round's candidate again a tie (5.6%,
    0.886). scrtune's recommendation (asynchronous flushes every 10th checkpoint this time,
    where the twenty-seventh grid's profile had it flush synchronously) ran the job in
    10.76 s, the grid's best 11.68 s (SINGLE 8 MiB, 4 free threads), SCR's defaults 15.58 s
    (-31%)."""
    whole = wins_every_group_its_rank_at_its_noise("real_scr_threads_twenty_eighth", 0.07)
    halves = whole["against_halves"]
    assert halves["model_rank"] >= halves["repeat_rank"]


def meets_every_goal_within_its_noise(grid: str, repeat_slack: float = 0.0) -> None:
    """Every goal (`meets_every_goal`), held out within 12%, the rank no lower than a model
    without error's 10th percentile on runs as noisy; scrtune's recommendation fastest."""
    whole = meets_every_goal(grid, repeat_slack)["all_held_out"]
    assert whole["median_error"] <= 0.12
    assert whole["without_error"]["low_rank"] <= whole["rank_correlation"]
    the_recommendation_wins(grid)


def wins_every_group_its_rank_at_its_noise(grid: str, max_error: float) -> dict:
    """Held out within `max_error`, no group lost to the constant, the rank short of 0.9 but
    no lower than a model without error's 10th percentile on runs as noisy; scrtune's
    recommendation fastest. The report's figures over every cached run."""
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= max_error and not groups_lost(report)
    assert whole["without_error"]["low_rank"] <= whole["rank_correlation"] < 0.9
    the_recommendation_wins(grid)
    return whole


def meets_all_but_one_group(grid: str, group: str) -> None:
    """Held out within 8%, rank 0.9 or more, against half of the runs at least as a repeat
    ranks them, no group lost to the constant but `group`; scrtune's recommendation fastest."""
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.08 and whole["rank_correlation"] >= 0.9
    assert whole["against_halves"]["model_rank"] >= whole["against_halves"]["repeat_rank"]
    assert groups_lost(report) <= {group}
    the_recommendation_wins(grid)


def meets_the_goals_with_its_own_busy_shares(grid: str) -> None:
    """The grid's profile measured the busy shares (three, in the order of the buffers);
    held out within 8%, rank 0.9 or more, no group lost, against half of the runs within
    0.02 of a repeat; and scrtune's recommendation ran the job fastest."""
    profile = load_profile(os.path.join(RESULTS_DIR, grid, "sys.toml"))
    shares = [share.busy_share for share in profile.transfer_thread_shares]
    assert len(shares) == 3 and shares == sorted(shares)
    report = meets_every_goal(grid, repeat_slack=0.02)
    assert report["all_held_out"]["median_error"] <= 0.08
    the_recommendation_wins(grid)


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
