"""The failure physics benchmarks/redundancy_physics.py checks the intents against: a job's
checkpoints, node failures as a Poisson process, restarts, SCR_Init's rebuild, and what a
failure the cache cannot recover from costs. Shares none of the intents' formulas but Daly's
interval (the intervals simulated are the intents')."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from scrtune.intents.redundancy import RS_PARITY, Candidate

RESTART_S = 120.0  # relaunch in the allocation and SCR_Init (the rebuild is added per scheme)
FAILURES = 4000  # simulated per candidate and profile


def _tolerated(scheme: str) -> int:
    return {"PARTNER": 1, "XOR": 1, "RS": RS_PARITY}.get(scheme.partition("/")[0], 0)


@dataclass(frozen=True)
class _Job:
    """A candidate's job as the simulations step through it."""
    scheme: str  # SINGLE, PARTNER, XOR, RS or SINGLE+XOR
    xor_every: int  # a multi-level pattern's XOR cycle; 0 for the others
    interval_s: float  # compute between checkpoints
    segment_s: float  # the interval and the checkpoint with its encode
    others_mean: float  # storage losses expected in the set before SCR_Init's rebuild

    @classmethod
    def of(cls, candidate: Candidate, total_s: float, set_size: int, node_mtbf_s: float,
           loss_share: float) -> _Job:
        scheme, _, every_text = candidate.scheme.partition("/")
        return cls(scheme, int(every_text) if every_text else 0, candidate.interval_s,
                   candidate.interval_s + total_s,
                   _others_mean(scheme, set_size, total_s, node_mtbf_s, loss_share))


def simulate(candidate: Candidate, cost_s: float, encode_s: float, nodes: int, set_size: int,
             node_mtbf_s: float, loss_share: float, lag: float, seed: int) -> float:
    """Wasted share of wall time of a job that checkpoints every candidate.interval_s."""
    draw, job = random.Random(seed), _Job.of(candidate, cost_s + encode_s, set_size,
                                             node_mtbf_s, loss_share)
    interval, every = job.interval_s, job.xor_every
    elapsed = useful = 0.0
    since_xor = 0  # checkpoints since the last XOR level (multi-level)
    for _ in range(FAILURES):
        up = draw.expovariate(nodes / node_mtbf_s)
        done = int(up // job.segment_s)
        elapsed += up + RESTART_S
        useful += done * interval
        since_xor = (since_xor + done) % every if every else 0
        lost = _cache_lost(draw, job.scheme, loss_share, job.others_mean)
        if lost is None:
            continue  # the node's storage survived: the newest cached checkpoint restores
        if lost:
            useful -= lag * interval  # from the parallel file system
        elif every:
            useful -= since_xor * interval  # back to the last XOR level
            since_xor = 0
    return 1.0 - useful / elapsed


def simulate_flushes(candidate: Candidate, cost_s: float, encode_s: float, flush_s: float,
                     every: int, nodes: int, set_size: int, node_mtbf_s: float,
                     loss_share: float, seed: int) -> float:
    """Wasted share of wall time of a job that checkpoints every candidate.interval_s and
    flushes every `every`-th checkpoint synchronously (`flush_s` each): the checkpoints since
    the last finished flush are tracked across restarts, and a failure the cache cannot
    recover from (as in `simulate`) sends the job back to the last flushed one. A multi-level
    pattern's node loss goes back to its last XOR level, as in `simulate`."""
    draw, job = random.Random(seed), _Job.of(candidate, cost_s + encode_s, set_size,
                                             node_mtbf_s, loss_share)
    interval, xor_every = job.interval_s, job.xor_every
    elapsed = useful = 0.0
    unflushed = 0  # checkpoints since the last finished flush, over restarts from the cache
    since_xor = 0  # checkpoints since the last XOR level (multi-level)
    for _ in range(FAILURES):
        up = draw.expovariate(nodes / node_mtbf_s)
        elapsed += up + RESTART_S
        done, unflushed = _checkpoints_done(up, unflushed, every, job.segment_s, flush_s)
        useful += done * interval
        since_xor = (since_xor + done) % xor_every if xor_every else 0
        lost = _cache_lost(draw, job.scheme, loss_share, job.others_mean)
        if lost:
            useful -= unflushed * interval  # back to the last flushed checkpoint
            unflushed = since_xor = 0
        elif lost is False and xor_every:
            useful -= since_xor * interval  # back to the last XOR level
            unflushed = max(unflushed - since_xor, 0)
            since_xor = 0
    return 1.0 - useful / elapsed


def _checkpoints_done(up: float, unflushed: int, every: int, segment: float, flush_s: float
                      ) -> tuple[int, int]:
    """Checkpoints a run of `up` seconds completes, and how many are then unflushed: the next
    flush finishes after every - unflushed segments and its flush, then whole cycles of
    `every` segments and a flush, then part of one (a flush cut short leaves all unflushed)."""
    to_flush = (every - unflushed) * segment + flush_s
    if up < to_flush:
        done = min(every - unflushed, int(up // segment))
        return done, unflushed + done
    left = up - to_flush
    cycle = every * segment + flush_s
    cycles = int(left // cycle)
    part = min(every, int((left - cycles * cycle) // segment))
    return every - unflushed + cycles * every + part, part


def _others_mean(scheme: str, set_size: int, total_s: float, node_mtbf_s: float,
                 loss_share: float) -> float:
    """Storage losses expected among the rest of the failed node's set until SCR_Init has
    rebuilt its files (the restart and the checkpoint's encode)."""
    group = 2 if scheme == "PARTNER" else set_size
    return (group - 1) * loss_share * (RESTART_S + total_s) / node_mtbf_s


def _cache_lost(draw: random.Random, scheme: str, loss_share: float,
                others_mean: float) -> bool | None:
    """What one failure does to the cached checkpoint: None, the node's storage survived;
    False, it was lost and the set rebuilds it; True, only the parallel file system's copy
    is left (SINGLE, or more losses in the set before the rebuild than it tolerates)."""
    if draw.random() >= loss_share:
        return None
    others = _poisson(draw, others_mean)  # more losses in the set before the rebuild
    tolerated = _tolerated(scheme)
    return scheme == "SINGLE" or (tolerated > 0 and others >= tolerated)


def _poisson(draw: random.Random, mean: float) -> int:
    limit, count, product = math.exp(-mean), 0, draw.random()
    while product > limit:
        count += 1
        product *= draw.random()
    return count
