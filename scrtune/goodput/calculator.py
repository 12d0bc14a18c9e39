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

import bisect
import statistics
from dataclasses import dataclass, field

import msgspec

from scrtune.goodput.events import Event, Kind
from scrtune.goodput.log_checks import clock_warnings, interleaved

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
    points: list[tuple[float, int]] = field(default_factory=list)  # progress: (time, step)
    saves: list[tuple[float, int]] = field(default_factory=list)  # progress made safe
    base: tuple[float, int] = (0.0, 0)  # (time, step) the run's progress starts from
    ended: str = "running"  # "terminated", "crashed" (logged, or started again), "running"
    blind_saves: list[float] = field(default_factory=list)  # saves of unknown duration: ends


def compute(events: list[Event], ideal_step_s: float | None = None,
            now_s: float | None = None, ideal_method: str = "given") -> Report:
    if not events:
        raise ValueError("no goodput events")
    warnings = clock_warnings(events, now_s)
    events = sorted(events, key=Event.order)
    runs, running = _runs(events, now_s)
    warnings += interleaved([run.events for run in runs])
    errors: list[str] = []
    for run in runs:
        _intervals_and_points(run, errors)
    survive = _surviving_steps(runs)
    steps = _step_intervals(runs, survive)
    samples, pairs = steps.samples, steps.pairs
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
        net_steps=sum(k for _, _, k in pairs), runs=len(runs), running=running,
        badput_s={b: totals[b] for b in BUCKETS}, segments=segments,
        step_times=[StepTime(end, per_step) for end, per_step in samples],
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
    for event in events:
        if event.kind is Kind.JOB_STARTED or not runs:
            if runs and runs[-1].end_s < 0:  # started again without an end: a crash
                crashed = runs[-1]
                crashed.end_s = crashed.events[-1].wall_s if crashed.events else crashed.start_s
                crashed.ended = "crashed"
            runs.append(_Run(start_s=event.wall_s))
            if event.kind is Kind.JOB_STARTED:
                continue
        run = runs[-1]
        if event.kind in (Kind.JOB_TERMINATED, Kind.JOB_CRASHED):
            run.end_s = event.wall_s
            run.ended = "crashed" if event.kind is Kind.JOB_CRASHED else "terminated"
        else:
            run.events.append(event)
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
    for event in run.events:
        kind = event.kind
        if kind in (Kind.RESTORE_STARTED, Kind.SAVE_STARTED, Kind.STARTUP_STARTED,
                    Kind.DATA_LOADING_STARTED, Kind.CUSTOM_STARTED):
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
                run.points.append((event.wall_s, event.step))
                run.saves.append((event.wall_s, event.step))
        elif kind is Kind.STEP_FINISHED and event.step >= 0:
            run.points.append((event.wall_s, event.step))
            last_step = event.wall_s
        elif kind is Kind.STEP_STARTED and event.step >= 0:  # the step before it is done
            run.points.append((event.wall_s, event.step - 1))
            last_step = event.wall_s
    for (kind, name), starts in open_at.items():
        for start in starts:
            if run.ended == "terminated":  # a clean end with a phase still open: a bad log
                errors.append(f"{kind.value}{' ' + name if name else ''} at {start:.3f} never "
                              "finished")
            else:  # a crash (or the present) during a save or a restore ends it
                run.intervals.append((start, run.end_s, _OPENED[kind]))
    startup_end = max((e for s, e, b in run.intervals if b == "startup"), default=run.start_s)
    run.base = base or (startup_end, _step_before(run.points))


def _step_before(points: list[tuple[float, int]]) -> int:
    """The step a run without a logged restore starts from: the one before the first it logs,
    whatever the numbering base (a fresh run from 0 starts at -1, from 1 at 0; a run that
    resumed without saying so, at the step before its first). Logged every n steps, the first
    logged step is n steps on, or from step 0 at the most."""
    if not points:
        return 0
    ordered = sorted(points)
    first = ordered[0][1]
    gaps = [b[1] - a[1] for a, b in zip(ordered, ordered[1:9]) if b[1] > a[1]]
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


class _Steps(msgspec.Struct):
    samples: list[tuple[float, float]]  # (end, compute per step) of every step interval
    pairs: list[tuple[float, float, int]]  # surviving intervals: (start, end, steps)
    first: list[tuple[float, float]]  # (start, compute) of each run's first single step
    before_first: list[tuple[float, float]]  # a run's start to its first logged step start


def _step_intervals(runs: list[_Run], survive: list[float]) -> _Steps:
    """Per-step time samples of every interval, the surviving intervals, and what lies
    before each run's first step: a run's first interval holding one step holds the time
    before that step too (its start is not logged), and a step-start log says when it began."""
    out = _Steps([], [], [], [])
    firsts: list[tuple[float, float]] = []  # samples of first single steps
    for run, cap in zip(runs, survive):
        points = sorted([run.base] + [p for p in run.points if p[0] >= run.base[0]])
        covered = _Coverage(run.intervals)
        blind = set(run.blind_saves)  # an interval ending in one holds unknown save time
        previous = points[0]
        for point in points[1:]:
            steps = point[1] - previous[1]
            if steps <= 0:
                if steps == 0 and previous == points[0]:  # the run's first step is not done
                    out.before_first.append((previous[0], point[0]))
                    previous = point  # before this: the time up to it is no step time
                continue
            busy = covered.between(previous[0], point[0])
            compute = point[0] - previous[0] - busy
            first = previous == points[0] and steps == 1
            if compute > 0 and point[0] not in blind:
                (firsts if first else out.samples).append((point[0], compute / steps))
            if previous[1] < cap:
                out.pairs.append((previous[0], point[0], int(min(point[1], cap) - previous[1])))
                if first:
                    out.first.append((previous[0], compute))
            previous = point
    if not out.samples:  # nothing else to estimate the ideal step time from
        out.samples = firsts
    return out


class _Coverage:
    """Seconds of each [start, end] that recorded intervals cover (overlaps counted each
    time), asked for consecutive ranges in time order: each interval is looked at only while
    it can overlap the ranges asked, so a run costs O(ranges + intervals), and the sums are
    those of the plain formula, in the intervals' own order."""

    def __init__(self, intervals) -> None:
        self._intervals = sorted((s, e, index) for index, (s, e, _) in enumerate(intervals))
        self._next = 0
        self._active: list[tuple[float, float, int]] = []

    def between(self, start: float, end: float) -> float:
        while self._next < len(self._intervals) and self._intervals[self._next][0] < end:
            self._active.append(self._intervals[self._next])
            self._next += 1
        self._active = [i for i in self._active if i[1] > start]
        self._active.sort(key=lambda interval: interval[2])
        return sum(max(0.0, min(end, e) - max(start, s)) for s, e, _ in self._active)


def _ideal(given: float | None, samples, warnings: list[str]) -> tuple[float, str]:
    if given:
        return given, "given"
    if not samples:
        warnings.append("no step intervals: give --ideal-step-time to measure goodput")
        return 0.0, "unknown: no step intervals"
    per_step = [s for _, s in samples]
    return statistics.median(per_step), (
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
            reached = [t for t, step in run.points if step >= survive[index]]
            lost_from = min(saved or reached or [run.base[0]])
            if run.base[1] >= survive[index]:
                lost_from = run.base[0]
            out.append((lost_from, run.end_s, "progress_lost"))
    return out


def _paint(start: float, end: float, candidates, pairs, ideal: float,
           warnings: list[str]) -> list[Segment]:
    """Assign every elementary interval of [start, end] to one bucket: the highest-priority
    recorded interval covering it, else compute within a surviving interval, else other. One
    sweep over the interval ends, with counts of what is open."""
    rank = {bucket: i for i, bucket in enumerate(_PRIORITY)}
    changes: list[tuple[float, int, int]] = []  # (time, +1/-1, rank; len(rank) for a pair)
    for s, e, bucket in candidates:
        if e > s:
            changes += [(s, 1, rank[bucket]), (e, -1, rank[bucket])]
    for s, e, _ in pairs:
        if e > s:
            changes += [(s, 1, len(rank)), (e, -1, len(rank))]
    changes.sort(key=lambda change: change[0])
    bounds = sorted({start, end, *(t for t, _, _ in changes)})
    bounds = [t for t in bounds if start <= t <= end]
    open_count = [0] * (len(rank) + 1)
    pieces: list[Segment] = []
    at = 0
    for left, right in zip(bounds, bounds[1:]):
        while at < len(changes) and changes[at][0] <= left:
            _, delta, slot = changes[at]
            open_count[slot] += delta
            at += 1
        if right <= left:
            continue
        covering = next((i for i in range(len(rank)) if open_count[i] > 0), None)
        if covering is not None:
            pieces.append(Segment(left, right, _PRIORITY[covering]))
        else:
            pieces.append(Segment(left, right, "compute" if open_count[-1] > 0 else "other"))
    return _split_compute(pieces, pairs, ideal, warnings)


def _split_compute(pieces: list[Segment], pairs, ideal: float,
                   warnings: list[str]) -> list[Segment]:
    """Within each surviving interval, the first steps x ideal seconds of compute are goodput
    and the rest slowdown."""
    out: list[Segment] = []
    budget = {(s, e): k * ideal for s, e, k in pairs}
    keys = sorted(budget)
    starts = [k[0] for k in keys]
    for piece in pieces:
        if piece.bucket != "compute":
            out.append(piece)
            continue
        key = _containing(keys, starts, piece)
        good = min(budget[key], piece.end_s - piece.start_s)
        budget[key] -= good
        if good > 0:
            out.append(Segment(piece.start_s, piece.start_s + good, "goodput"))
        if piece.start_s + good < piece.end_s:
            out.append(Segment(piece.start_s + good, piece.end_s, "slowdown"))
    if any(left > 1e-9 for left in budget.values()):
        warnings.append("the ideal step time is longer than some measured steps: goodput there "
                        "is capped at the time measured")
    return _merge(out)


def _containing(keys: list[tuple[float, float]], starts: list[float],
                piece: Segment) -> tuple[float, float]:
    """The surviving interval holding `piece` (the earliest-starting, if several do)."""
    found = None
    index = bisect.bisect_right(starts, piece.start_s) - 1
    while index >= 0:  # surviving intervals rarely overlap: this looks at one or two
        s, e = keys[index]
        if piece.end_s <= e:
            found = keys[index]
        elif found is not None:
            break
        index -= 1
    assert found is not None, "compute outside every surviving interval"
    return found


def _merge(segments: list[Segment]) -> list[Segment]:
    out: list[Segment] = []
    for segment in segments:
        if out and out[-1].bucket == segment.bucket and out[-1].end_s == segment.start_s:
            out[-1] = Segment(out[-1].start_s, segment.end_s, segment.bucket)
        else:
            out.append(segment)
    return out


def _overlaps(runs: list[_Run]) -> list[str]:
    intervals = sorted(i for run in runs for i in run.intervals if i[1] > i[0])
    return [f"{a[2]} {a[0]:.3f}-{a[1]:.3f} overlaps {b[2]} {b[0]:.3f}-{b[1]:.3f}: counted once, "
            f"as the higher-priority bucket" for a, b in zip(intervals, intervals[1:])
            if b[0] < a[1]]
