"""Intent 6: how often to checkpoint, how often to flush, how many cached checkpoints.

The interval is Daly's higher-order optimum from the measured blocking checkpoint cost and the
job's MTBF (node MTBF / nodes): SCR_CHECKPOINT_SECONDS. With a cache, flushing every k-th
checkpoint spreads a flush of F seconds over k intervals, and leaves the parallel file
system's copy up to k checkpoints behind (model.flush_every weighs the two, at the cadence the
job keeps, against the failures the redundancy scheme the intent chooses cannot recover from
the cache: with SINGLE every one that loses a node, with PARTNER a loss of both partners
before the rebuild); SCR_CACHE_SIZE >= 2 keeps the next checkpoint from waiting on a flush of the
previous one.
"""

from __future__ import annotations

import math

import msgspec

from scrtune.goodput.intervals import daly, expected_waste, young
from scrtune.intents import cache, redundancy
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import (
    MAX_SECONDS,
    MIN_SECONDS,
    Intent,
    compute_gap_s,
    kept_cadence_seconds,
    nodes,
    recommended_interval_s,
)
from scrtune.intents.model import flush_s as flush_time_s
from scrtune.intents.writes import planned_cost
from scrtune.units import human_seconds, ordinal, plural

MEASURABLE_COST_S = 1e-6  # below a microsecond the trace cannot tell a cost from nothing


class Cadence(msgspec.Struct, frozen=True, kw_only=True):
    checkpoint_seconds: int | None
    young_s: float | None
    daly_s: float | None
    waste_share: float | None
    flush_every: int
    cache_size: int


def derive(stats: WorkloadStats, profile: SystemProfile, caching: bool | None = None
           ) -> Intent:
    """caching: the cache intent's choice, when already derived (else weighed here)."""
    count = nodes(stats, profile)
    mtbf = profile.node_mtbf_s / count
    if stats.checkpoints == 0 or stats.ckpt_dur_s < MEASURABLE_COST_S:
        why = "no checkpoint in the trace" if stats.checkpoints == 0 else \
            "checkpoints too short to measure"
        return Intent(name="interval", scope="job", confidence=0.0,
                      evidence=(f"{why}: no cost to weigh against failures",),
                      value=Cadence(checkpoint_seconds=None, young_s=None, daly_s=None,
                                    waste_share=None, flush_every=1, cache_size=2))
    scheme = redundancy.choose(stats, profile)
    # a cached checkpoint also pays the encode of the scheme set beside it: the interval is
    # Daly's for that cost, the one the scheme and its flush cadence were weighed at, and the
    # waste is the scheme's (issue 48: SCR_CHECKPOINT_SECONDS left the encode out, so a
    # PARTNER job checkpointed twice as often as the interval its flush cadence assumed)
    cached = cache.caches(stats, profile) if caching is None else caching
    encode = scheme.encode_s if cached else 0.0
    # and, on a build that flushes only synchronously, its share of the scheme's flushes
    flushing = scheme.flush_blocking_s if cached else 0.0
    planned = planned_cost(stats, profile)
    written = planned.cache_s if cached else planned.bypass_s
    cost = written + encode + flushing
    restart = planned.restart_s if cached else planned.bypass_restart_s
    optimum = daly(cost, mtbf)
    flush_s = flush_time_s(stats, profile)
    # what SCR_CHECKPOINT_SECONDS sets: Daly's, or the job's own gap when it keeps its cadence
    # (need_checkpoint() then agrees with it, should the job ask)
    cadence = scheme.interval_s if cached else compute_gap_s(stats, profile, cost)
    every = scheme.flush_every
    waste = scheme.waste_share if cached else \
        expected_waste(cadence, cost, mtbf, restart)
    evidence = [
        ("blocking checkpoint cost " + (
            f"{stats.ckpt_dur_s:.3f} s ({stats.ckpt_dur_source()})"
            if (planned.cache_measured if cached else planned.bypass_measured) else
            f"{written:.3f} s, modelled {'cached' if cached else 'in bypass'}"
            f" at {plural(count, 'node')} ({planned.note})")
         + (f" + {scheme.scheme}'s encode {encode:.3f} s" if encode else "")
         + (f" + {flushing:.3f} s of a synchronous flush every "
            f"{ordinal(scheme.flush_every)} checkpoint" if flushing else "")),
        f"job MTBF {human_seconds(mtbf)} (node MTBF {human_seconds(profile.node_mtbf_s)} / "
        f"{plural(count, 'node')})",
    ]
    at_daly_s = recommended_interval_s(optimum)
    at_daly = scheme.waste_at(cost, at_daly_s, restart, mtbf) if cached else \
        expected_waste(at_daly_s, cost, mtbf, restart)
    seconds = kept_cadence_seconds(cadence) if stats.job_interval_s > 0 else \
        int(recommended_interval_s(cadence))
    evidence.append(_cadence_said(stats, cost, mtbf, cadence, seconds, waste, at_daly))
    if stats.interval_s and stats.job_interval_s <= 0:
        evidence.append(f"the trace checkpointed every {human_seconds(stats.interval_s)}; "
                        f"following this interval it checkpoints every "
                        f"{human_seconds(cadence)}, at which flush cadence and redundancy are "
                        "weighed")
    if flush_s:
        evidence.append(_flush_said(profile, scheme, flush_s, every * (cadence + cost)))
    if optimum > MAX_SECONDS and stats.job_interval_s <= 0:
        evidence.append(f"capped at {human_seconds(MAX_SECONDS)}: a failure this rare leaves "
                        "the expected waste flat, and one crash would cost more")
    return Intent(name="interval", scope="job", confidence=0.6, evidence=tuple(evidence),
                  value=Cadence(checkpoint_seconds=seconds,
                                young_s=young(cost, mtbf), daly_s=optimum,
                                waste_share=waste, flush_every=every, cache_size=2))


def _flush_said(profile: SystemProfile, scheme: redundancy.Candidate, flush_s: float,
                behind_s: float) -> str:
    """The flush cadence, from the failures the scheme cannot recover from the cache."""
    loss = (f"{100 * profile.node_loss_share:.0f}% of failures losing a node"
            if scheme.fatal_share >= profile.node_loss_share else
            f"{100 * scheme.fatal_share:.2g}% of failures losing what {scheme.scheme} "
            "cannot rebuild")
    every = scheme.flush_every
    return (f"a flush takes {human_seconds(flush_s)}; weighed against {loss}: flush every "
            + ("checkpoint" if every == 1 else f"{ordinal(every)} checkpoint")
            + f" (the parallel file system's copy at most {human_seconds(behind_s)} behind)")


def _cadence_said(stats: WorkloadStats, cost: float, mtbf: float, cadence: float,
                  seconds: int, waste: float, at_optimum: float) -> str:
    """Where the cadence comes from: Daly's optimum, or the job's own, against Daly's."""
    optimum = daly(cost, mtbf)
    if stats.job_interval_s <= 0:
        # the interval set in whole seconds, not rounded again beside Daly's (issue 48: "Daly
        # 6.3 min ... at 6.2 min" for 375.4 s and the 375 s set); "the bound" only where
        # Daly's lies outside what SCR_CHECKPOINT_SECONDS may be
        bound = " (the bound)" if not MIN_SECONDS <= optimum <= MAX_SECONDS else ""
        return (f"Young {human_seconds(young(cost, mtbf))}, Daly {human_seconds(optimum)} "
                f"between checkpoints; expected waste {100 * waste:.2f}% at the "
                f"{cadence:,.0f} s set{bound}")
    asked = (f"SCR_CHECKPOINT_SECONDS {seconds}, so that need_checkpoint(), should the job "
             "ask it, says yes at each of its checkpoints") if cadence > seconds else \
        (f"SCR_CHECKPOINT_SECONDS {seconds}, its least: need_checkpoint(), should the job ask "
         f"it, says yes at every {ordinal(max(2, math.ceil(seconds / cadence)))} checkpoint only")
    return (f"the job checkpoints every {human_seconds(stats.job_interval_s)} on its own "
            f"({human_seconds(cadence)} of compute between checkpoints), at which flush cadence "
            f"and redundancy are weighed: expected waste {100 * waste:.2f}%; at Daly's "
            f"{human_seconds(recommended_interval_s(optimum))} {100 * at_optimum:.2f}%; "
            + asked)
