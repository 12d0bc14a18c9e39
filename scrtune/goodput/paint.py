"""Painting a job's timeline: every elementary interval to one bucket, in numpy.

The rule (calculator.py's docstring): the highest-priority recorded interval covering a moment
claims it; else compute, when a surviving step interval holds it; else other. Within each
surviving interval, the first steps x ideal seconds of its compute are goodput, the rest
slowdown. A long job has a step interval per step, so this runs as array operations over the
interval ends, not as a Python loop per step.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import numpy as np

GOODPUT, SLOWDOWN, OTHER = -1, -2, -3  # codes beside the priority ranks 0, 1, ...


@dataclass(frozen=True)
class Painted:
    """Merged segments as arrays: start_s, end_s and code (a priority rank, or one of
    GOODPUT, SLOWDOWN, OTHER); short_steps: some interval held less compute than its steps
    x ideal."""

    start_s: np.ndarray
    end_s: np.ndarray
    code: np.ndarray
    short_steps: bool


PIECE_ROWS = 1 << 16  # surviving intervals painted at a time


def paint_pieces(start: float, end: float, candidates: list[tuple[float, float, int]],
                 pair_chunks: Iterable[np.ndarray], ideal: float, ranks: int,
                 background: tuple[int, ...] = ()) -> Painted:
    """paint(), a piece of the timeline at a time: each piece ends where the next piece's
    first surviving interval starts, so no interval is split, and the recorded intervals are
    cut at the pieces' ends. Neighbouring pieces' segments are merged as within one."""
    cand = np.array(candidates, dtype=np.float64).reshape(-1, 3)
    parts: list[Painted] = []
    pieces = _pieces(pair_chunks)
    pairs = next(pieces, None)
    piece_start = start
    while True:
        following = next(pieces, None)
        piece_end = end if following is None else min(max(float(following["start"][0]),
                                                           piece_start), end)
        meets = (cand[:, 0] < piece_end) & (cand[:, 1] > piece_start)
        clipped = cand[meets].copy()
        clipped[:, 0] = np.maximum(clipped[:, 0], piece_start)
        clipped[:, 1] = np.minimum(clipped[:, 1], piece_end)
        rows = np.empty((0, 3)) if pairs is None else np.column_stack(
            [pairs["start"], pairs["end"], pairs["steps"]])
        parts.append(paint(piece_start, piece_end, clipped, rows, ideal, ranks, background))
        if following is None:
            break
        pairs, piece_start = following, piece_end
    return _merged(np.concatenate([p.start_s for p in parts]),
                   np.concatenate([p.end_s for p in parts]),
                   np.concatenate([p.code for p in parts]), any(p.short_steps for p in parts))


def _pieces(chunks: Iterable[np.ndarray]) -> Iterator[np.ndarray]:
    """The intervals in pieces of about PIECE_ROWS."""
    held: list[np.ndarray] = []
    rows = 0
    for chunk in chunks:
        held.append(chunk)
        rows += len(chunk)
        if rows >= PIECE_ROWS:
            yield np.concatenate(held)
            held, rows = [], 0
    if rows:
        yield np.concatenate(held)


def paint(start: float, end: float, candidates: list[tuple[float, float, int]],
          pairs, ideal: float, ranks: int, background: tuple[int, ...] = ()) -> Painted:
    """candidates: (start, end, priority rank), rows of an array or tuples; pairs: surviving
    (start, end, steps), likewise. `background`: ranks of phases that may run beside the
    steps (data loading, custom): inside a surviving interval that took no longer than its
    steps at the ideal time, they overlapped the computation and are goodput."""
    cand = np.array(candidates, dtype=np.float64).reshape(-1, 3)
    cand = cand[cand[:, 1] > cand[:, 0]]
    spans = np.array(pairs, dtype=np.float64).reshape(-1, 3)
    spans = spans[spans[:, 1] > spans[:, 0]]
    times = np.concatenate([cand[:, 0], cand[:, 1], spans[:, 0], spans[:, 1]])
    slots = np.concatenate([cand[:, 2], cand[:, 2], np.full(2 * len(spans), ranks)]).astype(
        np.int64)
    deltas = np.concatenate([np.ones(len(cand)), -np.ones(len(cand)), np.ones(len(spans)),
                             -np.ones(len(spans))]).astype(np.int64)
    order = np.argsort(times, kind="stable")
    times, slots, deltas = times[order], slots[order], deltas[order]
    bounds = np.unique(np.concatenate([times, [start, end]]))
    bounds = bounds[(bounds >= start) & (bounds <= end)]
    left, right = bounds[:-1], bounds[1:]
    applied = np.searchsorted(times, left, side="right")  # changes at or before each left
    code = np.full(len(left), OTHER, dtype=np.int64)
    free = np.ones(len(left), dtype=bool)
    in_span = np.zeros(len(left), dtype=bool)
    for slot in range(ranks + 1):  # in priority order; the last slot is compute (GOODPUT here)
        running = np.concatenate([[0], np.cumsum(np.where(slots == slot, deltas, 0))])
        in_span = running[applied] > 0
        claimed = free & in_span
        code[claimed] = slot if slot < ranks else GOODPUT
        free &= ~claimed
    beside = np.isin(code, background) & in_span if background else np.zeros(len(code), bool)
    return _split_compute(left, right, code, pairs, ideal, beside)


def _split_compute(left: np.ndarray, right: np.ndarray, code: np.ndarray,
                   pairs, ideal: float, beside: np.ndarray) -> Painted:
    rows = np.asarray(pairs, dtype=np.float64).reshape(-1, 3)
    order = np.lexsort((np.arange(len(rows)), rows[:, 1], rows[:, 0]))
    rows = rows[order]  # by start, then end; an interval given twice keeps its last steps
    last = np.concatenate([(rows[1:, 0] != rows[:-1, 0]) | (rows[1:, 1] != rows[:-1, 1]),
                           [True]])[:len(rows)]
    key_start, key_end, budget = rows[last, 0], rows[last, 1], rows[last, 2] * ideal
    if beside.any():
        code = _overlapped(left, right, code, beside, key_start, key_end, budget)
    computing = np.flatnonzero(code == GOODPUT)
    owner = _owners(key_start, key_end, left[computing], right[computing])
    length = right[computing] - left[computing]
    good = np.clip(budget[owner] - _used_before(owner, length), 0.0, length)
    used = np.bincount(owner, weights=good, minlength=len(budget))
    short = bool(np.any(budget - used > 1e-9))
    # each piece becomes one or two: its own (or goodput), then slowdown after the goodput
    split = left[computing] + good
    first_start, first_end, first_code = left.copy(), right.copy(), code.copy()
    first_end[computing] = split
    keep_first = np.ones(len(left), dtype=bool)
    keep_first[computing] = good > 0
    second_keep = split < right[computing]
    starts = np.concatenate([first_start[keep_first], split[second_keep]])
    ends = np.concatenate([first_end[keep_first], right[computing][second_keep]])
    codes = np.concatenate([first_code[keep_first], np.full(int(second_keep.sum()), SLOWDOWN)])
    place = np.concatenate([2 * np.flatnonzero(keep_first), 2 * computing[second_keep] + 1])
    order = np.argsort(place, kind="stable")
    return _merged(starts[order], ends[order], codes[order], short)


def _overlapped(left: np.ndarray, right: np.ndarray, code: np.ndarray, beside: np.ndarray,
                key_start: np.ndarray, key_end: np.ndarray, budget: np.ndarray) -> np.ndarray:
    """`code` with the background phases of each surviving interval made compute where the
    interval, phases included, took no longer than its steps at the ideal time."""
    phases, computing = np.flatnonzero(beside), np.flatnonzero(code == GOODPUT)
    phase_owner = _owners(key_start, key_end, left[phases], right[phases])
    taken = np.bincount(phase_owner, weights=right[phases] - left[phases],
                        minlength=len(budget))
    if len(computing):
        owner = _owners(key_start, key_end, left[computing], right[computing])
        taken += np.bincount(owner, weights=right[computing] - left[computing],
                             minlength=len(budget))
    overlapped = taken <= budget + 1e-9
    code = code.copy()
    code[phases[overlapped[phase_owner]]] = GOODPUT
    return code


def _used_before(owner: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Compute time of the earlier pieces of each piece's interval (pieces in time order, an
    interval's together), summed piece by piece as they come: most intervals are one piece,
    and a difference of running totals over a long job would leave rounding slivers."""
    used = np.zeros(len(owner))
    later = np.flatnonzero(owner[1:] == owner[:-1]) + 1  # not the first piece of its interval
    if len(later):
        sums, lengths = used.tolist(), length.tolist()
        for index in later.tolist():
            sums[index] = sums[index - 1] + lengths[index - 1]
        used = np.array(sums)
    return used


def _owners(key_start: np.ndarray, key_end: np.ndarray, left: np.ndarray,
            right: np.ndarray) -> np.ndarray:
    """The surviving interval holding each compute piece (the earliest-starting, if several
    do). Intervals rarely overlap: then one search does; else each piece walks back."""
    index = np.searchsorted(key_start, left, side="right") - 1
    if len(key_start) < 2 or not np.any(key_start[1:] < key_end[:-1]):
        if np.all(index >= 0) and np.all(right <= key_end[np.maximum(index, 0)]):
            return index
    starts, ends = key_start.tolist(), key_end.tolist()
    out = np.empty(len(left), dtype=np.int64)
    for piece, (piece_start, piece_end) in enumerate(zip(left.tolist(), right.tolist())):
        found = None
        at = bisect.bisect_right(starts, piece_start) - 1
        while at >= 0:
            if piece_end <= ends[at]:
                found = at
            elif found is not None:
                break
            at -= 1
        assert found is not None, "compute outside every surviving interval"
        out[piece] = found
    return out


def _merged(starts: np.ndarray, ends: np.ndarray, codes: np.ndarray, short: bool) -> Painted:
    """Neighbours of one bucket that touch are one segment."""
    if not len(starts):
        return Painted(starts, ends, codes, short)
    new = np.concatenate([[True], (codes[1:] != codes[:-1]) | (starts[1:] != ends[:-1])])
    heads = np.flatnonzero(new)
    tails = np.concatenate([heads[1:] - 1, [len(starts) - 1]])
    return Painted(starts[heads], ends[tails], codes[heads], short)
