"""Intent 1: where SCR's transfer threads may run.

PTHREAD flush starts min(CPUs, 16, files) threads per rank, and they inherit the affinity of
the thread that starts them: with ranks bound to cores they share the training rank's core,
and the flush takes longer by the profile's `busy_core_slowdown` (its `scr_rates` one when
calibrated through SCR; the corrected study saw ~1.8x on Corona;
on the real SCR here, a flush that mostly waits on the disk was ~1.5x slower). With idle
cores, asynchronous flush runs there. Without, it still pays when the slowed flush costs the
next checkpoint less than a synchronous flush blocks: max(0, flush x slowdown - compute) against
flush (measured on the real SCR: async with bound threads beat sync by 3.6x in blocking time).
"""

from __future__ import annotations

import msgspec

from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import (
    Intent,
    compute_gap_s,
    flush_s,
    ranks_per_node,
    transfer_threads,
)
from scrtune.units import human_seconds, plural


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
    shared = "" if idle or not pthread else _shared_cores_verdict(stats, profile)
    pays = pthread and (len(idle) >= 1 or shared.startswith("asynchronous"))
    evidence = (
        how,
        f"{plural(cores, 'core')} per node ({profile.source.split(';')[0]}), {len(idle)} idle",
        f"PTHREAD flush would start {plural(threads, 'transfer thread')} per rank "
        "(min(CPUs, 16, files per rank))",
        "asynchronous flush pays: transfer threads go to the idle cores" if pays and idle else
        shared if pthread else f"this SCR/AXL build has no PTHREAD transfer (flush_types "
        f"{list(profile.flush_types)}): an asynchronous flush would fail silently; flush "
        "synchronously",
    )
    value = CoreAffinity(async_flush_pays=pays, idle_cores=idle,
                         transfer_threads_per_rank=threads, cores_per_node=cores,
                         ranks_per_node=per_node)
    return Intent(name="core_affinity", scope="node", confidence=confidence, evidence=evidence,
                  value=value)


def _shared_cores_verdict(stats: WorkloadStats, profile: SystemProfile) -> str:
    """No idle core: whether a flush slowed by sharing the ranks' cores still blocks less
    than a synchronous one. Starts with "asynchronous" when it does."""
    flush = flush_s(stats, profile)
    # the compute the flush hides behind: the interval the recommendation sets (issue 48), or
    # the job's own when it keeps its cadence
    compute = compute_gap_s(stats, profile, stats.ckpt_dur_s) if stats.checkpoints else 0.0
    if flush <= 0 or compute <= 0:
        return "no idle core, and no flush time or compute gap to weigh: flush synchronously"
    slowed = flush * profile.flush_slowdown()
    blocks = max(0.0, slowed - compute)
    said = (f"no idle core: a flush of {human_seconds(flush)} takes {human_seconds(slowed)} "
            f"beside the ranks (x{profile.flush_slowdown():g}), within "
            f"{human_seconds(compute)} of compute")
    if blocks < flush:
        return f"asynchronous flush pays anyway: {said}, blocking {human_seconds(blocks)} " \
               f"instead of {human_seconds(flush)}"
    return f"{said}: it would block {human_seconds(blocks)}, a synchronous flush " \
           f"{human_seconds(flush)}; flush synchronously"
