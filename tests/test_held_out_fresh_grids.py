"""The full-scale thread-count grid measured again and again since the busy shares were
measured (the thirteenth time on), each held out by copy type against issue 48's goals: a
median error within 25%, a rank correlation of 0.9 or more, better than a constant guess on
every group; and scrtune's recommendation against the grid's best and SCR's defaults."""

from __future__ import annotations

import os

from scrtune.intents.inputs import load_profile
from tests.grid_reports import (
    RESULTS_DIR,
    grid_runs,
    groups_lost,
    meets_every_goal,
    the_recommendation_wins,
    thread_grid_held_out,
)


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


def test_the_thread_count_grid_a_twenty_ninth_time_with_five_runs_ranks_under_its_noise():
    """The full-scale command a twenty-ninth time, five runs a configuration (2026-12-02
    09:41-10:49, quiet; busy shares 0.17, 0.646 and 0.957), the model unchanged, fitted to
    none of it: 7.6%, rank 0.842 where a model without error would rank runs as noisy 0.92
    (0.90-0.95): under it, as on the other five-run grid (the twenty-third, 0.870 against
    0.89-0.94); against half of the runs 0.844, a repeat 0.865. The constant better on
    PARTNER (5.1% against 7.2%) and XOR (9.1% against 9.8%). Against the five grids before
    it (15 runs a configuration) 0.95, one transfer thread lost. More runs a configuration
    raise the ceiling and leave the model where it was: the shortfall is its form's, within
    a copy type. scrtune's recommendation ran the job in 10.40 s, the grid's best 10.74 s
    (SINGLE 8 MiB, free threads), SCR's defaults 15.92 s (-35%)."""
    grid = "real_scr_threads_twenty_ninth"
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.09
    assert whole["rank_correlation"] < whole["without_error"]["low_rank"]
    assert whole["rank_correlation"] >= 0.8
    assert groups_lost(report) <= {"copy PARTNER", "copy XOR"}
    lost_by_at_most(report, 0.03)
    the_recommendation_wins(grid)


def test_the_thread_count_grid_a_thirtieth_time_loses_one_transfer_thread_at_its_noise():
    """The full-scale command a thirtieth time, three runs a configuration (2026-12-02
    14:21-15:01, the machine left alone; its own run order, seed in the JSON), the model
    unchanged, fitted to none of it: 6.4%, rank 0.899 (a model without error 0.90,
    0.86-0.92); the constant better on one transfer thread (11% against 13%). The
    fifty-fifth round's candidates, not adopted for losing the 42-grid sweep, scored on it
    after their choice: 7.4% and 6.9%, rank 0.899, no group lost. scrtune's recommendation
    ran the job in 10.04 s, the grid's best 11.04 s (SINGLE 8 MiB, free threads), SCR's
    defaults 15.11 s (-34%)."""
    grid = "real_scr_threads_thirtieth"
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.08
    assert whole["without_error"]["low_rank"] <= whole["rank_correlation"] < 0.9
    assert groups_lost(report) == {"1 transfer threads"}
    lost_by_at_most(report, 0.03)
    the_recommendation_wins(grid)


def test_the_thread_count_grid_a_thirty_first_time_loses_four_threads_and_64_mib():
    """The full-scale command a thirty-first time (2026-12-02 15:53-16:59 on a copy of
    24c666c), five runs a configuration asked; three kept. From 16:43 the host took the
    machine (vmstat: 11-15% steal) and the runs of passes 4 and 5 ran 24-179% over their
    configurations' medians: both dropped before anything was scored (the JSON says so in
    `dropped_passes`); passes 1-3 lie within 2% of each other on average. The model
    unchanged, fitted to none of it: 7.1%, rank 0.847 (a model without error 0.88,
    0.83-0.91); the constant better on 4 transfer threads (6.1% against 10.3%) and 64 MiB
    buffers (13.4% against 17.4%). Against the five grids before it (17 runs a configuration)
    0.92. The fifty-fifth round's candidate B, rejected by the sweeps: 6.0%, rank 0.904, 4
    threads lost. scrtune's recommendation ran the job in 10.14 s, the grid's best 11.30 s
    (SINGLE 1 MiB, four free threads), SCR's defaults 16.05 s (-37%)."""
    grid = "real_scr_threads_thirty_first"
    assert {len(runs) for runs in grid_runs(grid).values()} == {3}
    report = thread_grid_held_out(grid)
    whole = report["all_held_out"]
    assert whole["median_error"] <= 0.08
    assert whole["without_error"]["low_rank"] <= whole["rank_correlation"] < 0.9
    assert groups_lost(report) == {"4 transfer threads", "buffer 64 MiB"}
    lost_by_at_most(report, 0.05)
    the_recommendation_wins(grid)


def lost_by_at_most(report: dict, points: float) -> None:
    """Every group the constant guess matches or beats, it beats by no more than `points`."""
    for lost in groups_lost(report):
        group = report["groups"][lost]
        assert group["median_error"] <= group["constant_error"] + points, lost


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
