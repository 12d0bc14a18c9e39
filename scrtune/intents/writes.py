"""A checkpoint's blocking write to the node-local cache and to the parallel file system, as
the cache intent, the core-affinity intent and the study's crossover weigh it."""

from __future__ import annotations

import math
from dataclasses import dataclass

import msgspec

from scrtune.intents.inputs import StorageTier, SystemProfile, WorkloadStats
from scrtune.intents.model import (
    busiest_node_bytes,
    nodes,
    ranks_per_node,
    traced_ranks_per_node,
)
from scrtune.units import plural


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


@dataclass(frozen=True)
class PlannedCost:
    """What one checkpoint blocks before its encode, cached (`cache_s`) or in bypass
    (`bypass_s`), and what a restart reads back, from the node-local store (`restart_s`) or
    the parallel file system (`bypass_restart_s`), at the plan's scale. Where the trace ran at
    that scale, its own measurement stands for the tier it wrote to (`cache_measured`,
    `bypass_measured`); the other tier's cost, and both at another scale, are the writes the
    cache intent models (issue 48: at 512 nodes of 8 ranks the redundancy and interval intents
    weighed the 0.074 s one rank of a trace took for 70 MiB as the cost of 562 MiB a node, 7.4
    GiB/s into a 2.3 GiB/s store, and printed a waste for PARTNER that the cache intent,
    weighing its modelled write, put at another figure in the same output). `note` says where
    the trace's measurement was taken, for a modelled cost's evidence."""
    cache_s: float
    bypass_s: float
    restart_s: float
    bypass_restart_s: float
    cache_measured: bool
    bypass_measured: bool
    note: str = ""


def _as_traced(stats: WorkloadStats, profile: SystemProfile) -> SystemProfile:
    """The profile planning the trace's own scale: its nodes, its ranks on each."""
    return msgspec.structs.replace(profile, nodes=max(stats.hosts, 1), ranks_per_node=0)


def at_trace_scale(stats: WorkloadStats, profile: SystemProfile) -> bool:
    """Whether the plan runs as the trace did: as many nodes, as many ranks on each."""
    return nodes(stats, profile) == max(stats.hosts, 1) \
        and ranks_per_node(stats, profile) == traced_ranks_per_node(stats)


def planned_cost(stats: WorkloadStats, profile: SystemProfile) -> PlannedCost:
    """The tier the trace wrote to (by path) keeps the trace's cost, scaled as the model
    scales it (a trace that wrote to neither says nothing of them; to both, not which cost is
    whose: at its own scale it then stands for both). The other tier's is modelled, at the
    trace's scale too (issue 48: a trace recorded under SCR's defaults, which bypass the
    cache, took 1.595 s a checkpoint on /tmp/slowpfs; the redundancy and interval intents
    weighed that as a cached checkpoint's cost and printed 52.70% expected waste, where the
    cache intent, modelling the cached write at 0.11 s, printed 7.43%)."""
    times = planned_write_times(stats, profile)
    local, pfs = _wrote(stats, profile.node_local), _wrote(stats, profile.parallel)
    own_scale = at_trace_scale(stats, profile)
    if times is None or (own_scale and local == pfs):
        return PlannedCost(cache_s=stats.ckpt_dur_s, bypass_s=stats.ckpt_dur_s,
                           restart_s=stats.restore_dur_s, bypass_restart_s=stats.restore_dur_s,
                           cache_measured=True, bypass_measured=True)
    count = nodes(stats, profile)
    per_node = busiest_node_bytes(stats, profile)
    cache_s, bypass_s = times.cache_s, times.bypass_s
    restart_s = cache_restart_s(profile, per_node)
    bypass_restart = bypass_restart_s(profile, per_node, count)
    traced = planned_write_times(stats, _as_traced(stats, profile)) \
        if local != pfs and stats.ckpt_dur_s > 0 else None
    if traced is not None and local and traced.cache_s > 0:
        cache_s = stats.ckpt_dur_s * times.cache_s / traced.cache_s
    elif traced is not None and pfs and traced.bypass_s > 0:
        bypass_s = stats.ckpt_dur_s * times.bypass_s / traced.bypass_s
    kept = own_scale and traced is not None  # the written tier's measurement, as it was
    if kept:  # a restart reads back the tier the trace wrote to, as the trace did
        restart_s = stats.restore_dur_s if local else restart_s
        bypass_restart = stats.restore_dur_s if pfs else bypass_restart
    return PlannedCost(cache_s=cache_s, bypass_s=bypass_s, restart_s=restart_s,
                       bypass_restart_s=bypass_restart,
                       cache_measured=kept and local, bypass_measured=kept and pfs,
                       note=_traced_note(stats, profile, local, kept))


def _traced_note(stats: WorkloadStats, profile: SystemProfile, local: bool,
                 own_scale: bool) -> str:
    if not own_scale:
        return measured_at(stats)
    tier = profile.node_local if local else profile.parallel
    assert tier is not None
    return (f"the {stats.ckpt_dur_s:.3f} s ({stats.ckpt_dur_source()}) was measured writing to "
            f"{tier.path}, the "
            + ("node-local store" if local else "parallel file system"))


def _wrote(stats: WorkloadStats, tier: StorageTier | None) -> bool:
    """Whether the trace's writes went to this tier's path."""
    return tier is not None and any(_within(prefix, tier.path) or _within(tier.path, prefix)
                                    for prefix in stats.write_bytes_per_s)


def _within(path: str, prefix: str) -> bool:
    prefix = prefix.rstrip("/")
    return bool(prefix) and (path == prefix or path.startswith(prefix + "/"))


def cache_restart_s(profile: SystemProfile, per_node: float) -> float:
    """A node reading its checkpoint back from its node-local store."""
    local = profile.node_local
    assert local is not None
    return per_node / (local.read_bytes_per_s or local.write_bytes_per_s)


def bypass_restart_s(profile: SystemProfile, per_node: float, count: int) -> float:
    """Every node reading its share of the parallel file system's aggregate."""
    pfs = profile.parallel
    assert pfs is not None
    return per_node * max(count, 1) / aggregate_bw(pfs, count, pfs.read_bytes_per_s)


def cost_said(planned: PlannedCost) -> str:
    """Where a cached checkpoint's cost comes from, for the evidence."""
    if planned.cache_measured:
        return f"measured cost {planned.cache_s:.3f} s"
    return f"modelled cost {planned.cache_s:.3f} s ({planned.note})"


def measured_at(stats: WorkloadStats) -> str:
    """The scale the trace's checkpoint cost was measured at, which the plan's is not."""
    return (f"the {stats.ckpt_dur_s:.3f} s ({stats.ckpt_dur_source()}) was measured at "
            f"{plural(max(stats.hosts, 1), 'node')} x "
            f"{plural(traced_ranks_per_node(stats), 'rank')}")
