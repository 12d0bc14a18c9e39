"""Held-out logs worked out by hand from the primer's definitions (issue 43), each a case the
calculator got wrong: expected figures come from the definitions, not from scrtune."""

from __future__ import annotations

import pytest

from scrtune.goodput.calculator import compute
from scrtune.goodput.events import Event
from scrtune.goodput.events import Kind as K


def ev(kind: K, wall_s: float, step: int = -1) -> Event:
    return Event(kind=kind, wall_s=wall_s, step=step, job="held-out")


def test_a_steps_finish_and_the_next_steps_start_at_one_time_are_one_launcher():
    """The usual way a loop logs: step k finished and step k+1 started at the same instant.
    Sorted start-first, this read as steps going back ("two launchers may be writing one
    log"), counted one step too many and, with a restart, misplaced the lost work. Ten 10 s
    steps, a 2 s save of step 5, a crash 5 s after step 10, a restart of 5 s, a 2 s restore
    of step 5 and steps 6-10 again: 10 net steps, 55 s lost (the save of 5 to the crash)."""
    events, t = [ev(K.JOB_STARTED, 0)], 0.0
    for k in range(1, 11):
        events += [ev(K.STEP_STARTED, t, k), ev(K.STEP_FINISHED, t + 10, k)]
        t += 10
        if k == 5:
            events += [ev(K.SAVE_STARTED, t), ev(K.SAVE_FINISHED, t + 2, 5)]
            t += 2
    events += [ev(K.JOB_CRASHED, t + 5), ev(K.JOB_STARTED, t + 10),
                ev(K.RESTORE_STARTED, t + 10), ev(K.RESTORE_FINISHED, t + 12, 5)]
    t += 12
    for k in range(6, 11):
        events += [ev(K.STEP_STARTED, t, k), ev(K.STEP_FINISHED, t + 10, k)]
        t += 10
    report = compute([*events, ev(K.JOB_TERMINATED, t)], ideal_step_s=10)
    assert report.warnings == [] and report.net_steps == 10
    assert report.badput_s["progress_lost"] == pytest.approx(55)
    assert report.badput_s["restart"] == pytest.approx(5)
    assert report.effective_s == pytest.approx(100)


def test_a_phase_beside_a_step_that_took_no_longer_is_no_badput():
    """A background prefetch logged inside a step that still took its 60 s was charged as
    20 s of data-loading badput; when the step took 80 s, those 20 s are."""
    def log(longer_s: float) -> list[Event]:
        steps = [ev(K.STEP_FINISHED, 60 * k + (longer_s if k >= 3 else 0), k)
                 for k in range(1, 6)]
        phase = [ev(K.DATA_LOADING_STARTED, 130), ev(K.DATA_LOADING_FINISHED, 150)]
        end = [ev(K.JOB_TERMINATED, 300 + longer_s)]
        return sorted([ev(K.JOB_STARTED, 0), *steps, *phase, *end], key=lambda e: e.wall_s)

    beside = compute(log(0), ideal_step_s=60)
    assert beside.goodput_pct == pytest.approx(100) and beside.badput_s["data_loading"] == 0
    slowed = compute(log(20), ideal_step_s=60)
    assert slowed.badput_s["data_loading"] == pytest.approx(20)
    assert slowed.effective_s == pytest.approx(300)


def test_a_clean_end_completes_the_step_in_flight_in_a_log_of_step_starts():
    """The peer's convention logs only step starts; a clean end completes the step then in
    flight (the peer counts it): every clean run lost one step."""
    events = [ev(K.JOB_STARTED, 0), *[ev(K.STEP_STARTED, 10 * (k - 1), k) for k in range(1, 11)],
              ev(K.JOB_TERMINATED, 100)]
    report = compute(events, ideal_step_s=10)
    assert report.net_steps == 10 and report.goodput_pct == pytest.approx(100)
    crashed = compute([*events[:-1], ev(K.JOB_CRASHED, 100)], ideal_step_s=10)
    assert crashed.net_steps < 10  # a crash completes nothing


@pytest.mark.parametrize("folder", ["dlio_ckpt_workload", "dlio2_ckpt_workload"])
def test_goodput_of_a_dlio_checkpoint_trace_reads_its_compute_regions(run_cli, folder):
    """DLIO's checkpoint workload (tests/tracing/dlio_ckpt_workload.py: 3 training steps, a
    checkpoint after each, then the 3 read back) read 0% with no warning: its compute regions
    (`TorchFramework.compute`) were not compute, its read-backs were taken for resumes, and
    every DFTracer directory said the clock went backwards."""
    import json

    from tests.conftest import data

    result = run_cli("goodput", data(folder), "--format", "json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["net_steps"] == 3 and report["goodput_pct"] > 0
    assert not any("clock" in warning for warning in report["warnings"])
    assert report["ideal_method"].startswith("mean compute-region time")
