"""Intents: pure functions from workload statistics and a system profile to what the workload
needs, each with its scope, confidence and evidence. scr_config maps them to SCR settings."""

from __future__ import annotations

from scrtune.intents import (
    cache,
    core_affinity,
    interval,
    redundancy,
    retention,
    striping,
    write_sizes,
)
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import Intent

DERIVERS = (core_affinity.derive, write_sizes.derive, redundancy.derive, striping.derive,
            cache.derive)


def derive_all(stats: WorkloadStats, profile: SystemProfile) -> dict[str, Intent]:
    intents = {intent.name: intent for intent in (derive(stats, profile) for derive in DERIVERS)}
    # the interval is for the checkpoint the cache choice makes (a cached one pays its encode):
    # given that choice rather than weighing cache and bypass a second time
    caching = not intents["cache_or_bypass"].value.bypass  # type: ignore[attr-defined]
    for intent in (interval.derive(stats, profile, caching), retention.derive(stats, profile)):
        intents[intent.name] = intent
    return intents
