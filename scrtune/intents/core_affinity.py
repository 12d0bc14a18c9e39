"""Intent 1: where SCR's transfer threads may run.

PTHREAD flush starts min(CPUs, 16, files) threads per rank, and they inherit the affinity of
the thread that starts them: with ranks bound to cores they share the training rank's core
(the study's largest loss, ~10x flush time). Asynchronous flush pays only with idle cores.
"""

from __future__ import annotations

import msgspec

from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import Intent, ranks_per_node, transfer_threads


class CoreAffinity(msgspec.Struct, frozen=True, kw_only=True):
    async_flush_pays: bool
    idle_cores: tuple[int, ...]
    transfer_threads_per_rank: int
    cores_per_node: int
    ranks_per_node: int


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    per_node = ranks_per_node(stats, profile)
    cores = profile.cores_per_node
    threads = transfer_threads(stats, profile)
    if stats.cores_used:
        used = set(stats.cores_used)
        idle = tuple(c for c in range(cores) if c not in used)
        how = f"the trace records the application's cores {sorted(used)}"
        confidence = 0.9
    else:
        # Without affinity records assume one bound core per rank, the rest idle (highest ids).
        idle = tuple(range(min(per_node, cores), cores))
        how = f"no core affinity in the trace: assumed one core per rank ({per_node} per node)"
        confidence = 0.5
    pthread = "PTHREAD" in profile.flush_types  # else every async flush fails, exit 0
    pays = len(idle) >= 1 and pthread
    evidence = (
        how,
        f"{cores} cores per node ({profile.source.split(';')[0]}), {len(idle)} idle",
        f"PTHREAD flush would start {threads} transfer threads per rank "
        "(min(CPUs, 16, files per rank))",
        "asynchronous flush pays: transfer threads go to the idle cores" if pays else
        "no idle core: transfer threads would compete with the ranks; flush synchronously"
        if pthread else f"this SCR/AXL build has no PTHREAD transfer (flush_types "
        f"{list(profile.flush_types)}): an asynchronous flush would fail silently; flush "
        "synchronously",
    )
    value = CoreAffinity(async_flush_pays=pays, idle_cores=idle,
                         transfer_threads_per_rank=threads, cores_per_node=cores,
                         ranks_per_node=per_node)
    return Intent(name="core_affinity", scope="node", confidence=confidence, evidence=evidence,
                  value=value)
