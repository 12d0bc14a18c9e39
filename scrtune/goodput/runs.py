"""First pass over a job's time-ordered events (columns.time_ordered): its runs, each with its
recorded intervals, saves and the step it starts from. A Python loop visits only the events
that are not steps; steps are taken a chunk at a time, as arrays."""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from scrtune.goodput.columns import CODE, KIND_LIST
from scrtune.goodput.events import Kind

EXPLICIT = {  # finished kind -> started kind, bucket
    Kind.RESTORE_FINISHED: (Kind.RESTORE_STARTED, "checkpoint_restore"),
    Kind.SAVE_FINISHED: (Kind.SAVE_STARTED, "checkpoint_save"),
    Kind.STARTUP_FINISHED: (Kind.STARTUP_STARTED, "startup"),
    Kind.DATA_LOADING_FINISHED: (Kind.DATA_LOADING_STARTED, "data_loading"),
    Kind.CUSTOM_FINISHED: (Kind.CUSTOM_STARTED, "custom"),
}
OPENED = {started: bucket for started, bucket in EXPLICIT.values()}
STEP_FINISHED, STEP_STARTED = CODE[Kind.STEP_FINISHED], CODE[Kind.STEP_STARTED]
SAVE_FINISHED, SAVE_STARTED = CODE[Kind.SAVE_FINISHED], CODE[Kind.SAVE_STARTED]
_ENDS = (CODE[Kind.JOB_TERMINATED], CODE[Kind.JOB_CRASHED])
_FIRST_POINTS = 9  # what _step_before looks at


@dataclass
class Run:
    start_s: float
    first_pos: int  # where its records begin in the time-ordered stream (its job_started)
    taken_from: int  # its first record after job_started
    end_pos: int = -1  # where the next run's begin
    end_s: float = -1.0
    ended: str = "running"  # "terminated", "crashed" (logged, or started again), "running"
    intervals: list[tuple[float, float, str]] = field(default_factory=list)
    saves: list[tuple[float, int]] = field(default_factory=list)  # progress made safe
    blind_saves: list[float] = field(default_factory=list)  # saves of unknown duration: ends
    base: tuple[float, int] = (0.0, 0)  # (time, step) the run's progress starts from
    start_step: int = -1  # the step its job_started names (TunedSCR's: 0); -1 unknown
    end_logged: bool = False  # its end is an event of its own, not its last event
    open_save_s: float | None = None  # the start of a save a crash cut short (unrecorded end)
    typical_save_s: float = 0.0  # the median of its recorded saves
    resumed_unknown: bool = False  # it died inside its restore: it does not say what survived
    step_finishes: bool = False  # it logs step ends (else starts only, the peer's convention)
    completes: tuple[float, int] | None = None  # the step in flight at a clean end, done then
    restored: tuple[float, int] | None = None
    # the earliest progress points: (time, step done, 1 when a step's start said so)
    first_points: list[tuple[float, int, int]] = field(default_factory=list)
    open_at: dict[tuple[Kind, str], list[float]] = field(default_factory=dict)
    last_taken_s: float | None = None  # its latest event (a crash ends it there)
    last_step_s: float | None = None  # its latest step since the last finished phase
    previous_step: tuple[int, int] | None = None  # (step, kind): for the interleaving check
    reset_pos: int = -1  # where its latest step was last forgotten: its start, a phase's end

    def __post_init__(self) -> None:
        self.reset_pos = self.taken_from - 1


@dataclass
class Back:
    """Step numbers that repeat or go back within runs."""

    count: int = 0
    first: tuple[int, int, float] | None = None  # (step before, step after, when)


@dataclass
class Scan:
    runs: list[Run]
    running: bool
    errors: list[str]
    back: Back
    records: int


def scan(chunks: Iterable[np.ndarray], names: list[str], now_s: float | None) -> Scan:
    runs: list[Run] = []
    errors: list[str] = []
    back = Back()
    at = 0  # the stream position of the chunk's first record
    for records in chunks:
        _chunk(records, at, runs, names, errors, back)
        at += len(records)
    last = runs[-1]
    running = last.end_s < 0
    if running:
        reached = last.last_taken_s if last.last_taken_s is not None else last.start_s
        last.end_s = max(reached, now_s or reached)
    last.end_pos = at
    _close(last, errors)
    return Scan(runs, running, errors, back, at)


def _chunk(records: np.ndarray, at: int, runs: list[Run], names: list[str],
           errors: list[str], back: Back) -> None:
    kinds, walls, steps = records["kind"], records["wall"], records["step"]
    is_step = (kinds == STEP_FINISHED) | (kinds == STEP_STARTED)
    valid = is_step & (steps >= 0)
    last_valid = np.maximum.accumulate(np.where(valid, np.arange(len(records)), -1))
    started = CODE[Kind.JOB_STARTED]
    if not runs and kinds[0] != started:  # the first event starts a run, whatever it is
        runs.append(Run(start_s=float(walls[0]), first_pos=at, taken_from=at))
    segment = 0  # where the current run's records in this chunk begin
    for index in np.flatnonzero(~is_step).tolist():
        kind, wall = KIND_LIST[kinds[index]], float(walls[index])
        if kind is Kind.JOB_STARTED:
            if runs:
                _absorb(runs[-1], records, segment, index, valid, back)
                _end(runs[-1], at + index, errors, next_start_s=wall)
            runs.append(Run(start_s=wall, first_pos=at + index, taken_from=at + index + 1,
                            start_step=int(steps[index])))
            segment = index + 1
            continue
        run = runs[-1]
        if kind is Kind.JOB_TERMINATED or kind is Kind.JOB_CRASHED:
            run.end_s, run.end_logged = wall, True
            run.ended = "crashed" if kind is Kind.JOB_CRASHED else "terminated"
        elif kind in OPENED:
            run.open_at.setdefault((kind, names[records["name"][index]]), []).append(wall)
        elif kind in EXPLICIT:
            last_step = _last_step(run, int(last_valid[index]), at, walls)
            _finished(run, kind, wall, int(steps[index]), names[records["name"][index]],
                      last_step)
            run.reset_pos = at + index
    if runs:
        _absorb(runs[-1], records, segment, len(records), valid, back)
        run = runs[-1]
        found = int(last_valid[-1])
        if found >= 0 and at + found > run.reset_pos:
            run.last_step_s = float(walls[found])
        elif run.reset_pos >= at:  # forgotten in this chunk, after its last step
            run.last_step_s = None


def _last_step(run: Run, found: int, at: int, walls: np.ndarray) -> float | None:
    """When the run's latest step since its last finished phase was logged (None: none)."""
    if found >= 0 and at + found > run.reset_pos:
        return float(walls[found])
    return run.last_step_s if run.reset_pos < at else None


def _finished(run: Run, kind: Kind, wall: float, step: int, name: str,
              last_step: float | None) -> None:
    """A phase's end: its interval, from its logged start (the oldest open one of its kind:
    two back to back at one time sort start before finish), or guessed when only the end was
    logged (checkpoint_loaded, checkpoint_saved)."""
    started_kind, bucket = EXPLICIT[kind]
    opened = run.open_at.get((started_kind, name))
    start = opened.pop(0) if opened else None
    if start is None:
        if kind is Kind.RESTORE_FINISHED:
            start = run.start_s  # loading is what a run does first
        elif last_step is not None:  # after the step it saves
            start = last_step
        else:  # no step before it: its duration is unknown (zero here)
            start = wall
            if kind is Kind.SAVE_FINISHED:
                run.blind_saves.append(wall)
    run.intervals.append((start, wall, bucket))
    if kind is Kind.RESTORE_FINISHED and step >= 0 and run.restored is None:
        run.restored = (wall, step)
    elif kind is Kind.SAVE_FINISHED and step >= 0:
        run.saves.append((wall, step))
        _keep_first(run, np.array([wall]), np.array([step]), np.zeros(1, dtype=np.int64))


def _end(run: Run, next_pos: int, errors: list[str], next_start_s: float) -> None:
    if run.end_s < 0:  # started again without an end: a crash, at its last event
        run.end_s = run.last_taken_s if run.last_taken_s is not None else run.start_s
        run.ended = "crashed"
    run.end_pos = next_pos
    _close(run, errors, next_start_s)


def _close(run: Run, errors: list[str], next_start_s: float = float("inf")) -> None:
    saves = sorted(e - s for s, e, bucket in run.intervals if bucket == "checkpoint_save")
    run.typical_save_s = saves[len(saves) // 2] if saves else 0.0
    for (kind, name), starts in run.open_at.items():
        for start in starts:
            if run.ended == "terminated":  # a clean end with a phase still open: a bad log
                errors.append(f"{kind.value}{' ' + name if name else ''} at {start:.3f} never "
                              "finished")
                continue
            if kind is Kind.SAVE_STARTED and run.ended == "crashed":
                run.open_save_s = start
                if not run.end_logged:
                    # nothing is recorded during a save: the crash came after its last record,
                    # at half a typical save on average (all of one when the save survived:
                    # see calculator._completed_unrecorded)
                    run.end_s = max(run.end_s, min(start + run.typical_save_s / 2,
                                                   next_start_s))
            # a crash (or the present) during a save or a restore ends it
            run.intervals.append((start, run.end_s, OPENED[kind]))
            run.resumed_unknown |= kind is Kind.RESTORE_STARTED and run.restored is None
    run.open_at = {}
    if run.ended == "terminated" and not run.step_finishes and run.previous_step is not None \
            and run.previous_step[1] == STEP_STARTED:
        run.completes = (run.end_s, run.previous_step[0])  # a clean end completes it
    startup_end = max((e for s, e, b in run.intervals if b == "startup"), default=run.start_s)
    run.base = run.restored or (startup_end, run.start_step if run.start_step >= 0
                                else _step_before(run.first_points))


def _absorb(run: Run, records: np.ndarray, low: int, high: int, valid: np.ndarray,
            back: Back) -> None:
    """What the run's records in [low, high) of this chunk say in bulk: its latest event,
    its earliest progress points, and step numbers going back."""
    if high <= low:
        return
    kinds = records["kind"][low:high]
    taken = np.flatnonzero((kinds != _ENDS[0]) & (kinds != _ENDS[1]))
    if len(taken):
        run.last_taken_s = float(records["wall"][low + taken[-1]])
    chosen = np.flatnonzero(valid[low:high]) + low
    if not len(chosen):
        return
    walls, steps, kinds = records["wall"][chosen], records["step"][chosen], \
        records["kind"][chosen]
    run.step_finishes |= bool((kinds == STEP_FINISHED).any())
    started = (kinds == STEP_STARTED).astype(np.int64)
    _keep_first(run, walls, steps - started, started)  # a start marks the one before
    _count_back(run, steps, kinds, walls, back)


def _keep_first(run: Run, walls: np.ndarray, steps: np.ndarray, started: np.ndarray) -> None:
    """Keep the points _step_before needs: the earliest few by (time, step), ties included."""
    points = run.first_points
    if len(points) >= _FIRST_POINTS:
        latest = points[_FIRST_POINTS - 1][0]
        if walls[0] > latest:
            return
    limit = walls[min(_FIRST_POINTS, len(walls)) - 1]
    chosen = walls <= limit
    points += zip(walls[chosen].tolist(), steps[chosen].tolist(), started[chosen].tolist())
    points.sort()
    if len(points) > _FIRST_POINTS:
        latest = points[_FIRST_POINTS - 1][0]
        run.first_points = [point for point in points if point[0] <= latest]


def _count_back(run: Run, steps: np.ndarray, kinds: np.ndarray, walls: np.ndarray,
                back: Back) -> None:
    if run.previous_step is not None:
        steps = np.concatenate([[run.previous_step[0]], steps])
        kinds = np.concatenate([[run.previous_step[1]], kinds])
        walls = np.concatenate([[0.0], walls])
    run.previous_step = (int(steps[-1]), int(kinds[-1]))
    if len(steps) < 2:
        return
    went = (steps[1:] < steps[:-1]) | ((steps[1:] == steps[:-1]) & (kinds[1:] == kinds[:-1]))
    found = np.flatnonzero(went)
    if len(found) and back.first is None:
        back.first = (int(steps[found[0]]), int(steps[found[0] + 1]),
                      float(walls[found[0] + 1]))
    back.count += len(found)


def _step_before(points: list[tuple[float, int, int]]) -> int:
    """The step a run without a logged restore starts from: the one before the first it logs,
    whatever the numbering base (a fresh run from 0 starts at -1, from 1 at 0; a run that
    resumed without saying so, at the step before its first). Logged every n steps, the first
    logged step is n steps on, or from step 0 at the most. A first point that is a step's
    start says it exactly: the step before that one."""
    if not points:
        return 0
    ordered = heapq.nsmallest(_FIRST_POINTS, points)
    first = ordered[0][1]
    if ordered[0][2]:
        return first
    gaps = [b[1] - a[1] for a, b in zip(ordered, ordered[1:]) if b[1] > a[1]]
    if not gaps:
        return 0 if first > 0 else -1
    return first - min(min(gaps), first + 1)


def surviving_steps(runs: list[Run]) -> list[float]:
    """The highest step of each run that counts: the step the next run resumes from (a run
    that died inside its restore does not say: the one after it does), or (last run)
    everything it reached."""
    last = runs[-1]
    following: list[float] = []
    resumes: float | None = None  # what the nearest later run that says resumed from
    for before, run in zip(reversed(runs[:-1]), reversed(runs[1:])):
        if not run.resumed_unknown:
            resumes = float(run.base[1])
        following.append(resumes if resumes is not None else _saved(before))
    following.reverse()
    if last.ended != "crashed":
        return following + [float("inf")]
    # a last run that crashed keeps what it saved: nothing resumed from the rest
    return following + [_saved(last)]


def _saved(run: Run) -> float:
    """What a crashed run keeps when no later run says: its last saved step."""
    return float(max([step for _, step in run.saves], default=run.base[1]))
