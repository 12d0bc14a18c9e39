"""Intent 5: cache on node-local storage, or write straight to the parallel file system.

Blocking time with a cache is the node-local write (plus encode); with bypass it is the parallel
file system write. Node-local bandwidth grows with nodes, a parallel file system less (the study:
x2 vs x1.6 per doubling), so caching loses at few nodes (it did at 2) and wins from some count.
The choice is by expected waste, as the study ranks by goodput (issue 48: at 2 nodes `study`
ranked bypass first while `recommend` cached, since its cache wrote faster): a cache pays its
redundancy's encode, a flush that outlasts the compute, and, without redundancy, the work a
node loss takes with it; bypass pays its slower write and a restart from the parallel file
system.
"""

from __future__ import annotations

import msgspec

from scrtune.intents import core_affinity, redundancy
from scrtune.intents.inputs import HELD, ScrRates, SystemProfile, WorkloadStats
from scrtune.intents.model import Intent, busiest_node_bytes, nodes
from scrtune.intents.writes import (
    WriteTimes,
    bypass_restart_s,
    cache_restart_s,
    planned_write_times,
    write_times,
)
from scrtune.units import human_bytes, human_rate, human_seconds, plural

MAX_NODES_SEARCHED = 1 << 16


class CacheChoice(msgspec.Struct, frozen=True, kw_only=True):
    bypass: bool
    cache_base: str | None
    cache_write_s: float | None  # per checkpoint, modelled
    bypass_write_s: float | None
    crossover_nodes: int | None  # smallest node count from which caching blocks less
    cache_scheme: str | None = None  # the redundancy caching was weighed with: its least waste
    cache_waste_share: float | None = None  # expected, at the recommended interval
    bypass_waste_share: float | None = None


def crossover(ckpt_bytes: float, profile: SystemProfile, calls_per_rank: float = 0.0
              ) -> int | None:
    count = 1
    while count <= MAX_NODES_SEARCHED:
        times = write_times(ckpt_bytes * count, profile, count, calls_per_rank)
        if times is not None and times.cache_s < times.bypass_s:
            return count
        count *= 2
    return None


class Weighed(msgspec.Struct, frozen=True):
    """Cache and bypass at their expected waste."""
    cache: redundancy.Candidate  # caching's least-waste scheme
    flush_blocking_s: float  # per checkpoint, in the cache's cost
    bypass_waste_share: float
    bypass_restart_s: float

    @property
    def caches(self) -> bool:
        """Caching wastes less than bypass: the choice the recommendation makes."""
        return self.cache.waste_share < self.bypass_waste_share


def flush_blocking_s(stats: WorkloadStats, profile: SystemProfile, cost_s: float) -> float:
    """Per checkpoint, what a cached checkpoint's flush to the parallel file system blocks
    beyond what the redundancy intent weighed: asynchronous (slowed on the ranks' cores when
    no core is idle) or synchronous, whichever the core-affinity intent would set; 0 without
    a flush rate or a compute gap, and 0 on a build that flushes only synchronously, where
    each scheme already pays its own cadence's share."""
    if redundancy.synchronous_flush_s(stats, profile) > 0:
        return 0.0
    idle = core_affinity.idle_cores(stats, profile)[0]
    cost = core_affinity.flush_cost(stats, profile, cost_s, idle=bool(idle))
    if cost is None:
        return 0.0
    return min(cost.sync_s, cost.async_s)


def weigh(stats: WorkloadStats, profile: SystemProfile, per_node: float, count: int,
          times: WriteTimes) -> Weighed:
    """Expected waste of caching (its write, its flush's blocking, each redundancy scheme's
    encode and losses; restart from the node-local store) and of bypass (its write; restart
    from the parallel file system), by the model the redundancy intent weighs schemes with."""
    flush = flush_blocking_s(stats, profile, times.cache_s)
    schemes = redundancy.weigh(stats, profile, times.cache_s + flush,
                               cache_restart_s(profile, per_node)).candidates
    restart = bypass_restart_s(profile, per_node, count)
    bypass = redundancy.bypass_waste(stats, profile, times.bypass_s, restart)
    best = min(schemes, key=lambda c: c.waste_share)
    return Weighed(cache=best, flush_blocking_s=flush + best.flush_blocking_s,
                   bypass_waste_share=bypass, bypass_restart_s=restart)


def caches(stats: WorkloadStats, profile: SystemProfile) -> bool:
    """Whether the recommendation caches (the choice `derive` makes), for a caller without the
    cache intent at hand: a cached checkpoint pays its redundancy's encode."""
    times = planned_write_times(stats, profile)
    return times is not None and weigh(stats, profile, busiest_node_bytes(stats, profile),
                                       nodes(stats, profile), times).caches


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    count = nodes(stats, profile)
    per_node = busiest_node_bytes(stats, profile)  # as planned_write_times writes it
    calls_per_rank = stats.ckpt_write_calls / max(stats.ranks, 1)
    times = planned_write_times(stats, profile)
    if times is None:
        why = "no checkpoint bytes in the trace" if stats.ckpt_bytes <= 0 else \
            "no node-local and parallel storage bandwidths in the system profile"
        return Intent(name="cache_or_bypass", scope="job", confidence=0.2,
                      evidence=(f"{why}: SCR's default (bypass) is kept",),
                      value=CacheChoice(bypass=True, cache_base=None, cache_write_s=None,
                                        bypass_write_s=None, crossover_nodes=None))
    cache_s, bypass_s = times.cache_s, times.bypass_s
    weighed = weigh(stats, profile, per_node, count, times)
    best = weighed.cache
    bypass = not weighed.caches
    cross = crossover(per_node, profile, calls_per_rank)
    local, pfs = profile.node_local, profile.parallel
    assert local is not None and pfs is not None
    evidence = (
        f"{count} nodes, {human_bytes(per_node)} of checkpoint per node",
        *_writes_said(profile, times, calls_per_rank),
        # both at their modelled writes, which the trace's cost (the redundancy and interval
        # intents' figure) may not be: it was measured under one of the two
        f"expected waste at the modelled writes: caching with {best.scheme} (encode "
        f"{human_seconds(best.encode_s)}"
        + (f", flush blocking {human_seconds(weighed.flush_blocking_s)}"
           if weighed.flush_blocking_s >= 1e-3 else "")
        + f"): {100 * best.waste_share:.3g}%; bypass: {100 * weighed.bypass_waste_share:.3g}% "
        f"(a restart reads {pfs.path}: {human_seconds(weighed.bypass_restart_s)})",
        ("bypass: writing straight to the parallel file system wastes less" if bypass else
         "cache: caching wastes less; flush to the parallel file system afterwards")
        + ("" if bypass == (cache_s >= bypass_s) else
           " though node-local writes block less" if bypass else
           " though its writes block more")
        + (f"; caching blocks less from {plural(cross, 'node')}" if cross else
           "; caching never blocks less here"),
    )
    return Intent(name="cache_or_bypass", scope="job", confidence=0.7, evidence=evidence,
                  value=CacheChoice(bypass=bypass, cache_base=None if bypass else local.path,
                                    cache_write_s=cache_s, bypass_write_s=bypass_s,
                                    crossover_nodes=cross, cache_scheme=best.scheme,
                                    cache_waste_share=best.waste_share,
                                    bypass_waste_share=weighed.bypass_waste_share))


def _writes_said(profile: SystemProfile, times: WriteTimes, calls_per_rank: float
                 ) -> tuple[str, ...]:
    local, pfs, rates = profile.node_local, profile.parallel, profile.scr_rates
    assert local is not None and pfs is not None
    cache_s, bypass_s = times.cache_s, times.bypass_s
    return (
        *((f"node-local {local.path}: {human_rate(local.write_bytes_per_s)} per node, x"
           f"{local.scaling_per_doubling} per doubling -> {cache_s:.2f} s per checkpoint",
           f"parallel {pfs.path}: {human_rate(pfs.write_bytes_per_s)} per node, x"
           f"{pfs.scaling_per_doubling} per doubling -> {bypass_s:.2f} s per checkpoint")
          if rates is None else
          (f"SCR's own rates (calibrated at {rates.nodes} nodes): cache writes "
           f"{human_rate(rates.cache_write_bytes_per_s)} per node"
           f"{_held(rates, 'cache_write_bytes_per_s')} + {rates.checkpoint_overhead_s:.3f} s"
           f"{_held(rates, 'checkpoint_overhead_s')} -> {cache_s:.2f} s per checkpoint",
           f"the application's writes to {pfs.path} "
           f"{human_rate(rates.app_pfs_write_bytes_per_s)} per node at {rates.nodes} nodes"
           f"{_held(rates, 'app_pfs_write_bytes_per_s')}, x{pfs.scaling_per_doubling} per "
           f"doubling -> {bypass_s:.2f} s per checkpoint")),
        *((f"{calls_per_rank:,.0f} write calls a rank per checkpoint, each paying the tier's "
           f"call latency: {times.bypass_calls_s:.2f} s on {pfs.path}, "
           f"{times.cache_calls_s:.3f} s on {local.path} (included)",)
          if times.bypass_calls_s >= 1e-3 else ()),
    )


def _held(rates: ScrRates, name: str) -> str:
    return f" ({HELD})" if rates.held(name) else ""
