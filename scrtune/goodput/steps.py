"""Second pass over a job's time-ordered events: each run's step intervals, from each progress
point to the next that reaches a higher step, walked a chunk at a time with what crosses a
chunk carried over. What it keeps is bounded: the distinct per-step times (for an exact
median), a capped or binned series of them, and the surviving intervals, which go to a Spill.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from scrtune.goodput.columns import TIMED, Spill
from scrtune.goodput.runs import SAVE_FINISHED, SAVE_STARTED, STEP_FINISHED, STEP_STARTED, Run

PAIR = np.dtype([("start", "f8"), ("end", "f8"), ("steps", "f8")])
POINT = np.dtype([("wall", "f8"), ("step", "i8"), ("save", "?")])  # a progress point
SERIES_POINTS = 10_000  # step_times: every interval up to this many, else this many bins


class Samples:
    """Per-step compute times: the exact median from their distinct values and counts, and a
    series for plots (each interval's, or bin means over the job's time when there are more
    than SERIES_POINTS)."""

    def __init__(self, start_s: float, end_s: float) -> None:
        self.count = 0
        self._values, self._counts = np.empty(0), np.empty(0, dtype=np.int64)
        self._pending: list[np.ndarray] = []
        self._pending_rows = 0
        self._exact: list[tuple[np.ndarray, np.ndarray]] = []
        self._start_s = start_s
        self._bin_s = max(end_s - start_s, 1e-9) / SERIES_POINTS
        self._sums = np.zeros(SERIES_POINTS)
        self._bin_counts = np.zeros(SERIES_POINTS, dtype=np.int64)
        self._bin_ends = np.zeros(SERIES_POINTS)

    def add(self, ends_s: np.ndarray, per_step_s: np.ndarray) -> None:
        if not len(ends_s):
            return
        self.count += len(ends_s)
        if self.count <= SERIES_POINTS:
            self._exact.append((ends_s, per_step_s))
        else:
            self._exact = []
        bins = np.clip(((ends_s - self._start_s) / self._bin_s).astype(np.int64), 0,
                       SERIES_POINTS - 1)
        self._sums += np.bincount(bins, weights=per_step_s, minlength=SERIES_POINTS)
        self._bin_counts += np.bincount(bins, minlength=SERIES_POINTS)
        np.maximum.at(self._bin_ends, bins, ends_s)
        self._pending.append(per_step_s)
        self._pending_rows += len(per_step_s)
        if self._pending_rows > 1 << 18:
            self._compact()

    def _compact(self) -> None:
        values = np.concatenate([self._values, *self._pending])
        counts = np.concatenate([self._counts, *[np.ones(len(p), dtype=np.int64)
                                                 for p in self._pending]])
        self._values, inverse = np.unique(values, return_inverse=True)
        self._counts = np.bincount(inverse.reshape(-1), weights=counts).astype(np.int64)
        self._pending, self._pending_rows = [], 0

    def median(self) -> float:
        """As np.median over every sample: the middle one, or the mean of the middle two."""
        self._compact()
        reached = np.cumsum(self._counts)
        middle = [(self.count - 1) // 2, self.count // 2]
        low, high = self._values[np.searchsorted(reached, middle, side="right")]
        return float(np.mean([low, high]))

    def series(self) -> tuple[list[float], list[float]]:
        if self.count <= SERIES_POINTS:
            ends = [e for part in self._exact for e in part[0].tolist()]
            return ends, [v for part in self._exact for v in part[1].tolist()]
        filled = self._bin_counts > 0
        means = self._sums[filled] / self._bin_counts[filled]
        return self._bin_ends[filled].tolist(), means.tolist()


@dataclass
class Walk:
    """One run's walk over its progress points (what crosses a chunk)."""

    run: Run
    cap: float  # its steps beyond this did not survive
    base_pending: bool = True
    started: bool = False  # past the points before its first step was done
    origin: tuple[float, int] = (0.0, 0)
    start: tuple[float, int] = (0.0, 0)  # the open interval's start point
    reached: int = 0
    first_pending: bool = True
    lost_from_s: float = np.inf  # the first time a step beyond cap was reached
    lost_from_step: int = -1  # the step reached then


@dataclass
class Steps:
    samples: Samples
    pairs: Spill
    first_samples: list[tuple[float, float]] = field(default_factory=list)
    first: list[tuple[float, float]] = field(default_factory=list)  # a first single step's
    before_first: list[tuple[float, float]] = field(default_factory=list)  # up to a 1st start
    net_steps: float = 0.0
    walks: list[Walk] = field(default_factory=list)


def step_intervals(chunks: Iterable[np.ndarray], runs: list[Run], survive: list[float],
                   start_s: float, end_s: float) -> Steps:
    out = Steps(Samples(start_s, end_s), Spill(PAIR))
    out.walks = [Walk(run, cap) for run, cap in zip(runs, survive)]
    at, first_run = 0, 0
    for records in chunks:
        high = at + len(records)
        while first_run < len(runs) and runs[first_run].end_pos <= at:
            first_run += 1
        for walk in out.walks[first_run:]:
            if walk.run.taken_from >= high:
                break
            low = max(walk.run.taken_from, at) - at
            _walk(walk, records[low:min(walk.run.end_pos, high) - at], out)
            if walk.run.completes is not None and walk.run.end_pos <= high:
                _completed_at_end(walk, out)  # the run's records end in this chunk
        at = high
    return out


def _completed_at_end(walk: Walk, out: Steps) -> None:
    """A clean end completes the step in flight (logs of step starts only)."""
    end_s, step = walk.run.completes  # type: ignore[misc]
    done = np.zeros(1, dtype=TIMED)
    done["wall"], done["step"], done["kind"] = end_s, step, STEP_FINISHED
    _walk(walk, done, out)


def _points(records: np.ndarray) -> np.ndarray:
    """Progress points (POINT): a step's end, a save of a step (its start too, when it names
    the step: the step was done by then, whether or not the save finished before a crash), and
    a step's start (the step before it is done), by time and then step; saves marked."""
    kinds, steps = records["kind"], records["step"]
    chosen = ((kinds == STEP_FINISHED) | (kinds == STEP_STARTED) | (kinds == SAVE_FINISHED)
              | (kinds == SAVE_STARTED)) & (steps >= 0)
    kinds = kinds[chosen]
    points = np.empty(len(kinds), dtype=POINT)
    points["wall"] = records["wall"][chosen]
    points["step"] = steps[chosen] - (kinds == STEP_STARTED)
    points["save"] = (kinds == SAVE_STARTED) | (kinds == SAVE_FINISHED)
    return points[np.lexsort((points["step"], points["wall"]))]


def _walk(walk: Walk, records: np.ndarray, out: Steps) -> None:
    points = _points(records)
    if len(points):
        beyond = np.flatnonzero(points["step"] >= walk.cap)
        if len(beyond):
            first = points[beyond[np.argmin(points["wall"][beyond])]]
            if first["wall"] < walk.lost_from_s:
                walk.lost_from_s, walk.lost_from_step = float(first["wall"]), int(first["step"])
    base_s, base_step = walk.run.base
    points = points[points["wall"] >= base_s]
    if walk.base_pending:
        if not len(points):
            return
        walk.base_pending = False
        points = np.concatenate([np.array([(base_s, base_step, False)], dtype=POINT), points])
        points = points[np.lexsort((points["step"], points["wall"]))]  # the base first
        walk.origin = walk.start = (float(points["wall"][0]), int(points["step"][0]))
        points = points[1:]
    if not walk.started:
        at = _before_first(walk, points["wall"].tolist(), points["step"].tolist(), out)
        if at is None:
            return
        points = points[at:]
    _intervals(walk, points, out)


def _before_first(walk: Walk, walls: list[float], steps: list[int],
                  out: Steps) -> int | None:
    """Skip the points before the first step is done; the time up to the first step's start
    is no step time. The index of the first point past them, or None."""
    for at, (wall, step) in enumerate(zip(walls, steps)):
        if step > walk.start[1]:
            walk.started, walk.reached = True, walk.start[1]
            return at
        if step == walk.start[1] and walk.start == walk.origin:
            out.before_first.append((walk.start[0], wall))
            walk.start = (wall, step)
    return None


def _intervals(walk: Walk, points: np.ndarray, out: Steps) -> None:
    """Each interval ends at a higher step, or at a save of the step reached: the time from a
    step's end to its save (a collective waiting for a straggler, the checkpoint decision) is
    the steps' time, also when the step is the last one a crash left (the job's own log says
    so: tests/test_goodput_truth.py), and a trace, which marks progress only at its saves,
    measures it so."""
    if not len(points):
        return
    walls, steps, saves = points["wall"], points["step"], points["save"]
    reached = np.maximum.accumulate(np.concatenate([[walk.reached], steps[:-1]]))
    ends = np.flatnonzero((steps > reached) | (saves & (steps == reached)))
    walk.reached = max(walk.reached, int(steps.max()))
    if not len(ends):
        return
    end_s, end_step = walls[ends], steps[ends]
    start_s = np.concatenate([[walk.start[0]], end_s[:-1]])
    start_step = np.concatenate([[walk.start[1]], end_step[:-1]])
    first_start = walk.start
    walk.start = (float(end_s[-1]), int(end_step[-1]))
    done = (end_step - start_step).astype(np.float64)
    run = walk.run
    compute = end_s - start_s - _busy(start_s, end_s, run.intervals)
    counted = (compute > 0) & (done > 0) & ~np.isin(end_s, run.blind_saves)
    survives = (start_step < walk.cap) | ((done == 0) & (start_step <= walk.cap))
    if walk.first_pending:
        walk.first_pending = False
        if first_start == walk.origin and done[0] == 1:  # a first single step
            if counted[0]:
                out.first_samples.append((float(end_s[0]), float(compute[0])))
                counted[0] = False
            if survives[0]:
                out.first.append((float(start_s[0]), float(compute[0])))
    out.samples.add(end_s[counted], compute[counted] / done[counted])
    steps_kept = np.minimum(end_step, walk.cap) - start_step
    pairs = np.empty(int(survives.sum()), dtype=PAIR)
    pairs["start"], pairs["end"] = start_s[survives], end_s[survives]
    pairs["steps"] = steps_kept[survives]
    out.net_steps += float(pairs["steps"].sum())
    out.pairs.append(pairs)


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
