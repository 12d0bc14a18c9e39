"""A long job's blocking time settled against the interval it is taken at (model.py's, split
out so that the model stays readable): the interval grows with the blocking time, and an
asynchronous flush blocks less the longer the interval, so each has one consistent answer."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from scrtune.intents.overlap import steady_blocking_s

if TYPE_CHECKING:  # the model's record; model.py imports this module
    from scrtune.study.model import Config

Cadence = Callable[[float], float]  # the interval a long job checkpoints at, given its blocking

def settled(base: float, flush: float, config: Config, cadence: Cadence,
            checkpoints: int = 0) -> float:
    """The blocking time b with b = base + flush blocking at the interval for b. An
    asynchronous flush blocks less the longer the interval, and the interval grows with b:
    the excess is decreasing in b, so bisection finds the one answer."""
    if not config.flush_async:
        return base + _flush_blocking(flush, config, 0.0, checkpoints)
    low, high = base, base + flush
    if cadence(low) == cadence(high):  # the interval does not move with b (a timed run's)
        return base + _flush_blocking(flush, config, cadence(low), checkpoints)

    return _fixed_point(lambda b: base + _flush_blocking(flush, config, cadence(b), checkpoints),
                        low, high)


def settled_async(base: float, flush: float, streaming_s: float, slowdown: float,
                  config: Config, cadence: Cadence, dispatch: float = 0.0) -> float:
    """A long job's blocking b with asynchronous flushes: what they leave a checkpoint of
    `base` s at the interval for b (overlap.steady_blocking_s: a timed run's model, settled).
    Less the longer the interval, and the interval grows with b: bisection finds the one b."""
    def at(b: float) -> float:
        return steady_blocking_s(base, flush, streaming_s, cadence(b), slowdown,
                                 config.flush_every, config.cache_size, dispatch)

    low, high = base, at(base)
    if cadence(low) == cadence(high):  # the interval does not move with b (the job's own)
        return high
    return _fixed_point(at, low, high)


def _fixed_point(blocking_at: Callable[[float], float], low: float, high: float) -> float:
    """The b in [low, high] with b = blocking_at(b), blocking_at decreasing in b: by
    bisection, the one answer."""
    for _ in range(60):
        middle = (low + high) / 2
        low, high = (middle, high) if blocking_at(middle) > middle else (low, middle)
    return high


def _flush_blocking(flush: float, config: Config, compute_s: float, checkpoints: int = 0
                    ) -> float:
    """Per checkpoint. In steady state a flush every k-th checkpoint blocks for 1/k of a
    synchronous flush, or (asynchronous) for what outlasts the compute of its k intervals.
    A run of N checkpoints flushes floor(N/k) of them inside SCR_Complete_output (the rest at
    SCR_Finalize), and an asynchronous flush blocks a later checkpoint, so only the
    floor((N-1)/k) flushes before the last one can."""
    every = max(config.flush_every, 1)
    if not config.flush_async:
        inside = checkpoints // every / checkpoints if checkpoints else 1 / every
        return flush * inside
    inside = (checkpoints - 1) // every / checkpoints if checkpoints else 1 / every
    # an asynchronous flush blocks the next checkpoint only when it outlasts the compute
    return max(0.0, flush - max(compute_s, 0.0) * every) * inside
