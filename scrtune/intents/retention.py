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
    poststage: bool  # SCR_FLUSH_POSTSTAGE: never, while SCR v3.1.0 crashes with it


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    evidence = [f"keep the newest {KEEP} checkpoints on the parallel file system"]
    if stats.ckpt_bytes:
        evidence.append(f"{human_bytes(KEEP * stats.ckpt_bytes)} at most, instead of every "
                        "checkpoint of the run")
    evidence.append("each checkpoint must go to its own directory (ckpt.N/...): SCR deletes a "
                    "retired checkpoint's files, which are the newest one's when file names are "
                    "reused (seen on the real v3.1.0)")
    evidence.append("restart on the same nodes assumed: cached checkpoints are redistributed, "
                    "not purged")
    # SCR_FLUSH_POSTSTAGE=1 segfaults v3.1.0 at the first asynchronous flush, whatever the flush
    # type (scr-observed.md): SCR_Finalize waits for the last flushes instead
    poststage = False
    evidence.append("BBAPI stores, but SCR_FLUSH_POSTSTAGE crashes SCR v3.1.0 (a freed pointer "
                    "in scr_flush_async_start): SCR_Finalize waits for the last flushes"
                    if "BBAPI" in profile.flush_types else "no BBAPI stores: SCR_Finalize "
                    "waits for the last flushes")
    return Intent(name="retention", scope="job", confidence=0.5, evidence=tuple(evidence),
                  value=Retention(prefix_size=KEEP, cache_purge=False, distribute=True,
                                  poststage=poststage))
