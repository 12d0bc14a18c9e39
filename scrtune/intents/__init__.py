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
            cache.derive, interval.derive, retention.derive)


def derive_all(stats: WorkloadStats, profile: SystemProfile) -> dict[str, Intent]:
    return {intent.name: intent for intent in (derive(stats, profile) for derive in DERIVERS)}
