"""Intent 7: how many checkpoints to keep on the parallel file system, and how to start.

SCR_PREFIX_SIZE=0 (the default) keeps every flushed checkpoint: a long run fills the file
system. Keeping two leaves one to fall back to if the newest is damaged, but SCR deletes a
retired checkpoint's files by name: where checkpoints reuse file names (every one written to
`ckpt/model.pt`) that deletes the newest checkpoint and a relaunch starts over (seen on the real
v3.1.0 in bypass mode). So retention is recommended only when the trace shows each checkpoint
writing files of its own; before there is such evidence SCR keeps every checkpoint. Restart
defaults (SCR_DISTRIBUTE=1, no purge) suit a job that restarts on the same nodes."""

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
    keep = KEEP if stats.ckpt_files_distinct else 0
    if keep:
        evidence = [f"keep the newest {KEEP} checkpoints on the parallel file system: the "
                    "trace shows each checkpoint writing files of its own"]
        if stats.ckpt_bytes:
            evidence.append(f"{human_bytes(KEEP * stats.ckpt_bytes)} at most, instead of "
                            "every checkpoint of the run")
    else:
        evidence = ["keep every checkpoint (SCR's default): "
                    + ("the trace shows checkpoints writing the same files again, which SCR "
                       "would delete with a retired checkpoint"
                       if stats.checkpoints > 1 and stats.has_sizes else
                       "the trace does not yet show each checkpoint writing files of its own")
                    + "; SCR_PREFIX_SIZE only once it does (ckpt.N/...)"]
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
                  value=Retention(prefix_size=keep, cache_purge=False, distribute=True,
                                  poststage=poststage))
