"""Goodput and badput from a job's events, as a timeline in which every second has one bucket.

Goodput = net useful steps x ideal step time / total wall time. Each moment of the job goes to
exactly one bucket, by priority: restart (a run's end to the next start), checkpoint restore,
startup, progress lost (from the moment the surviving step was reached, usually its save, to
the run's end), checkpoint save, data loading, custom; the remaining time between progress
points of surviving steps is compute, split into goodput (steps x ideal) and slowdown (the
rest); what nothing claims is other. So the buckets always add up to the total, and overlapping
explicit intervals are reported as errors instead of making "other" negative.

What survived is decided by the next run's restored step, not by how a run's end was logged,
so a termination logged on a crash, a restart from step 0 and a resume at the next step are all
accounted for by the steps themselves.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import msgspec
import numpy as np

from scrtune.goodput.events import Event, Kind, in_time_order
from scrtune.goodput.log_checks import clock_warnings, interleaved
from scrtune.goodput.paint import GOODPUT, OTHER, SLOWDOWN, paint

BUCKETS = ("checkpoint_save", "checkpoint_restore", "progress_lost", "restart", "slowdown",
           "startup", "data_loading", "custom", "other")
# for people: tables and plots
LABELS = {"checkpoint_save": "Checkpoint saving", "checkpoint_restore": "Checkpoint loading",
          "progress_lost": "Training progress loss", "restart": "Job restart",
          "slowdown": "Training slowdown", "startup": "Startup (init, preparation)",
          "data_loading": "Data loading", "custom": "Custom badput", "other": "Other"}
_EXPLICIT = {  # started kind, finished kind -> bucket
    Kind.RESTORE_FINISHED: (Kind.RESTORE_STARTED, "checkpoint_restore"),
    Kind.SAVE_FINISHED: (Kind.SAVE_STARTED, "checkpoint_save"),
    Kind.STARTUP_FINISHED: (Kind.STARTUP_STARTED, "startup"),
    Kind.DATA_LOADING_FINISHED: (Kind.DATA_LOADING_STARTED, "data_loading"),
    Kind.CUSTOM_FINISHED: (Kind.CUSTOM_STARTED, "custom"),
}
_OPENED = {started: bucket for started, bucket in _EXPLICIT.values()}
_PRIORITY = ("restart", "checkpoint_restore", "startup", "progress_lost", "checkpoint_save",
             "data_loading", "custom")


class Segment(msgspec.Struct, frozen=True):
    start_s: float
    end_s: float
    bucket: str  # "goodput" or one of BUCKETS


class StepTime(msgspec.Struct, frozen=True):
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


@dataclass
class _Run:
    start_s: float
    end_s: float = -1.0
    events: list[Event] = field(default_factory=list)
    intervals: list[tuple[float, float, str]] = field(default_factory=list)
    # progress points, as two flat lists (no object per point for memory or the collector)
    point_times: list[float] = field(default_factory=list)
    point_steps: list[int] = field(default_factory=list)
    saves: list[tuple[float, int]] = field(default_factory=list)  # progress made safe
    base: tuple[float, int] = (0.0, 0)  # (time, step) the run's progress starts from
    ended: str = "running"  # "terminated", "crashed" (logged, or started again), "running"
    blind_saves: list[float] = field(default_factory=list)  # saves of unknown duration: ends


def compute(events: list[Event], ideal_step_s: float | None = None,
            now_s: float | None = None, ideal_method: str = "given") -> Report:
    if not events:
        raise ValueError("no goodput events")
    warnings = clock_warnings(events, now_s)
    events = in_time_order(events)
    runs, running = _runs(events, now_s)
    warnings += interleaved([run.events for run in runs])
    errors: list[str] = []
    for run in runs:
        _intervals_and_points(run, errors)
    survive = _surviving_steps(runs)
    steps = _step_intervals(runs, survive)
    samples, pairs = steps.columns()
    blind = sum(len(run.blind_saves) for run in runs)
    if blind:
        warnings.append(f"{blind} checkpoint save(s) logged only at their end, with no step "
                        "before them: their time is unknown, counted inside the step intervals "
                        "(not as save), and the ideal step time is not estimated from those")
    ideal, method = _ideal(ideal_step_s, samples, warnings)
    if ideal_step_s:
        method = ideal_method
    candidates = _candidates(runs, survive) + _before_first_steps(steps, ideal)
    segments = _paint(runs[0].start_s, runs[-1].end_s, candidates, pairs, ideal, warnings)
    totals = {bucket: 0.0 for bucket in ("goodput", *BUCKETS)}
    for segment in segments:
        totals[segment.bucket] += segment.end_s - segment.start_s
    total = runs[-1].end_s - runs[0].start_s
    return Report(
        total_s=total, effective_s=totals["goodput"],
        goodput_pct=100.0 * totals["goodput"] / total if total > 0 else 0.0,
        ideal_step_s=ideal, ideal_method=method,
        net_steps=int(pairs[:, 2].sum()), runs=len(runs), running=running,
        badput_s={b: totals[b] for b in BUCKETS}, segments=segments,
        step_times=[StepTime(end, per_step) for end, per_step in zip(samples[0].tolist(),
                                                                     samples[1].tolist())],
        warnings=warnings, errors=errors + _overlaps(runs))


def window(report: Report, start_s: float, end_s: float) -> dict[str, float]:
    """Seconds per bucket (and goodput) between start_s and end_s."""
    out = {bucket: 0.0 for bucket in ("goodput", *BUCKETS)}
    for segment in report.segments:
        overlap = min(end_s, segment.end_s) - max(start_s, segment.start_s)
        if overlap > 0:
            out[segment.bucket] += overlap
    return out


def _runs(events: list[Event], now_s: float | None) -> tuple[list[_Run], bool]:
    runs: list[_Run] = []
    started, terminated, crashed_kind = Kind.JOB_STARTED, Kind.JOB_TERMINATED, Kind.JOB_CRASHED
    taken: list[Event] = []  # the current run's events (a local: this loop sees every event)
    for event in events:
        kind = event.kind
        if kind is started or not runs:
            if runs and runs[-1].end_s < 0:  # started again without an end: a crash
                crashed = runs[-1]
                crashed.end_s = crashed.events[-1].wall_s if crashed.events else crashed.start_s
                crashed.ended = "crashed"
            runs.append(_Run(start_s=event.wall_s))
            taken = runs[-1].events
            if kind is started:
                continue
        if kind is terminated or kind is crashed_kind:
            runs[-1].end_s = event.wall_s
            runs[-1].ended = "crashed" if kind is crashed_kind else "terminated"
        else:
            taken.append(event)
    running = runs[-1].end_s < 0
    if running:
        last = runs[-1].events[-1].wall_s if runs[-1].events else runs[-1].start_s
        runs[-1].end_s = max(last, now_s or last)
    return runs, running


def _intervals_and_points(run: _Run, errors: list[str]) -> None:
    # phases open, oldest first: two of a kind back to back at one time (init then
    # preparation, chained saves) sort start before finish, and each finish closes the oldest
    open_at: dict[tuple[Kind, str], list[float]] = {}
    last_step: float | None = None  # a save logged only at its end started after this step
    base: tuple[float, int] | None = None
    times, steps = run.point_times, run.point_steps
    step_finished, step_started = Kind.STEP_FINISHED, Kind.STEP_STARTED
    for event in run.events:
        kind = event.kind
        if kind is step_finished:  # by far the most common: first
            if event.step >= 0:
                times.append(event.wall_s)
                steps.append(event.step)
                last_step = event.wall_s
        elif kind in _OPENED:
            open_at.setdefault((kind, event.name), []).append(event.wall_s)
        elif kind in _EXPLICIT:
            started_kind, bucket = _EXPLICIT[kind]
            opened = open_at.get((started_kind, event.name))
            start = opened.pop(0) if opened else None
            if start is None:  # only the end was logged (checkpoint_loaded, checkpoint_saved)
                if kind is Kind.RESTORE_FINISHED:
                    start = run.start_s  # loading is what a run does first
                elif last_step is not None:  # after the step it saves
                    start = last_step
                else:  # no step before it: its duration is unknown (zero here)
                    start = event.wall_s
                    if kind is Kind.SAVE_FINISHED:
                        run.blind_saves.append(event.wall_s)
            run.intervals.append((start, event.wall_s, bucket))
            last_step = None
            if kind is Kind.RESTORE_FINISHED and event.step >= 0 and base is None:
                base = (event.wall_s, event.step)
            elif kind is Kind.SAVE_FINISHED and event.step >= 0:
                times.append(event.wall_s)
                steps.append(event.step)
                run.saves.append((event.wall_s, event.step))
        elif kind is step_started and event.step >= 0:  # the step before it is done
            times.append(event.wall_s)
            steps.append(event.step - 1)
            last_step = event.wall_s
    for (kind, name), starts in open_at.items():
        for start in starts:
            if run.ended == "terminated":  # a clean end with a phase still open: a bad log
                errors.append(f"{kind.value}{' ' + name if name else ''} at {start:.3f} never "
                              "finished")
            else:  # a crash (or the present) during a save or a restore ends it
                run.intervals.append((start, run.end_s, _OPENED[kind]))
    startup_end = max((e for s, e, b in run.intervals if b == "startup"), default=run.start_s)
    run.base = base or (startup_end, _step_before(run.point_times, run.point_steps))


def _step_before(times: list[float], steps: list[int]) -> int:
    """The step a run without a logged restore starts from: the one before the first it logs,
    whatever the numbering base (a fresh run from 0 starts at -1, from 1 at 0; a run that
    resumed without saying so, at the step before its first). Logged every n steps, the first
    logged step is n steps on, or from step 0 at the most."""
    if not times:
        return 0
    ordered = heapq.nsmallest(9, zip(times, steps))
    first = ordered[0][1]
    gaps = [b[1] - a[1] for a, b in zip(ordered, ordered[1:]) if b[1] > a[1]]
    if not gaps:
        return 0 if first > 0 else -1
    return first - min(min(gaps), first + 1)


def _surviving_steps(runs: list[_Run]) -> list[float]:
    """The highest step of each run that counts: the next run's restored step, or (last run)
    everything it reached."""
    last = runs[-1]
    if last.ended != "crashed":
        return [float(following.base[1]) for following in runs[1:]] + [float("inf")]
    # a last run that crashed keeps what it saved: nothing resumed from the rest
    kept = max([step for _, step in last.saves], default=last.base[1])
    return [float(following.base[1]) for following in runs[1:]] + [float(kept)]


@dataclass
class _Steps:
    """What every run's step intervals give, gathered run by run."""

    samples: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)  # ends, s/step
    first_samples: list[tuple[np.ndarray, np.ndarray]] = field(default_factory=list)
    pairs: list[np.ndarray] = field(default_factory=list)  # surviving: (start, end, steps) rows
    first: list[tuple[float, float]] = field(default_factory=list)  # a first single step's
    before_first: list[tuple[float, float]] = field(default_factory=list)  # up to a 1st start

    def columns(self) -> tuple[tuple[np.ndarray, np.ndarray], np.ndarray]:
        """The samples (those of first single steps only when there are no others) and the
        surviving intervals, as arrays."""
        samples = _columns(self.samples)
        if not len(samples[0]):  # nothing else to estimate the ideal step time from
            samples = _columns(self.first_samples)
        return samples, np.concatenate(self.pairs) if self.pairs else np.empty((0, 3))


def _step_intervals(runs: list[_Run], survive: list[float]) -> _Steps:
    """Per-step time samples of every interval, the surviving intervals, and what lies
    before each run's first step: a run's first interval holding one step holds the time
    before that step too (its start is not logged), and a step-start log says when it began."""
    steps = _Steps()
    for run, cap in zip(runs, survive):
        _run_steps(run, cap, steps)
    return steps


def _run_steps(run: _Run, cap: float, out: _Steps) -> None:
    """One run's step intervals: from each point to the next that reaches a higher step
    (points sorted by time, then step; the run's base first among its equals)."""
    times = np.array([run.base[0], *run.point_times], dtype=np.float64)
    steps = np.array([run.base[1], *run.point_steps], dtype=np.int64)
    kept = np.concatenate([[True], times[1:] >= run.base[0]])
    times, steps = times[kept], steps[kept]
    order = np.lexsort((steps, times))
    times, steps = times[order], steps[order]
    origin = (times[0], steps[0])
    previous, at = 0, 1
    while at < len(steps) and steps[at] <= steps[previous]:  # before the first step is done
        if steps[at] == steps[previous] and (times[previous], steps[previous]) == origin:
            out.before_first.append((float(times[previous]), float(times[at])))
            previous = at  # the time up to the first step's start is no step time
        at += 1
    if at >= len(steps):
        return
    reached = np.maximum.accumulate(np.concatenate([[steps[previous]], steps[at:-1]]))
    ends = at + np.flatnonzero(steps[at:] > reached)
    starts = np.concatenate([[previous], ends[:-1]])
    done = (steps[ends] - steps[starts]).astype(np.float64)
    compute = times[ends] - times[starts] - _busy(times[starts], times[ends], run.intervals)
    counted = (compute > 0) & ~np.isin(times[ends], run.blind_saves)
    survives = steps[starts] < cap
    if (times[previous], steps[previous]) == origin and done[0] == 1:  # a first single step
        if counted[0]:
            out.first_samples.append((times[ends[:1]], compute[:1]))
            counted[0] = False
        if survives[0]:
            out.first.append((float(times[starts[0]]), float(compute[0])))
    out.samples.append((times[ends][counted], (compute / done)[counted]))
    out.pairs.append(np.column_stack([times[starts], times[ends],
                                      np.minimum(steps[ends], cap) - steps[starts]])[survives])


def _columns(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    if not parts:
        return np.empty(0), np.empty(0)
    return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])


def _busy(starts: np.ndarray, ends: np.ndarray, intervals) -> np.ndarray:
    """Seconds of each consecutive [start, end] that the run's recorded intervals cover
    (overlaps counted each time), each interval added only to the ranges it meets."""
    busy = np.zeros(len(starts))
    for s, e, _ in intervals:
        low = np.searchsorted(ends, s, side="right")
        high = np.searchsorted(starts, e, side="left")
        if high > low:
            span = slice(low, high)
            busy[span] += np.maximum(0.0, np.minimum(e, ends[span]) - np.maximum(s, starts[span]))
    return busy


def _ideal(given: float | None, samples, warnings: list[str]) -> tuple[float, str]:
    if given:
        return given, "given"
    per_step = samples[1]
    if not len(per_step):
        warnings.append("no step intervals: give --ideal-step-time to measure goodput")
        return 0.0, "unknown: no step intervals"
    return float(np.median(per_step)), (
        f"median compute time per step over {len(per_step)} intervals between step events "
        "(save, restore and other recorded badput excluded)")


def _before_first_steps(steps: _Steps, ideal: float) -> list[tuple[float, float, str]]:
    """A run's time before its first step is startup, not step time: from its start (or
    restore) to its first logged step start, or what a first single step took beyond the
    ideal step time (the peer's program startup: first step time minus a step's)."""
    out = [(start, end, "startup") for start, end in steps.before_first]
    if ideal > 0:
        out += [(start, start + compute - ideal, "startup") for start, compute in steps.first
                if compute > ideal]
    return out


def _candidates(runs: list[_Run], survive: list[float]) -> list[tuple[float, float, str]]:
    out: list[tuple[float, float, str]] = []
    for index, run in enumerate(runs):
        out += run.intervals
        if index + 1 < len(runs) or run.ended == "crashed":
            if index + 1 < len(runs):
                out.append((run.end_s, runs[index + 1].start_s, "restart"))
            # progress is lost from the moment the surviving step was safe: its save, if this
            # run saved it, else when it was reached
            saved = [t for t, step in run.saves if step >= survive[index]]
            reached = [t for t, step in zip(run.point_times, run.point_steps)
                       if step >= survive[index]]
            lost_from = min(saved or reached or [run.base[0]])
            if run.base[1] >= survive[index]:
                lost_from = run.base[0]
            out.append((lost_from, run.end_s, "progress_lost"))
    return out


def _paint(start: float, end: float, candidates, pairs, ideal: float,
           warnings: list[str]) -> list[Segment]:
    """Every elementary interval of [start, end] in one bucket (goodput.paint)."""
    rank = {bucket: i for i, bucket in enumerate(_PRIORITY)}
    painted = paint(start, end, [(s, e, rank[bucket]) for s, e, bucket in candidates], pairs,
                    ideal, len(rank))
    if painted.short_steps:
        warnings.append("the ideal step time is longer than some measured steps: goodput there "
                        "is capped at the time measured")
    names = {GOODPUT: "goodput", SLOWDOWN: "slowdown", OTHER: "other",
             **dict(enumerate(_PRIORITY))}
    return [Segment(s, e, names[c]) for s, e, c in zip(painted.start_s.tolist(),
                                                        painted.end_s.tolist(),
                                                        painted.code.tolist())]


def _overlaps(runs: list[_Run]) -> list[str]:
    intervals = sorted(i for run in runs for i in run.intervals if i[1] > i[0])
    return [f"{a[2]} {a[0]:.3f}-{a[1]:.3f} overlaps {b[2]} {b[0]:.3f}-{b[1]:.3f}: counted once, "
            f"as the higher-priority bucket" for a, b in zip(intervals, intervals[1:])
            if b[0] < a[1]]
