"""Goodput of what `TunedSCR` records (issue 43), against the wall-clock truth of the jobs it
was seen on. TunedSCR records no steps, only starts, saves and restores: a run's progress is
known at its saves, from the step its job_started names (0: it counts from 0 until a restore
says otherwise), and at a save's start (its name gives the step, done by then)."""

from __future__ import annotations

import pytest

from scrtune.goodput.calculator import compute
from scrtune.goodput.events import Event
from scrtune.goodput.events import Kind as K

STEP_S = 0.2  # every step of these jobs computed 0.2 s


def ev(kind: K, wall_s: float, step: int = -1) -> Event:
    return Event(kind=kind, wall_s=wall_s, step=step, job="train")


def _save(at_s: float, step: int, named: bool = True) -> list[Event]:
    return [ev(K.SAVE_STARTED, at_s, step if named else -1), ev(K.SAVE_FINISHED, at_s + 0.02,
                                                                step)]


def test_a_first_run_without_a_restore_counts_from_step_zero():
    """The Slurm example under --allow-restart trained 40 steps: checkpoints at 15 and 30 (every
    3 s), then at 35 (the daemon's 1 s), halted, relaunched from 35, done at 40. Goodput said 30
    net steps: the run's first step was guessed from the gaps between its saves (10)."""
    events = [ev(K.JOB_STARTED, 0.0, 0), *_save(3.0, 15), *_save(6.02, 30), *_save(7.04, 35),
              ev(K.JOB_TERMINATED, 7.07),
              ev(K.JOB_STARTED, 8.7, 0), ev(K.RESTORE_STARTED, 8.71), ev(K.RESTORE_FINISHED,
                                                                          8.72, 35),
              *_save(9.72, 40), ev(K.JOB_TERMINATED, 9.75)]
    report = compute(events, ideal_step_s=STEP_S)
    assert report.net_steps == 40
    assert report.effective_s == pytest.approx(40 * STEP_S)
    assert report.badput_s["slowdown"] == pytest.approx(0.0, abs=0.01)


def test_a_crash_after_scr_completed_a_save_but_before_it_was_recorded_keeps_the_steps():
    """SCR completed ckpt.10, the job died before TunedSCR recorded the save; the next run
    restored ckpt.10. The whole run counted as lost (37% against a true 49% in a live job)."""
    events = [ev(K.JOB_STARTED, 0.0, 0), *_save(1.0, 5),
              ev(K.SAVE_STARTED, 2.02, 10), ev(K.JOB_CRASHED, 2.05),
              ev(K.JOB_STARTED, 4.0, 0), ev(K.RESTORE_STARTED, 4.01),
              ev(K.RESTORE_FINISHED, 4.02, 10), *_save(5.02, 15), ev(K.JOB_TERMINATED, 5.05)]
    report = compute(events, ideal_step_s=STEP_S)
    assert report.net_steps == 15
    assert report.effective_s == pytest.approx(15 * STEP_S)
    assert report.badput_s["progress_lost"] == pytest.approx(0.0, abs=0.01)
    assert report.badput_s["checkpoint_save"] == pytest.approx(0.02 + 0.03 + 0.02)


def test_a_save_start_without_a_step_is_read_as_before():
    """Logs whose save starts name no step (older TunedSCR, other recorders) are unchanged:
    the crashed run's unrecorded save is lost work."""
    events = [ev(K.JOB_STARTED, 0.0, 0), *_save(1.0, 5, named=False),
              ev(K.SAVE_STARTED, 2.02), ev(K.JOB_CRASHED, 2.05),
              ev(K.JOB_STARTED, 4.0, 0), ev(K.RESTORE_FINISHED, 4.02, 10),
              *_save(5.02, 15, named=False), ev(K.JOB_TERMINATED, 5.05)]
    report = compute(events, ideal_step_s=STEP_S)
    assert report.net_steps == 10  # 0-5 and 10-15: steps 5-10 of the first run never showed
