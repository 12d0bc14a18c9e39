"""Goodput: the primer's worked example, and each case where ml-goodput-measurement goes wrong
(goodput.md §1.11). Expected figures are worked out by hand from the definitions."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scrtune.goodput.calculator import BUCKETS, compute, window
from scrtune.goodput.events import Event
from scrtune.goodput.events import Kind as K
from scrtune.goodput.readers import read_jsonl, read_store
from scrtune.goodput.store import Store, StoredEvent

M = 60.0


def ev(kind, minute, step=-1):
    return Event(kind=kind, wall_s=minute * M, step=step, job="primer")


PRIMER = [
    ev(K.JOB_STARTED, 0),
    ev(K.RESTORE_FINISHED, 5, 25),
    ev(K.STEP_FINISHED, 55, 50),
    ev(K.SAVE_FINISHED, 60, 50),
    ev(K.STEP_FINISHED, 100, 70),
    ev(K.JOB_CRASHED, 100),
    ev(K.JOB_STARTED, 115),
    ev(K.RESTORE_FINISHED, 120, 50),
    ev(K.STEP_FINISHED, 195, 75),
    ev(K.SAVE_FINISHED, 200, 75),
    ev(K.JOB_TERMINATED, 200),
]


def minutes(report) -> dict[str, float]:
    return {k: round(v / M, 6) for k, v in report.badput_s.items()}


def assert_sums(report) -> None:
    assert sum(report.badput_s.values()) + report.effective_s == pytest.approx(report.total_s)
    assert all(v >= 0 for v in report.badput_s.values())


def test_primer_worked_example_exactly():
    report = compute(PRIMER)
    assert report.goodput_pct == 50.0
    assert (report.total_s / M, report.effective_s / M, report.ideal_step_s / M) == (200, 100, 2)
    got = minutes(report)
    assert (
        got["checkpoint_restore"],
        got["progress_lost"],
        got["restart"],
        got["checkpoint_save"],
        got["slowdown"],
        got["other"],
    ) == (10, 40, 15, 10, 25, 0)
    assert report.net_steps == 50 and report.runs == 2 and not report.errors
    assert_sums(report)


def test_termination_logged_on_a_crash_is_still_a_crash():
    events = [e if e.kind is not K.JOB_CRASHED else ev(K.JOB_TERMINATED, 100) for e in PRIMER]
    assert minutes(compute(events)) == minutes(compute(PRIMER))


def test_crash_inferred_when_a_job_starts_again_without_an_end():
    events = [e for e in PRIMER if e.kind is not K.JOB_CRASHED]
    report = compute(events)
    assert minutes(report)["restart"] == 15 and minutes(report)["progress_lost"] == 40


def _steady(steps, start_min, every=1, step0=0):
    """Steps of 1 minute each from start_min, logged every `every` steps."""
    return [
        ev(K.STEP_FINISHED, start_min + n - step0, n)
        for n in range(step0 + every, steps + 1, every)
    ]


def test_resume_at_the_next_step_counts_downtime_as_restart_not_progress():
    events = [
        ev(K.JOB_STARTED, 0),
        *_steady(10, 0),
        ev(K.SAVE_FINISHED, 10, 10),  # emergency
        ev(K.JOB_CRASHED, 10),
        ev(K.JOB_STARTED, 40),
        ev(K.RESTORE_FINISHED, 42, 10),
        *_steady(20, 42, step0=10),
        ev(K.JOB_TERMINATED, 52),
    ]
    report = compute(events, ideal_step_s=M)
    got = minutes(report)
    assert got["restart"] == 30 and got["progress_lost"] == 0 and got["checkpoint_restore"] == 2
    assert report.effective_s / M == 20 and report.goodput_pct == pytest.approx(100 * 20 / 52)
    assert_sums(report)


def test_restart_from_step_zero_loses_the_whole_first_run():
    events = [
        ev(K.JOB_STARTED, 0),
        *_steady(5, 0),
        ev(K.JOB_CRASHED, 5),
        ev(K.JOB_STARTED, 10),
        *_steady(8, 10),
        ev(K.JOB_TERMINATED, 18),
    ]
    report = compute(events, ideal_step_s=M)
    got = minutes(report)
    assert got["progress_lost"] == 5 and got["restart"] == 5 and got["other"] == 0
    assert report.net_steps == 8 and report.effective_s / M == 8
    assert_sums(report)


def test_steps_logged_every_n_give_the_same_goodput():
    every_step = [ev(K.JOB_STARTED, 0), *_steady(20, 0), ev(K.JOB_TERMINATED, 20)]
    every_5th = [ev(K.JOB_STARTED, 0), *_steady(20, 0, every=5), ev(K.JOB_TERMINATED, 20)]
    a, b = compute(every_step), compute(every_5th)
    assert a.goodput_pct == b.goodput_pct == 100.0
    assert a.net_steps == b.net_steps == 20 and b.ideal_step_s == M


def test_same_checkpoint_restored_twice_is_counted_twice():
    events = [
        ev(K.JOB_STARTED, 0),
        ev(K.RESTORE_STARTED, 0),
        ev(K.RESTORE_FINISHED, 2, 10),
        *_steady(15, 2, step0=10),
        ev(K.JOB_CRASHED, 7),
        ev(K.JOB_STARTED, 10),
        ev(K.RESTORE_STARTED, 10),
        ev(K.RESTORE_FINISHED, 12, 10),
        *_steady(20, 12, step0=10),
        ev(K.JOB_TERMINATED, 22),
    ]
    got = minutes(compute(events, ideal_step_s=M))
    assert got["checkpoint_restore"] == 4  # 2 + 2, not the average
    assert got["progress_lost"] == 5  # steps 11-15 of the first run


def test_query_while_running_counts_the_in_flight_tail_as_other():
    events = [ev(K.JOB_STARTED, 0), *_steady(10, 0)]
    report = compute(events, now_s=12.5 * M)
    assert report.running and report.total_s / M == 12.5
    assert report.effective_s / M == 10 and minutes(report)["other"] == 2.5
    assert_sums(report)


def test_checkpoints_without_steps_use_checkpoint_steps():
    events = [e for e in PRIMER if e.kind is not K.STEP_FINISHED]
    report = compute(events, ideal_step_s=2 * M)
    assert report.goodput_pct == 50.0 and report.net_steps == 50
    got = minutes(report)
    assert (got["checkpoint_restore"], got["progress_lost"], got["restart"]) == (10, 40, 15)
    # without step events a save's start is unknown: save time and slowdown are not separated
    assert got["slowdown"] + got["checkpoint_save"] == 35
    assert_sums(report)


def test_no_steps_no_ideal_says_so():
    events = [e for e in PRIMER if e.kind is not K.STEP_FINISHED]
    report = compute(events)
    assert any(
        "ideal" in w for w in compute([ev(K.JOB_STARTED, 0), ev(K.JOB_TERMINATED, 5)]).warnings
    )
    # issue 13: the intervals between checkpoint steps hold saves of unknown length, so no
    # ideal step time is estimated from them, and the warnings say why
    assert report.ideal_step_s == 0
    assert any("logged only at their end" in w for w in report.warnings)


def test_overlapping_intervals_are_errors_and_other_never_negative():
    events = [
        ev(K.JOB_STARTED, 0),
        ev(K.RESTORE_STARTED, 0),
        ev(K.SAVE_STARTED, 1),
        ev(K.RESTORE_FINISHED, 3, 0),
        ev(K.SAVE_FINISHED, 4, 0),
        ev(K.JOB_TERMINATED, 6),
    ]
    report = compute(events, ideal_step_s=M)
    assert report.errors and "overlaps" in report.errors[0]
    assert_sums(report)


def test_window_query_and_step_time_deviation():
    report = compute(PRIMER)
    part = window(report, 100 * M, 120 * M)
    assert part["restart"] / M == 15 and part["checkpoint_restore"] / M == 5
    assert sum(part.values()) == pytest.approx(20 * M)
    assert {round(s.step_s / M, 3) for s in report.step_times} == {2.0, 3.0}


def test_events_recorded_in_the_daemon_store(tmp_path):
    store = Store(str(tmp_path / "state.sqlite"))
    for event in PRIMER:
        store.record(
            StoredEvent(
                job="primer",
                run=0,
                kind=event.kind.value,
                wall_s=event.wall_s,
                step=event.step,
                detail="",
            ),
            0.0,
        )
    store.close()
    loaded = read_store(str(tmp_path / "state.sqlite"), "primer")
    assert compute(loaded.events).goodput_pct == 50.0


RESILIENCY_LOG = [  # the primer's log as the resiliency library writes it (no step events)
    ("2026-01-01T10:00:00", "job_started", None),
    ("2026-01-01T10:05:00", "checkpoint_loaded", 25),
    ("2026-01-01T11:00:00", "checkpoint_saved", 50),
    ("2026-01-01T11:40:00", "job_terminated", None),
    ("2026-01-01T11:55:00", "job_started", None),
    ("2026-01-01T12:00:00", "checkpoint_loaded", 50),
    ("2026-01-01T13:20:00", "checkpoint_saved", 75),
    ("2026-01-01T13:20:00", "job_terminated", None),
]


def test_cli_on_a_resiliency_log(run_cli, tmp_path):
    log = tmp_path / "training-job-goodput.log"
    log.write_text(
        "\n".join(
            json.dumps(
                {
                    "timestamp": t,
                    "job_name": "training-job",
                    "event_type": e,
                    **({"step": s} if s else {}),
                }
            )
            for t, e, s in RESILIENCY_LOG
        )
        + "\nnot json\n"
    )
    result = run_cli("goodput", "--log", str(log), "--ideal-step-time", "120", "--format", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["goodput_pct"] == 50.0 and out["total_s"] == 12000 and out["effective_s"] == 6000
    assert set(out["badput_s"]) == set(BUCKETS) and out["ideal_step_s"] == 120
    assert out["badput_s"]["restart"] == 900 and out["badput_s"]["progress_lost"] == 2400
    assert out["bad_lines"] == [f"{log}:9: Expecting value: line 1 column 1 (char 0)"]
    table = run_cli("goodput", "--log", str(log), "--ideal-step-time", "120")
    assert "Training progress loss" in table.stdout and "goodput 50.0%" in table.stdout


def test_cli_interval_and_errors(run_cli, tmp_path):
    out = json.loads(
        run_cli(
            "interval", "--ckpt-cost", "300", "--mtbf", str(6 * 3600), "--format", "json"
        ).stdout
    )
    assert out["interval_s"] / 60 == pytest.approx(56.7, abs=0.05)  # Daly's published vector
    young = json.loads(
        run_cli(
            "interval",
            "--ckpt-cost",
            "300",
            "--mtbf",
            "86400",
            "--model",
            "young",
            "--format",
            "json",
        ).stdout
    )
    assert young["interval_s"] == pytest.approx((2 * 300 * 86400) ** 0.5)
    first = json.loads(run_cli("interval", "--ckpt-cost", "300", "--mtbf", "86400", "--model",
                               "daly1", "--format", "json").stdout)
    assert first["interval_s"] == pytest.approx((2 * 300 * 86400) ** 0.5 - 300)
    assert run_cli("interval", "--ckpt-cost", "0", "--mtbf", "1").returncode == 2
    assert run_cli("goodput", "--log", str(tmp_path / "none.log")).returncode == 2


def test_plot_is_a_png_of_the_expected_size(run_cli, tmp_path):
    import struct

    pytest.importorskip("matplotlib")
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(json.dumps({"kind": e.kind.value, "wall_s": e.wall_s, "step": e.step,
                                         "job": "primer"}) for e in PRIMER) + "\n")
    png = tmp_path / "goodput.png"
    result = run_cli("goodput", "--log", str(log), "--plot", str(png))
    assert result.returncode == 0, result.stderr
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert (width, height) == (1000, 500)
    unwritable = run_cli("goodput", "--log", str(log), "--plot", str(tmp_path / "no" / "g.png"))
    assert unwritable.returncode == 2 and "Traceback" not in unwritable.stderr
    assert unwritable.stderr.count("\n") == 1 and "--plot" in unwritable.stderr


def test_multilevel_intervals():
    from scrtune.goodput.intervals import multilevel, young

    ks, base, waste = multilevel([(60, 86400)])
    assert ks == [1] and base == pytest.approx(young(60, 86400))
    # cheap cache level (5 s, node crashes every 6 h) + parallel file system (300 s, 7 days)
    ks, base, waste = multilevel([(5, 6 * 3600), (300, 7 * 86400)])
    assert base == pytest.approx((2 * 5 * 6 * 3600) ** 0.5)  # 465.8 s
    assert ks == [1, round((2 * 300 * 7 * 86400) ** 0.5 / base)]  # 1, 41
    expected = 5 / base + base / (2 * 6 * 3600) + 300 / (ks[1] * base) \
        + ks[1] * base / (2 * 7 * 86400)
    assert waste == pytest.approx(expected)


def test_cli_multilevel(run_cli):
    out = json.loads(run_cli("interval", "--model", "multilevel", "--level", "5:21600",
                             "--level", "300:604800", "--format", "json").stdout)
    assert out["every"] == [1, 41] and out["interval_s"] == pytest.approx(464.76, abs=0.01)
    assert run_cli("interval", "--model", "multilevel", "--level", "x").returncode == 2


def test_goodput_from_traces(run_cli):
    from tests.conftest import data

    result = run_cli("goodput", data("dlio_train_ckpt"), "--format", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["runs"] == 1 and out["badput_s"]["checkpoint_save"] > 0
    assert out["ideal_method"] == "mean compute-region time in the trace"
    total = out["effective_s"] + sum(out["badput_s"].values())
    assert total == pytest.approx(out["total_s"])
    assert run_cli("goodput", data("dlio_train_ckpt"), "--log", "x").returncode == 2


def test_cli_window_query(run_cli, tmp_path):
    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(json.dumps({"kind": e.kind.value, "wall_s": e.wall_s,
                                         "step": e.step}) for e in PRIMER) + "\n")
    out = json.loads(run_cli("goodput", "--log", str(log), "--since", str(100 * M), "--until",
                             str(120 * M), "--format", "json").stdout)
    assert out["window"]["seconds"]["restart"] == 15 * M
    assert out["window"]["seconds"]["checkpoint_restore"] == 5 * M
    assert run_cli("goodput", "--log", str(log), "--since", "5", "--until", "1").returncode == 2


def test_broken_values_are_bad_lines_and_a_start_without_events_is_a_crash(tmp_path):
    """Found by fuzzing: json.loads reads NaN and Infinity, which once reached the calculator
    (or raised OverflowError), and two starts in a row raised IndexError."""
    log = tmp_path / "job.log"
    log.write_text("\n".join([
        '{"kind": "job_started", "wall_s": 1000, "job": "j"}',
        '{"kind": "job_started", "wall_s": 2000, "job": "j"}',  # the first run crashed at once
        '{"kind": "step_finished", "wall_s": NaN, "step": 1, "job": "j"}',
        '{"kind": "step_finished", "wall_s": 2100, "step": Infinity, "job": "j"}',
        '{"kind": "step_finished", "wall_s": 2100, "step": 1.5, "job": "j"}',
        '{"kind": "step_finished", "wall_s": -1, "step": 2, "job": "j"}',
        '{"kind": "step_finished", "timestamp": "0001-01-01T00:00:00", "step": 2, "job": "j"}',
        '{"kind": "step_finished", "wall_s": true, "step": 2, "job": "j"}',
        '{"kind": "step_finished", "wall_s": 2200, "step": 10, "job": "j"}',
        '{"kind": "job_terminated", "wall_s": 2300, "job": "j"}',
    ]) + "\n")
    loaded = read_jsonl(str(log))
    assert [line.split(":")[1] for line in loaded.bad_lines] == ["3", "4", "5", "6", "7", "8"]
    report = compute(loaded.events, ideal_step_s=10.0)
    assert report.runs == 2 and report.total_s == 1300 and not report.errors


def test_a_state_file_that_is_not_one_is_a_one_line_error_and_none_is_created(run_cli,
                                                                             tmp_path):
    garbage = tmp_path / "garbage.sqlite"
    garbage.write_bytes(b"SQLite format 3\x00" + b"\xff" * 200)
    typo = tmp_path / "typo.sqlite"
    for path in (garbage, typo, tmp_path):
        result = run_cli("goodput", "--db", str(path))
        assert result.returncode == 2 and "Traceback" not in result.stderr
        assert result.stderr.count("\n") == 1 and str(path) in result.stderr
    assert not typo.exists()  # a report never creates a state file


def test_two_jobs_under_one_name_are_two_jobs_and_restarts_stay_one(tmp_path):
    """Issue 12: runs of one job name that overlap in time (two allocations at once, told
    apart by the run ids TunedSCR records) are separate jobs; runs one after another are
    restarts of one job."""
    from scrtune.client.tuned_scr import run_id
    from scrtune.goodput.readers import read_store

    store = Store(str(tmp_path / "s.sqlite"))
    def run(job, run_number, start_s, steps):
        events = [("job_started", start_s, -1)] + [
            ("step_finished", start_s + 10 * (i + 1), i + 1) for i in range(steps)] + [
            ("job_terminated", start_s + 10 * steps + 1, -1)]
        for kind, wall_s, step in events:
            store.record(StoredEvent(job=job, run=run_number, kind=kind, wall_s=wall_s,
                                     step=step, detail=""), wall_s)
    run("llama", 101, 1000.0, 5)  # two allocations at once under one name
    run("llama", 202, 1005.0, 5)
    run("bert", 303, 1000.0, 3)  # one allocation, then the next: a restart
    run("bert", 404, 2000.0, 3)
    store.close()
    loaded = read_store(str(tmp_path / "s.sqlite"))
    assert loaded.jobs == {"llama [run 101]", "llama [run 202]", "bert"}
    alone = read_store(str(tmp_path / "s.sqlite"), "llama [run 202]")
    assert {event.run for event in alone.events} == {202} and len(alone.events) == 7
    assert run_id({"SLURM_JOB_ID": "123456"}) == 123456
    assert run_id({"FLUX_JOB_ID": "f2ZyWbFm"}) == run_id({"FLUX_JOB_ID": "f2ZyWbFm"}) > 0
    assert run_id({}) != run_id({})  # a launch without a scheduler: its own id


# -- issue 13: cases worked out by hand from the primer's definitions; each failed before -----
def test_a_run_numbered_from_zero_counts_every_step():
    """Ten steps numbered 0-9 are ten steps (it gave 90%): progress does not depend on the
    numbering base, logged every step or every n."""
    from_zero = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_FINISHED, n + 1, n) for n in range(10)],
                 ev(K.JOB_TERMINATED, 10)]
    report = compute(from_zero)
    assert report.net_steps == 10 and report.goodput_pct == 100.0
    every_5th = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_FINISHED, n + 1, n) for n in (0, 5, 10, 15)],
                 ev(K.JOB_TERMINATED, 16)]
    assert compute(every_5th, ideal_step_s=M).net_steps == 16


def test_a_run_resumed_without_a_logged_restore_keeps_what_its_first_step_shows():
    """Run 2 logs no restore but goes on from step 41: steps to 40 survived (the save at 40),
    41-50 were lost. It was read as a restart from step 0 (31% instead of 65%)."""
    events = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_FINISHED, n, n) for n in range(1, 51)],
              ev(K.SAVE_FINISHED, 40, 40), ev(K.JOB_CRASHED, 50),
              ev(K.JOB_STARTED, 60), *[ev(K.STEP_FINISHED, 60 + n - 40, n) for n in range(41, 101)],
              ev(K.JOB_TERMINATED, 120)]
    report = compute(events, ideal_step_s=M)
    assert report.net_steps == 100
    got = minutes(report)
    assert got["progress_lost"] == 10 and got["restart"] == 10
    assert report.goodput_pct == pytest.approx(100 * 100 / 120)
    assert_sums(report)


def test_two_phases_of_a_kind_back_to_back_at_one_time_both_count():
    """init then preparation at one timestamp gave startup 0; two chained saves gave save 0."""
    events = [ev(K.JOB_STARTED, 0), ev(K.STARTUP_STARTED, 0), ev(K.STARTUP_FINISHED, 2),
              ev(K.STARTUP_STARTED, 2), ev(K.STARTUP_FINISHED, 5),
              *[ev(K.STEP_FINISHED, 5 + n, n) for n in range(1, 11)],
              ev(K.SAVE_STARTED, 15), ev(K.SAVE_FINISHED, 16, 10), ev(K.SAVE_STARTED, 16),
              ev(K.SAVE_FINISHED, 18, 10), ev(K.JOB_TERMINATED, 18)]
    got = minutes(compute(events, ideal_step_s=M))
    assert got["startup"] == 5 and got["checkpoint_save"] == 3


def test_a_last_run_that_crashes_loses_what_it_had_not_saved():
    """It kept all its unsaved progress as goodput (95% where the rule gives 50%)."""
    events = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_FINISHED, n, n) for n in range(1, 101)],
              ev(K.SAVE_FINISHED, 50, 50), ev(K.JOB_CRASHED, 100)]
    report = compute(events, ideal_step_s=M)
    assert report.net_steps == 50 and minutes(report)["progress_lost"] == 50
    assert report.goodput_pct == 50.0
    assert_sums(report)


def test_a_crash_during_a_save_or_restore_is_a_failure_not_a_bad_log():
    events = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_FINISHED, n, n) for n in range(1, 11)],
              ev(K.SAVE_STARTED, 10), ev(K.JOB_CRASHED, 12),
              ev(K.JOB_STARTED, 15), ev(K.RESTORE_STARTED, 15), ev(K.JOB_CRASHED, 17)]
    report = compute(events, ideal_step_s=M)
    assert not report.errors  # it was "never finished", exit 1
    got = minutes(report)
    # nothing survived, so the interrupted save is lost progress (a higher-priority bucket);
    # the interrupted restore is restore time
    assert got["progress_lost"] == 12 and got["checkpoint_restore"] == 2
    assert_sums(report)


def test_the_clock_going_backwards_and_now_before_the_end_are_said(run_cli, tmp_path):
    events = [ev(K.JOB_STARTED, 0), ev(K.STEP_FINISHED, 2, 1), ev(K.STEP_FINISHED, 1, 2),
              ev(K.STEP_FINISHED, 3, 3), ev(K.JOB_TERMINATED, 3)]
    report = compute(events, now_s=1 * M)
    assert any("went backwards 1 time" in w for w in report.warnings)
    assert any("--now" in w and "before the last event" in w for w in report.warnings)
    log = tmp_path / "g.jsonl"
    log.write_text(json.dumps({"kind": "job_started", "wall_s": 0}) + "\n")
    zero = run_cli("goodput", "--log", str(log), "--ideal-step-time", "0")
    assert zero.returncode == 2 and "above 0" in zero.stderr


def test_logs_of_step_starts_only_count_the_steps_they_mark_done():
    """The peer's own convention (a step's start marks the previous step done) gave 0%. Ten
    one-minute steps 0-9 started from minute 1; the clean end completes the last one (issue
    43: every clean run lost a step; the peer counts it): 10 steps done, and the minute
    before the first start is no step time."""
    events = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_STARTED, n + 1, n) for n in range(10)],
              ev(K.JOB_TERMINATED, 11)]
    report = compute(events)
    assert report.net_steps == 10 and report.ideal_step_s == M
    assert minutes(report)["slowdown"] == 0 and report.effective_s / M == 10
    assert_sums(report)


def test_time_before_a_runs_first_step_is_startup_not_slowdown():
    """A run whose first step ends 10 minutes in and then steps every minute: 9 of those 10
    minutes came before its first step (it was slowdown). The primer's own sparse log keeps
    its slowdown: a first interval of 25 steps cannot tell when they began."""
    events = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_FINISHED, 9 + n, n) for n in range(1, 11)],
              ev(K.JOB_TERMINATED, 19)]
    report = compute(events)
    got = minutes(report)
    assert report.ideal_step_s == M and report.net_steps == 10
    assert (got["startup"], got["slowdown"], report.effective_s / M) == (9, 0, 10)
    assert_sums(report)
    # after a restart too: the first step after the restore ends 4 minutes after it
    events += [ev(K.JOB_STARTED, 20), ev(K.RESTORE_FINISHED, 21, 10),
               *[ev(K.STEP_FINISHED, 24 + n - 10, n) for n in range(11, 16)],
               ev(K.JOB_TERMINATED, 29)]
    got = minutes(compute(events))
    assert (got["startup"], got["slowdown"]) == (9 + 3, 0)
    starts = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_STARTED, n + 3, n) for n in range(6)],
              ev(K.JOB_TERMINATED, 9)]
    got = minutes(compute(starts))
    assert (got["startup"], got["other"]) == (3, 0)  # the clean end completes the last step
    assert minutes(compute(PRIMER))["slowdown"] == 25


def test_the_wait_from_a_steps_end_to_its_save_is_step_time_also_after_the_last_survivor():
    """A straggler's wait between step 5's end and its save (rank 0 blocked in
    need_checkpoint's collective) is slowdown like any other wait between steps, also when
    step 5 is the last one a crash left, and when it is the job's last step; as a trace, which
    marks progress only at its saves, measures it."""
    def job(wait_min: float) -> dict[str, float]:
        first = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_FINISHED, n, n) for n in range(1, 6)],
                 ev(K.SAVE_STARTED, 5 + wait_min, 5), ev(K.SAVE_FINISHED, 6 + wait_min, 5),
                 ev(K.STEP_FINISHED, 7 + wait_min, 6), ev(K.JOB_CRASHED, 7.5 + wait_min)]
        at = 8 + wait_min
        second = [ev(K.JOB_STARTED, at), ev(K.RESTORE_STARTED, at), ev(K.RESTORE_FINISHED,
                                                                         at + 1, 5),
                  *[ev(K.STEP_FINISHED, at + 1 + n, 5 + n) for n in range(1, 6)],
                  ev(K.SAVE_STARTED, at + 6 + wait_min, 10),
                  ev(K.SAVE_FINISHED, at + 7 + wait_min, 10),
                  ev(K.JOB_TERMINATED, at + 8 + wait_min)]
        report = compute(first + second, ideal_step_s=M)
        assert report.net_steps == 10
        assert_sums(report)
        return minutes(report)

    waited, prompt = job(2), job(0)
    assert waited["slowdown"] - prompt["slowdown"] == pytest.approx(4)
    assert waited["other"] == pytest.approx(prompt["other"]) == pytest.approx(1)  # finalize
    assert all(waited[b] == pytest.approx(prompt[b]) for b in waited if b != "slowdown")


def test_two_launchers_writing_one_log_are_said():
    """Two launchers' events interleaved in one log, without run ids: read as one job, which
    they are not. A plain restart (the primer's) goes back once and is not said."""
    events = [ev(K.JOB_STARTED, 0), ev(K.JOB_STARTED, 0.5)]
    for n in range(1, 11):
        events += [ev(K.STEP_FINISHED, n, n), ev(K.STEP_FINISHED, n + 0.5, n)]
    report = compute(events + [ev(K.JOB_TERMINATED, 11)])
    assert any("two launchers may be writing one log" in w for w in report.warnings)
    assert not any("launchers" in w for w in compute(PRIMER).warnings)


@pytest.mark.parametrize("offsets", [False, True])
def test_a_daylight_saving_fall_back_in_naive_local_times(run_cli, tmp_path, offsets):
    """The resiliency logger writes naive local times: in New York on 2026-11-01 the clock
    shows 01:00-02:00 twice. Steps every 10 minutes through it are 130 minutes, not a clock
    going back 50 minutes; with UTC offsets in the log nothing is assumed."""
    import datetime as dt
    from zoneinfo import ZoneInfo

    try:
        zone = ZoneInfo("America/New_York")
    except Exception:  # ZoneInfoNotFoundError: no time zone database on this machine
        pytest.skip("no time zone database (tzdata) for America/New_York")
    start = dt.datetime(2026, 11, 1, 4, 50, tzinfo=dt.timezone.utc)  # 00:50 EDT
    lines = []
    for index in range(14):
        moment = (start + dt.timedelta(minutes=10 * index)).astimezone(zone)
        text = moment.isoformat() if offsets else moment.replace(tzinfo=None).isoformat()
        kind = "job_started" if index == 0 else "job_terminated" if index == 13 else \
            "step_finished"
        lines.append(json.dumps({"event_type": kind, "timestamp": text, "job_name": "dst",
                                 **({"step": index} if 0 < index < 13 else {})}))
    log = tmp_path / "dst.jsonl"
    log.write_text("\n".join(lines) + "\n")
    done = run_cli("goodput", "--log", str(log), "--format", "json",
                   env={**__import__("os").environ, "TZ": "America/New_York"})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["total_s"] == 130 * M and report["net_steps"] == 12
    assert not any("backwards" in w for w in report["warnings"])
    folded = [w for w in report["warnings"] if "fall-back" in w]
    assert bool(folded) is not offsets
    if folded:
        assert folded[0].startswith(f"{log}:8:") and "and 5 more" in folded[0]  # 01:00 EST


def test_the_batched_reader_reads_every_line_as_the_line_by_line_one(tmp_path):
    """Lines are decoded a chunk at a time where they have the usual shape; every other line
    goes the old way. Over a mix of good and broken lines, both read the same events and name
    the same bad lines."""
    import random
    from types import SimpleNamespace

    from scrtune.goodput import readers
    from scrtune.goodput.columns import EventLog

    pick = random.Random(13)
    values = [0, 5, -1, 2.5, 3.0, 1e400, "7", "", None, True, [], {}, "x", 2 ** 70,
              "2026-11-01T01:30:00", "2026-11-01T01:30:00+00:00"]
    keys = ["kind", "event_type", "wall_s", "time", "timestamp", "step", "job", "job_name",
            "run", "name"]
    kinds = ["step_finished", "job_started", "checkpoint_saved", "bogus"]
    lines = []
    for _ in range(3000):
        record = {"kind": pick.choice(kinds), "wall_s": pick.uniform(0, 1e6),
                  "step": pick.randrange(100), "job": "j"}
        for _ in range(pick.choice([0, 0, 0, 1, 2])):
            record[pick.choice(keys)] = pick.choice(values + kinds)
        text = json.dumps(record, allow_nan=True)
        lines.append(pick.choice([text, text, text, "", "not json", text[:-3], "[1, 2]"]))
    log = tmp_path / "mixed.jsonl"
    log.write_bytes(("\n".join(lines) + "\n").encode() + b"\xff\xfe broken\n")
    old = SimpleNamespace(events=[], bad_lines=[])
    local = readers.LocalTimes()
    for number, line in enumerate(log.open(encoding="utf-8", errors="replace"), start=1):
        if not line.strip():  # the reader as it was: a text file, line by line
            continue
        try:
            old.events.append(readers._event(json.loads(line), local))
        except (ValueError, TypeError, KeyError, OverflowError) as exc:
            old.bad_lines.append(f"{log}:{number}: {exc}")
    for chunk_bytes in (1 << 22, 512):  # one chunk, and many
        readers.CHUNK_BYTES = chunk_bytes
        try:
            new = readers.read_jsonl(str(log))
        finally:
            readers.CHUNK_BYTES = 1 << 22
        assert new.bad_lines == old.bad_lines and len(new.bad_lines) > 500
        assert new.events == EventLog.of(old.events).events()


def _reference_paint(start, end, candidates, pairs, ideal):
    """The painting rule as a plain loop over elementary intervals (the calculator's before
    it was vectorised): the highest-priority recorded interval, else compute inside a
    surviving interval, else other; each interval's first steps x ideal of compute is goodput."""
    from scrtune.goodput.calculator import _PRIORITY

    bounds = sorted({start, end, *[t for s, e, _ in candidates + pairs if e > s for t in (s, e)]})
    bounds = [t for t in bounds if start <= t <= end]
    budget = {(s, e): k * ideal for s, e, k in pairs}
    background = ("data_loading", "custom")  # phases that may run beside the steps

    def claims(left, right):
        covering = [_PRIORITY.index(b) for s, e, b in candidates if s < e and s <= left
                    and right <= e]
        holding = sorted((s, e) for s, e, _ in pairs if s <= left and right <= e and s < e)
        return (_PRIORITY[min(covering)] if covering else None), \
            (holding[0] if holding else None)

    # an interval that, its background phases included, took no longer than its steps at
    # the ideal time ran those phases beside its steps: they are compute
    taken = dict.fromkeys(budget, 0.0)
    for left, right in zip(bounds, bounds[1:]):
        bucket, key = claims(left, right)
        if key is not None and (bucket is None or bucket in background):
            taken[key] += right - left
    pieces, full = [], dict(budget)
    for left, right in zip(bounds, bounds[1:]):
        bucket, key = claims(left, right)
        if bucket in background and key is not None and taken[key] <= full[key] + 1e-9:
            bucket = None
        if bucket is not None:
            pieces.append([left, right, bucket])
            continue
        if key is None:
            pieces.append([left, right, "other"])
            continue
        good = min(budget[key], right - left)
        budget[key] -= good
        if good > 0:
            pieces.append([left, left + good, "goodput"])
        if left + good < right:
            pieces.append([left + good, right, "slowdown"])
    merged = []
    for piece in pieces:
        if merged and merged[-1][2] == piece[2] and merged[-1][1] == piece[0]:
            merged[-1][1] = piece[1]
        else:
            merged.append(piece)
    return merged, any(left > 1e-9 for left in budget.values())


def test_the_painted_timeline_is_the_plain_rule_on_random_logs(monkeypatch):
    """Painted whole and in pieces of a few intervals (as a long log is), the timeline is the
    plain rule's."""
    import random

    from scrtune.goodput import paint
    from scrtune.goodput.calculator import _PRIORITY, _paint
    from scrtune.goodput.steps import PAIR

    pick = random.Random(5)
    for trial in range(800):
        monkeypatch.setattr(paint, "PIECE_ROWS", 1 << 18 if trial % 2 else pick.randrange(1, 4))
        marks = sorted(pick.sample(range(1, 60), pick.randrange(2, 12)))
        pairs = [(float(a), float(b), pick.randrange(0, 4)) for a, b in zip(marks, marks[1:])
                 if pick.random() < 0.8]
        candidates = []
        for _ in range(pick.randrange(0, 6)):
            s = pick.randrange(0, 60)
            candidates.append((float(s), float(s + pick.choice([0, 1, 3, 10])),
                               pick.choice(_PRIORITY)))
        ideal = pick.choice([0.0, 0.5, 1.0, 4.0])
        warnings = []
        records = np.array(pairs, dtype=np.float64).reshape(-1, 3)
        rows = np.empty(len(records), dtype=PAIR)
        rows["start"], rows["end"], rows["steps"] = records.T
        cuts = sorted(pick.sample(range(len(rows) + 1), min(3, len(rows) + 1)))
        chunks = [rows[a:b] for a, b in zip([0, *cuts], [*cuts, len(rows)])]
        got = _paint(0.0, 70.0, candidates, chunks, ideal, warnings)
        want, short = _reference_paint(0.0, 70.0, candidates, pairs, ideal)
        assert [(s.start_s, s.end_s, s.bucket) for s in got] == \
            [tuple(piece) for piece in want], (candidates, pairs, ideal)
        assert bool(warnings) is short
