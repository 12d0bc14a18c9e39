"""Goodput and badput from a job's events, as a timeline in which every second has one bucket.

Goodput = net useful steps x ideal step time / total wall time. Each moment of the job goes to
exactly one bucket, by priority: restart (a run's end to the next start), checkpoint restore,
startup, progress lost (from the moment the surviving step was reached, usually its save, to
the run's end), checkpoint save, data loading, custom; the remaining time between progress
points of surviving steps (a step's end, the next step, the step's save: a step's time runs
until the job moves on from it) is compute, split into goodput (steps x ideal) and slowdown
(the rest); what nothing claims is other. So the buckets always add up to the total, and overlapping
explicit intervals are reported as errors instead of making "other" negative.

What survived is decided by the next run's restored step, not by how a run's end was logged,
so a termination logged on a crash, a restart from step 0 and a resume at the next step are all
accounted for by the steps themselves.

The log is measured in three passes, each a chunk at a time, so memory stays flat in its
events (columns.py): runs.py finds the runs, steps.py walks their step intervals (and finds
the ideal step time), and paint.py paints the timeline piece by piece.
"""

from __future__ import annotations

from collections.abc import Iterable

import msgspec
import numpy as np

from scrtune.goodput.columns import EventLog, Spill, time_ordered
from scrtune.goodput.events import Event
from scrtune.goodput.log_checks import clock_warnings, interleaved
from scrtune.goodput.paint import GOODPUT, OTHER, SLOWDOWN, paint_pieces
from scrtune.goodput.runs import Run, scan, surviving_steps
from scrtune.goodput.steps import Steps, Walk, step_intervals

BUCKETS = ("checkpoint_save", "checkpoint_restore", "progress_lost", "restart", "slowdown",
           "startup", "data_loading", "custom", "other")
# for people: tables and plots
LABELS = {"checkpoint_save": "Checkpoint saving", "checkpoint_restore": "Checkpoint loading",
          "progress_lost": "Training progress loss", "restart": "Job restart",
          "slowdown": "Training slowdown", "startup": "Startup (init, preparation)",
          "data_loading": "Data loading", "custom": "Custom badput", "other": "Other"}
_PRIORITY = ("restart", "checkpoint_restore", "startup", "progress_lost", "checkpoint_save",
             "data_loading", "custom")


class Segment(msgspec.Struct, frozen=True):
    start_s: float
    end_s: float
    bucket: str  # "goodput" or one of BUCKETS


class StepTime(msgspec.Struct, frozen=True):
    """A step interval's compute time per step; past steps.SERIES_POINTS intervals, the mean
    over a slice of the job's time, at the slice's last interval end."""

    wall_s: float  # when the interval ended
    step_s: float  # compute time per step in it


class Report(msgspec.Struct, frozen=True, kw_only=True):
    total_s: float
    effective_s: float
    goodput_pct: float
    ideal_step_s: float
    ideal_method: str
    net_steps: int
    runs: int
    running: bool
    badput_s: dict[str, float]
    segments: list[Segment]
    step_times: list[StepTime]
    warnings: list[str]
    errors: list[str]


def compute(events: list[Event] | EventLog, ideal_step_s: float | None = None,
            now_s: float | None = None, ideal_method: str = "given") -> Report:
    """The report of a job's events: a list, or an EventLog (its selected job)."""
    log = EventLog.of(events) if isinstance(events, list) else events
    if not log.selected_events():
        raise ValueError("no goodput events")
    timed, clock = time_ordered(log)
    try:
        return _measure(timed, log.names.values, clock_warnings(clock, now_s), ideal_step_s,
                        now_s, ideal_method)
    finally:
        timed.close()


def _measure(timed: Spill, names: list[str], warnings: list[str], ideal_step_s: float | None,
             now_s: float | None, ideal_method: str) -> Report:
    found = scan(timed.chunks(), names, now_s)
    runs = found.runs
    warnings += interleaved(found.back)
    survive = surviving_steps(runs)
    start_s, end_s = runs[0].start_s, runs[-1].end_s
    steps = step_intervals(timed.chunks(), runs, survive, start_s, end_s)
    if not steps.samples.count and steps.first_samples:  # nothing else to estimate from
        steps.samples.add(*np.array(steps.first_samples).T)
    blind = sum(len(run.blind_saves) for run in runs)
    if blind:
        warnings.append(f"{blind} checkpoint save(s) logged only at their end, with no step "
                        "before them: their time is unknown, counted inside the step intervals "
                        "(not as save), and the ideal step time is not estimated from those")
    ideal, method = _ideal(ideal_step_s, steps, warnings)
    if ideal_step_s:
        method = ideal_method
    candidates = _candidates(steps) + _before_first_steps(steps, ideal)
    try:
        segments = _paint(start_s, end_s, candidates, steps.pairs.chunks(), ideal, warnings)
    finally:
        steps.pairs.close()
    totals = {bucket: 0.0 for bucket in ("goodput", *BUCKETS)}
    for segment in segments:
        totals[segment.bucket] += segment.end_s - segment.start_s
    total = end_s - start_s
    series = steps.samples.series()
    return Report(
        total_s=total, effective_s=totals["goodput"],
        goodput_pct=100.0 * totals["goodput"] / total if total > 0 else 0.0,
        ideal_step_s=ideal, ideal_method=method, net_steps=int(steps.net_steps),
        runs=len(runs), running=found.running, badput_s={b: totals[b] for b in BUCKETS},
        segments=segments, step_times=[StepTime(end, per_step) for end, per_step in
                                       zip(*series)],
        warnings=warnings, errors=found.errors + _overlaps(runs))


def window(report: Report, start_s: float, end_s: float) -> dict[str, float]:
    """Seconds per bucket (and goodput) between start_s and end_s."""
    out = {bucket: 0.0 for bucket in ("goodput", *BUCKETS)}
    for segment in report.segments:
        overlap = min(end_s, segment.end_s) - max(start_s, segment.start_s)
        if overlap > 0:
            out[segment.bucket] += overlap
    return out


def _ideal(given: float | None, steps: Steps, warnings: list[str]) -> tuple[float, str]:
    if given:
        return given, "given"
    count = steps.samples.count
    if not count:
        warnings.append("no step intervals: give --ideal-step-time to measure goodput")
        return 0.0, "unknown: no step intervals"
    return steps.samples.median(), (
        f"median compute time per step over {count} intervals between step events "
        "(save, restore and other recorded badput excluded)")


def _before_first_steps(steps: Steps, ideal: float) -> list[tuple[float, float, str]]:
    """A run's time before its first step is startup, not step time: from its start (or
    restore) to its first logged step start, or what a first single step took beyond the
    ideal step time (the peer's program startup: first step time minus a step's)."""
    out = [(start, end, "startup") for start, end in steps.before_first]
    if ideal > 0:
        out += [(start, start + compute - ideal, "startup") for start, compute in steps.first
                if compute > ideal]
    return out


def _candidates(steps: Steps) -> list[tuple[float, float, str]]:
    out: list[tuple[float, float, str]] = []
    walks = steps.walks
    for index, walk in enumerate(walks):
        run = walk.run
        next_start_s = walks[index + 1].run.start_s if index + 1 < len(walks) else float("inf")
        completed = _completed_unrecorded(walk, next_start_s)
        out += run.intervals
        if index + 1 < len(walks) or run.ended == "crashed":
            if index + 1 < len(walks):
                out.append((run.end_s, walks[index + 1].run.start_s, "restart"))
            # progress is lost from the moment the surviving step was safe: its save, if this
            # run saved it, else when it was reached
            saved = [t for t, step in run.saves if step >= walk.cap]
            reached = walk.lost_from_s if walk.lost_from_s < float("inf") else run.base[0]
            if completed:
                reached = run.end_s
            lost_from = min(saved) if saved else reached
            if run.base[1] >= walk.cap:
                lost_from = run.base[0]
            out.append((lost_from, run.end_s, "progress_lost"))
    return out


def _completed_unrecorded(walk: Walk, next_start_s: float) -> bool:
    """Whether the save a crash cut short is the one the next run resumed from: SCR completed
    it, its record did not get out. Its step was the run's surviving one, reached before the
    save began, and no save of it was recorded. Then the save is taken to have run its
    typical time, the crash after it."""
    run = walk.run
    if run.open_save_s is None or next_start_s == float("inf") or \
            walk.lost_from_step != walk.cap or \
            walk.lost_from_s > run.open_save_s or any(s >= walk.cap for _, s in run.saves):
        return False
    cut = (run.open_save_s, run.end_s, "checkpoint_save")
    end_s = run.end_s if run.end_logged else \
        max(run.end_s, min(run.open_save_s + run.typical_save_s, next_start_s))
    if cut in run.intervals:
        run.intervals[run.intervals.index(cut)] = (run.open_save_s, end_s, "checkpoint_save")
    run.end_s = end_s
    return True


def _paint(start: float, end: float, candidates, pair_chunks: Iterable[np.ndarray],
           ideal: float, warnings: list[str]) -> list[Segment]:
    """Every elementary interval of [start, end] in one bucket (goodput.paint); pair_chunks:
    the surviving intervals in time order, steps.PAIR records."""
    rank = {bucket: i for i, bucket in enumerate(_PRIORITY)}
    painted = paint_pieces(start, end, [(s, e, rank[bucket]) for s, e, bucket in candidates],
                           pair_chunks, ideal, len(rank),
                           background=(rank["data_loading"], rank["custom"]))
    if painted.short_steps:
        warnings.append("the ideal step time is longer than some measured steps: goodput there "
                        "is capped at the time measured")
    names = {GOODPUT: "goodput", SLOWDOWN: "slowdown", OTHER: "other",
             **dict(enumerate(_PRIORITY))}
    return [Segment(s, e, names[c]) for s, e, c in zip(painted.start_s.tolist(),
                                                        painted.end_s.tolist(),
                                                        painted.code.tolist())]


def _overlaps(runs: list[Run]) -> list[str]:
    intervals = sorted(i for run in runs for i in run.intervals if i[1] > i[0])
    return [f"{a[2]} {a[0]:.3f}-{a[1]:.3f} overlaps {b[2]} {b[0]:.3f}-{b[1]:.3f}: counted once, "
            f"as the higher-priority bucket" for a, b in zip(intervals, intervals[1:])
            if b[0] < a[1]]
