"""The rates `calibrate` fits, one row each: where the search starts and how far it may go,
and what a rate the runs do not determine is left at. Adding a rate is one row here (and its
field in `ScrRates`); the fit's arrays are built from this table, so nothing is coupled by
position."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from scrtune.intents.inputs import ScrRates, StorageTier, SystemProfile
from scrtune.intents.writes import aggregate_bw
from scrtune.units import human_rate, human_us


@dataclass(frozen=True)
class FittedRate:
    """One rate of `ScrRates` the fit finds. `start`, `low` and `high`: where the search
    starts and its bounds, plausible for any HPC node. `unmeasured(profile, nodes)`: its value
    when the runs do not determine it (None: the search's start). `shown(value)`: the value
    as `calibrate` writes it beside the number, for people."""
    name: str
    start: float
    low: float
    high: float
    unmeasured: Callable[[SystemProfile | None, int], float | None]
    shown: Callable[[float], str]


def _node_share(tier: StorageTier | None, nodes: int) -> float | None:
    """A node's share of a tier's aggregate at `nodes` nodes. The fitted bandwidths are per
    node at the runs' `nodes`, the profile's per node at one: a synced flush gets its node's
    share (issue 48: SCR's flush went at 238 and 397 MB/s a node on 2 nodes, the profile's
    file system 484 and 792 MB/s on one, flat)."""
    return aggregate_bw(tier, nodes) / max(nodes, 1) if tier else None


def _app_write(profile: SystemProfile | None, nodes: int) -> float | None:
    """An application's writes in bypass are not synced (SCR's bypass "flush" writes only its
    summary). Where the profile knows the kernel's dirty allowance, the model writes within
    it at this pace and beyond it at the file system's own rate (`ScrRates.app_write_s`):
    within it a write fills fresh page-cache pages, at the pace the profile timed fresh
    memory at, not at the file system's synced rate (issue 48: on the eight grids with an
    allowance, bypass held out came out a median 14% off with the synced rate, 9% with
    this; the runs' first checkpoints wrote 403 MB a node in 0.1-0.25 s past their calls).
    Without an allowance every byte goes at this pace: the writes went at 0.9-1.0x the
    file system's one-node rate on two grids (0.64 on a third), which it leans on."""
    if profile is None or profile.parallel is None:
        return None
    if profile.parallel.dirty_allowance_bytes > 0 and profile.fresh_memory_bytes_per_s > 0:
        return profile.fresh_memory_bytes_per_s
    return profile.parallel.write_bytes_per_s


def _call(profile: SystemProfile | None, nodes: int) -> float:
    """A flush's call costs what the profile timed the file system's call at."""
    latency_s = profile.parallel.write_latency_s if profile and profile.parallel else 0.0
    return max(latency_s, 1e-9)


def _none(profile: SystemProfile | None, nodes: int) -> float:
    """No cost: a rate at its floor (no interference, overhead or overlap slowdown)."""
    return 1e-6


def _seconds(value: float) -> str:
    return human_us(value * 1e6)


RATES = (
    FittedRate("app_pfs_write_bytes_per_s", 1e9, 1e6, 1e12, _app_write, human_rate),
    FittedRate("cache_write_bytes_per_s", 3e9, 1e6, 1e12,
               lambda profile, nodes: _node_share(profile and profile.node_local, nodes),
               human_rate),
    FittedRate("encode_bytes_per_s", 3e9, 1e6, 1e12,
               lambda profile, nodes: profile.network_bytes_per_s if profile else None,
               human_rate),
    FittedRate("flush_bytes_per_s", 1e9, 1e6, 1e12,
               lambda profile, nodes: _node_share(profile and profile.parallel, nodes),
               human_rate),
    FittedRate("flush_call_s", 1e-4, 1e-9, 1.0, _call, _seconds),
    # a flush beside the ranks no slower than alone
    FittedRate("busy_core_slowdown", 2.0, 1.0, 1000.0, lambda profile, nodes: 1.0,
               lambda value: f"x{value:.2f}"),
    FittedRate("checkpoint_overhead_s", 0.02, 1e-6, 600.0, _none, _seconds),
    FittedRate("flush_interference", 0.1, 1e-6, 100.0, _none,
               lambda value: f"+{100 * value:.0f}% a busy transfer thread"),
    FittedRate("flush_overlap_slowdown", 0.1, 1e-6, 100.0, _none,
               lambda value: f"+{100 * value:.0f}% beside a flush"),
)
RATE_NAMES = tuple(rate.name for rate in RATES)
# the search works in log space
START = np.log([rate.start for rate in RATES])
LOW = np.log([rate.low for rate in RATES])
HIGH = np.log([rate.high for rate in RATES])


def rates_of(theta: np.ndarray, nodes: int, source: str = "") -> ScrRates:
    values = dict(zip(RATE_NAMES, (float(v) for v in np.exp(theta))))
    values["busy_core_slowdown"] = max(1.0, values["busy_core_slowdown"])
    return ScrRates(source=source, nodes=nodes, **values)


def uncalibrated(profile: SystemProfile | None, nodes: int = 1) -> np.ndarray:
    """Each rate where the runs do not determine it (log space): the profile's own tiers for
    bandwidths (the search's start without them), and no cost for the rest."""
    values = []
    for rate in RATES:
        value = rate.unmeasured(profile, nodes)
        values.append(rate.start if value is None else value)
    return np.clip(np.log(values), LOW, HIGH)
