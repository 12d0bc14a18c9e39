"""A checkpoint's blocking write to the node-local cache and to the parallel file system, as
the cache intent, the core-affinity intent and the study's crossover weigh it."""

from __future__ import annotations

import math
from dataclasses import dataclass

from scrtune.intents.inputs import StorageTier, SystemProfile, WorkloadStats
from scrtune.intents.model import busiest_node_bytes, nodes


def aggregate_bw(tier: StorageTier, node_count: int, bytes_per_s: float = 0.0) -> float:
    """Aggregate bandwidth at `node_count` nodes, scaling by a factor per doubling: of one
    node's `bytes_per_s` (default: the tier's write rate)."""
    return (bytes_per_s or tier.write_bytes_per_s) \
        * tier.scaling_per_doubling ** math.log2(max(node_count, 1))


@dataclass(frozen=True)
class WriteTimes:
    """One checkpoint's blocking write, seconds, each with the write calls' latency in it."""
    cache_s: float
    bypass_s: float
    cache_calls_s: float  # a rank's write calls at the node-local store's call latency
    bypass_calls_s: float  # the same calls at the parallel file system's


def write_times(ckpt_bytes: float, profile: SystemProfile, node_count: int,
                calls_per_rank: float = 0.0) -> WriteTimes | None:
    """Seconds to write `ckpt_bytes` (all nodes' together) to the node-local caches and to
    the parallel file system, each of a rank's `calls_per_rank` write calls paying the tier's
    measured per-call latency (the study's model counts them too: under a 2 ms call a rank's
    256 small metadata writes were half a second of every bypass checkpoint, issue 48).
    Calibrated (`scrtune calibrate`), SCR's own rates decide, as in the study's model (issue
    48: recommend said bypass where the calibrated study said cache): a node's cache writes at
    its own rate plus SCR's per-checkpoint overhead; the application's writes to the parallel
    file system share its aggregate."""
    if profile.node_local is None or profile.parallel is None or ckpt_bytes <= 0:
        return None
    cache_calls_s = calls_per_rank * (profile.node_local.write_latency_s or 0.0)
    pfs_calls_s = calls_per_rank * (profile.parallel.write_latency_s or 0.0)
    rates = profile.scr_rates
    if rates is not None:
        per_node = ckpt_bytes / max(node_count, 1)
        cache_s = rates.cache_write_s(per_node)
        # a long job's unsynced bytes are written back between its checkpoints (the study's)
        bypass_s = rates.app_write_s(per_node, node_count, profile.parallel.scaling_per_doubling,
                                     profile.parallel.dirty_allowance_bytes, 0.0,
                                     aggregate_bw(profile.parallel, node_count)
                                     / max(node_count, 1))
    else:
        cache_s = ckpt_bytes / aggregate_bw(profile.node_local, node_count)
        bypass_s = ckpt_bytes / aggregate_bw(profile.parallel, node_count)
    return WriteTimes(cache_s=cache_calls_s + cache_s, bypass_s=pfs_calls_s + bypass_s,
                      cache_calls_s=cache_calls_s, bypass_calls_s=pfs_calls_s)


def planned_write_times(stats: WorkloadStats, profile: SystemProfile) -> WriteTimes | None:
    """The trace's checkpoint written at the planned node count by the node of its busiest
    rank (SCR_Complete_output waits for every rank: the study's model and the redundancy
    intent weigh that node too), each rank's write calls as the trace counted them."""
    count = nodes(stats, profile)
    per_node = busiest_node_bytes(stats, profile)
    return write_times(per_node * count, profile, count,
                       stats.ckpt_write_calls / max(stats.ranks, 1))
