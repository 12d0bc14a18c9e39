"""Intent 7: how many checkpoints to keep on the parallel file system, and how to start.

SCR_PREFIX_SIZE=0 (the default) keeps every flushed checkpoint: a long run fills the file
system. Keeping two leaves one to fall back to if the newest is damaged. Restart defaults
(SCR_DISTRIBUTE=1, no purge) suit a job that restarts on the same nodes."""

from __future__ import annotations

import msgspec

from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import Intent
from scrtune.units import human_bytes

KEEP = 2


class Retention(msgspec.Struct, frozen=True, kw_only=True):
    prefix_size: int
    cache_purge: bool
    distribute: bool
    poststage: bool  # let flushes finish after the job (SCR_FLUSH_POSTSTAGE): BBAPI only


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    evidence = [f"keep the newest {KEEP} checkpoints on the parallel file system"]
    if stats.ckpt_bytes:
        evidence.append(f"{human_bytes(KEEP * stats.ckpt_bytes)} at most, instead of every "
                        "checkpoint of the run")
    evidence.append("restart on the same nodes assumed: cached checkpoints are redistributed, "
                    "not purged")
    poststage = "BBAPI" in profile.flush_types
    evidence.append("BBAPI stores: the last flushes may finish after the job (poststage)"
                    if poststage else "no BBAPI stores: SCR_FLUSH_POSTSTAGE would do nothing "
                    "(SCR waits for flushes in SCR_Finalize)")
    return Intent(name="retention", scope="job", confidence=0.5, evidence=tuple(evidence),
                  value=Retention(prefix_size=KEEP, cache_purge=False, distribute=True,
                                  poststage=poststage))
