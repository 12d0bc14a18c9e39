"""Intent 3: which redundancy scheme, by expected waste (scr-facts.md §5).

Per node writing B bytes with node-local bandwidth L and network bandwidth W, the encode cost
added to the measured checkpoint cost is: SINGLE 0; PARTNER a copy sent and written (B/W + B/L);
XOR read at the node-local read rate R, reduce-scatter and parity write (B/R + B/W +
B/((N-1)L)); RS with k parity blocks (B/R + kB/W + kB/((N-k)L)); `encode_s`, shared with the
study's model. SINGLE does not survive failures that lose a node's storage; such a
failure costs a restart from the parallel file system. The others do, unless more nodes of one
redundancy group lose their storage before the restart's SCR_Init has rebuilt the first loss
(a window w of the restart and a rebuild) than the scheme tolerates: SCR rebuilds the lost
node's files and redundancy in SCR_Init, so losses do not accumulate past it. With a rate l of
such failures per node, a share C(G-1, t) (l w)^t of them is fatal
(PARTNER: G=2, t=1; XOR: G=set, t=1; RS: G=set, t=k). A multi-level pattern (SINGLE every
checkpoint, XOR every k-th) pays XOR's encode once in k, and loses up to k-1 intervals when a
node is lost, however recently the parallel file system was flushed (SCR restores the newest
checkpoint its cache can rebuild: the last XOR level). Each scheme also has to fit: the
node-local store holds SCR_CACHE_SIZE (2; k+1 for a multi-level pattern, whose last XOR level
must stay cached) checkpoints with their redundancy data (PARTNER 2x, XOR 1+1/(S-1), RS
1+k/(S-k)); a scheme that does not fit the store's capacity (when the profile gives it) is
left out. Each candidate runs at its own Daly interval (within SCR_CHECKPOINT_SECONDS'
bounds: the job follows the recommended cadence, not the one its trace shows), or, for a job
that checkpoints on its own cadence (`recommend --job-interval-s`), at the compute gap it
keeps, where an encode costs its full time in every interval; the least expected waste wins.
On a build that flushes only synchronously each scheme also pays its own flush cadence's share
of a flush in every checkpoint (F / k), in its cost and its interval alike.
"""

from __future__ import annotations

import math

import msgspec

from scrtune.goodput.intervals import daly
from scrtune.intents.inputs import (
    SystemProfile,
    WorkloadStats,
    rs_arithmetic_node_bytes_per_s,
)
from scrtune.intents.model import (
    Intent,
    busiest_node_bytes,
    flush_every,
    flush_s,
    kept_gap_s,
    nodes,
    ranks_per_node,
    recommended_interval_s,
)
from scrtune.intents.writes import cost_said, planned_cost
from scrtune.units import human_bytes, human_rate, human_seconds

DEFAULT_LOCAL_BPS = 2e9  # when the profile gives no node-local bandwidth
CACHED_CHECKPOINTS = 2  # the SCR_CACHE_SIZE scrtune emits for cached checkpoints
RS_PARITY = 2


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    scheme: str
    encode_s: float
    interval_s: float
    waste_share: float
    footprint_bytes: float = 0.0  # node-local bytes for the cached checkpoints and redundancy
    fatal_share: float = 0.0  # share of failures that need the parallel file system's copy
    flush_every: int = 1  # SCR_FLUSH for this scheme: its fatal losses against the flush
    lost_intervals: float = 0.0  # per failure, intervals of work lost beyond the segment
    # per checkpoint, the share of a synchronous flush every flush_every-th checkpoint blocks
    # (a build without PTHREAD); 0 where the flush is left to the cache intent to weigh
    flush_blocking_s: float = 0.0

    def waste_at(self, total_s: float, interval_s: float, restart_s: float,
                 mtbf_s: float) -> float:
        """Expected waste of this scheme's checkpoints (`total_s` each, encode and flush
        share included) at another interval, at the same flush cadence."""
        return _waste(total_s, interval_s, restart_s, mtbf_s, self.lost_intervals)


class _Option(msgspec.Struct, frozen=True):
    name: str
    encode_s: float
    storage_factor: float  # cache bytes per checkpoint byte
    group: int  # nodes whose storage losses combine before the cache's copy is lost
    tolerated: int  # losses in one group the cache survives (0: every loss is fatal)
    level_intervals: float | None = None  # multi-level: a node loss goes back to the XOR level


class Redundancy(msgspec.Struct, frozen=True, kw_only=True):
    scheme: str  # SINGLE, PARTNER, XOR, RS, or SINGLE+XOR (multi-level)
    set_size: int
    set_failures: int
    xor_every: int  # for SINGLE+XOR: XOR on every k-th checkpoint
    candidates: tuple[Candidate, ...]


MAX_SET_SIZE = 8  # the SCR_SET_SIZE scrtune emits, SCR's default


def redundancy_set_size(node_count: int) -> int:
    """The nodes of a redundancy set: SCR_SET_SIZE, or every node of a smaller job (at least
    2: one node runs SINGLE, which has no set)."""
    return min(MAX_SET_SIZE, max(node_count, 2))


def group_of(copy_type: str, set_size: int) -> tuple[int, int]:
    """The nodes whose storage losses combine under `copy_type`, and how many of them the
    cached copy survives."""
    return {"PARTNER": (2, 1), "XOR": (set_size, 1),
            "RS": (set_size, RS_PARITY)}.get(copy_type, (1, 0))


def fatal_share(group: int, tolerated: int, loss: float, node_loss_rate: float,
                window_s: float) -> float:
    """The share of failures whose checkpoint only the parallel file system still holds: every
    storage loss without redundancy; with it, more losses in the group before SCR_Init's
    rebuild (a `window_s` of restart and rebuild) than it tolerates, C(G-1, t) (l w)^t."""
    if tolerated <= 0:
        return loss
    return loss * math.comb(group - 1, tolerated) \
        * min(node_loss_rate * window_s, 1.0) ** tolerated


def pfs_lag_intervals(every: int, synchronous: bool = False) -> float:
    """Intervals of work a restart from the parallel file system loses beyond the segment: the
    newest flushed checkpoint is on average (k-1)/2 checkpoints old when every k-th is
    flushed, plus, for an asynchronous flush, the one whose flush had not finished (a
    synchronous flush finishes inside its checkpoint: the study's model, issue 48)."""
    return (max(every, 1) - 1) / 2 + (0 if synchronous else 1)


def synchronous_flush_s(stats: WorkloadStats, profile: SystemProfile) -> float:
    """One flush, where the build flushes only synchronously (no PTHREAD): then every scheme's
    checkpoints block for its own flush cadence's share of it. 0 where the flush may run in
    the background: whether it does, and what it blocks, is the core-affinity and cache
    intents' to weigh (issue 48: the three intents printed 0.184%, 0.199% and 0.18% for one
    plan on a SYNC-only build)."""
    return 0.0 if "PTHREAD" in profile.flush_types else flush_s(stats, profile)


SETTLE_STEPS = 8  # the flush cadence and the interval it shares settle in two or three


def _weighed(stats: WorkloadStats, profile: SystemProfile, cost: float, restart: float,
             option: _Option, sync_flush_s: float = 0.0) -> Candidate:
    """One scheme at its expected waste: its interval (Daly's for its cost, as
    SCR_CHECKPOINT_SECONDS sets it; or the compute gap a job that keeps its own cadence
    keeps), the flush cadence its fatal losses call for, and what those lose. A synchronous
    flush (`sync_flush_s`) of every k-th checkpoint adds 1/k of it to each checkpoint's cost,
    which lengthens the interval, which may change k: a few steps find where they agree."""
    mtbf = profile.node_mtbf_s / nodes(stats, profile)
    loss = profile.node_loss_share
    total = cost + option.encode_s
    fatal = fatal_share(option.group, option.tolerated, loss, loss / profile.node_mtbf_s,
                        restart + total)
    interval = _interval_s(stats, total, mtbf)
    every = flush_every(stats, profile, interval, fatal)
    share = 0.0
    if sync_flush_s:
        interval, every, share = _settled_flush(stats, profile, total, mtbf, fatal, every,
                                                sync_flush_s)
    lag = pfs_lag_intervals(every, synchronous=sync_flush_s > 0)
    # a multi-level pattern's node loss restores its last XOR level from the cache, however
    # recently the parallel file system was flushed: SCR_Have_restart fetches only when the
    # cache holds none (the real SCR, XOR every 4th, every checkpoint flushed, a node lost
    # after the 6th: the 4th restored; issue 48: the lesser of the two was charged)
    lost = fatal * lag if option.level_intervals is None \
        else loss * option.level_intervals
    waste = _waste(total + share, interval, restart, mtbf, lost)
    return Candidate(scheme=option.name, encode_s=option.encode_s, interval_s=interval,
                     waste_share=waste, fatal_share=fatal, flush_every=every,
                     lost_intervals=lost, flush_blocking_s=share)


def _settled_flush(stats: WorkloadStats, profile: SystemProfile, total_s: float,
                   mtbf_s: float, fatal: float, every: int, flush_s: float
                   ) -> tuple[float, int, float]:
    """The interval, flush cadence k and share F / k of a synchronous flush where they agree:
    the share lengthens the interval, which may change k (settled in two or three steps)."""
    seen = {every}
    for _ in range(SETTLE_STEPS):
        interval = _interval_s(stats, total_s + flush_s / every, mtbf_s)
        every = flush_every(stats, profile, interval, fatal)
        if every in seen:
            break
        seen.add(every)
    share = flush_s / every  # the cadence set, at the interval it was chosen for
    return _interval_s(stats, total_s + share, mtbf_s), every, share


def _interval_s(stats: WorkloadStats, total_s: float, mtbf_s: float) -> float:
    return kept_gap_s(stats) or recommended_interval_s(daly(total_s, mtbf_s))


def _waste(total_s: float, interval_s: float, restart_s: float, mtbf_s: float,
           lost_intervals: float) -> float:
    """Expected waste share: the checkpoint, half a segment and a restart per failure, and
    the intervals a failure loses beyond that (per failure, on average)."""
    segment = interval_s + total_s
    return total_s / segment + (segment / 2 + restart_s) / mtbf_s \
        + lost_intervals * segment / mtbf_s


def cached_checkpoints(scheme: str) -> int:
    """Checkpoints SCR keeps in the cache under `scheme`: k+1 for a multi-level pattern with
    XOR every k-th (mapping.redundancy_settings), else CACHED_CHECKPOINTS."""
    _, _, every = scheme.partition("/")
    return int(every) + 1 if every else CACHED_CHECKPOINTS


class EncodeRates(msgspec.Struct, frozen=True):
    """Per node, the rates an encode runs at."""
    write_bytes_per_s: float  # into the node-local cache: the copy or the parity
    read_bytes_per_s: float  # the cached files XOR and RS read back
    net_bytes_per_s: float  # sent to the set's other nodes
    rs_arithmetic_core_bytes_per_s: float = math.inf  # RS's parity arithmetic, one core's
    cores_per_node: int = 1

    def rs_arithmetic_bytes_per_s(self, ranks_per_node: int) -> float:
        """Per node: each rank multiplies on its own core."""
        return rs_arithmetic_node_bytes_per_s(self.rs_arithmetic_core_bytes_per_s,
                                              ranks_per_node, self.cores_per_node)


def encode_rates(profile: SystemProfile) -> EncodeRates:
    """What the intent and the study's calibrated model both weigh an encode at (issue 48:
    `recommend` wrote the parity at SCR's fitted cache rate, `study` at the profile's store
    rate, 5x slower, and they chose different schemes): calibrated, SCR's own cache writes and
    encode rate, which `calibrate` fitted the runs with; else the profile's node-local store
    and network. The cached files are read at the store's read rate; RS's parity arithmetic
    at the profile's core rate, on as many of the node's cores as it runs ranks."""
    tier = profile.node_local
    write = tier.write_bytes_per_s if tier else DEFAULT_LOCAL_BPS
    if profile.scr_rates:
        write = profile.scr_rates.cache_write_bytes_per_s
    read = tier.read_bytes_per_s if tier and tier.read_bytes_per_s else write
    return EncodeRates(write, read, profile.encode_bytes_per_s(),
                       profile.rs_arithmetic_core_bytes_per_s(), profile.cores_per_node)


def encode_s(scheme: str, per_node_bytes: float, write_bps: float, read_bps: float,
             net_bps: float, set_size: int, rs_arithmetic_bps: float = math.inf) -> float:
    """Seconds one node spends encoding a checkpoint of `per_node_bytes` under `scheme` (one
    formula for the intent and the study's model): PARTNER sends and stores a copy; XOR and RS
    read the node's cached files (at the node-local read rate: benchmarks/redundancy_encode.py
    measured XOR 1.85x below the formula that read them at the write rate), send them, and
    write their share of the parity. RS also multiplies each of the k blocks it receives into
    a parity block (`rs_arithmetic_bps`, per node): without that term its encode measured 1.9x
    the formula through the real SCR."""
    size = per_node_bytes
    if scheme == "PARTNER":
        return size / net_bps + size / write_bps
    if scheme == "XOR":
        return size / read_bps + size / net_bps + size / (max(set_size - 1, 1) * write_bps)
    if scheme == "RS":
        k = RS_PARITY
        return size / read_bps + k * size / net_bps \
            + k * size / (max(set_size - k, 1) * write_bps) + k * size / rs_arithmetic_bps
    return 0.0


def _options(per_node: float, rates: EncodeRates, ranks_per_node: int, set_size: int,
             rs_available: bool = True) -> list[_Option]:
    def cost(scheme: str) -> float:
        return encode_s(scheme, per_node, rates.write_bytes_per_s, rates.read_bytes_per_s,
                        rates.net_bytes_per_s, set_size,
                        rates.rs_arithmetic_bytes_per_s(ranks_per_node))

    options = [
        _Option("SINGLE", 0.0, 1.0, *group_of("SINGLE", set_size)),
        _Option("PARTNER", cost("PARTNER"), 2.0, *group_of("PARTNER", set_size)),
        _Option("XOR", cost("XOR"), 1 + 1 / (set_size - 1), *group_of("XOR", set_size)),
    ]
    # redset aborts on sets of k ranks or fewer; RS arrived with SCR v3
    if set_size > RS_PARITY + 1 and rs_available:
        k = RS_PARITY
        options.append(_Option("RS", cost("RS"), 1 + k / (set_size - k),
                               *group_of("RS", set_size)))
    for every in (2, 4, 8):  # a lost node costs the work since the last XOR level
        options.append(_Option(f"SINGLE+XOR/{every}", cost("XOR") / every,
                               1 + 1 / (set_size - 1), *group_of("XOR", set_size),
                               level_intervals=(every - 1) / 2))
    return options


class Weighed(msgspec.Struct, frozen=True):
    candidates: tuple[Candidate, ...]  # the schemes that fit, each at its expected waste
    unfit: tuple[str, ...]  # the schemes the node-local store cannot hold, and what they need


def weigh(stats: WorkloadStats, profile: SystemProfile, cost_s: float, restart_s: float
          ) -> Weighed:
    """Every scheme that fits, at its expected waste for a cached checkpoint that blocks
    `cost_s` before its encode and a restart of `restart_s`: the redundancy intent weighs
    the trace's measured cost, the cache intent its modelled node-local write (issue 48)."""
    count = nodes(stats, profile)
    per_node = busiest_node_bytes(stats, profile)
    rates = encode_rates(profile)
    capacity = profile.node_local.capacity_bytes if profile.node_local else 0.0
    sync_flush = synchronous_flush_s(stats, profile)
    candidates, unfit = [], []
    options = _options(per_node, rates, ranks_per_node(stats, profile),
                       redundancy_set_size(count),
                       rs_available=not profile.scr_version.startswith("2"))
    for option in options if count > 1 else options[:1]:  # one node: SCR forces SINGLE
        footprint = per_node * option.storage_factor * cached_checkpoints(option.name)
        if capacity and footprint > capacity and option.name != "SINGLE":
            unfit.append(f"{option.name} needs {human_bytes(footprint)}")
            continue
        weighed = _weighed(stats, profile, max(cost_s, 1e-3), restart_s, option, sync_flush)
        candidates.append(msgspec.structs.replace(weighed, footprint_bytes=footprint))
    return Weighed(tuple(candidates), tuple(unfit))


def bypass_waste(stats: WorkloadStats, profile: SystemProfile, cost_s: float,
                 restart_s: float) -> float:
    """Expected waste of writing every checkpoint straight to the parallel file system: no
    encode, and no failure loses more than the segment it struck."""
    mtbf = profile.node_mtbf_s / nodes(stats, profile)
    cost = max(cost_s, 1e-3)
    return _waste(cost, _interval_s(stats, cost, mtbf), restart_s, mtbf, 0.0)


def choose(stats: WorkloadStats, profile: SystemProfile) -> Candidate:
    """The scheme the intent sets: the least expected waste at the checkpoint's cost at the
    plan's scale (the trace's measured cost, at its own)."""
    planned = planned_cost(stats, profile)
    weighed = weigh(stats, profile, max(planned.cache_s, 1e-3), planned.restart_s)
    return min(weighed.candidates, key=lambda c: c.waste_share)


def _rs_arithmetic_said(stats: WorkloadStats, profile: SystemProfile, rates: EncodeRates,
                        candidates: list[Candidate]) -> str:
    if not any(c.scheme == "RS" for c in candidates):
        return ""
    per_node = rates.rs_arithmetic_bytes_per_s(ranks_per_node(stats, profile))
    return (f", RS parity arithmetic {human_rate(per_node)} per node"
            + ("" if profile.rs_arithmetic_bytes_per_s else " (assumed: not in the profile)"))


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    count = nodes(stats, profile)
    if count == 1:
        return Intent(name="redundancy", scope="job", confidence=1.0,
                      evidence=("one node: SCR forces SINGLE (there is no other node to hold "
                                "redundancy)",),
                      value=Redundancy(scheme="SINGLE", set_size=MAX_SET_SIZE, set_failures=2,
                                       xor_every=1, candidates=()))
    per_node = busiest_node_bytes(stats, profile)
    rates = encode_rates(profile)
    local, net = rates.write_bytes_per_s, rates.net_bytes_per_s
    capacity = profile.node_local.capacity_bytes if profile.node_local else 0.0
    set_size = redundancy_set_size(count)
    planned = planned_cost(stats, profile)
    cost = max(planned.cache_s, 1e-3)
    mtbf = profile.node_mtbf_s / count
    loss = profile.node_loss_share
    weighed = weigh(stats, profile, cost, planned.restart_s)
    candidates, unfit = list(weighed.candidates), weighed.unfit
    best = min(candidates, key=lambda c: c.waste_share)
    scheme, _, every = best.scheme.partition("/")
    evidence = (
        f"{count} nodes, {human_bytes(per_node)} per node per checkpoint, "
        + cost_said(planned)
        + f", job MTBF {human_seconds(mtbf)}, {100 * loss:.0f}% of failures lose a node",
        f"node-local {human_rate(local)}"
        + ("" if profile.node_local or profile.scr_rates else " (assumed: not in the profile)")
        + f", {'encode' if profile.scr_rates else 'network'} {human_rate(net)}"
        + (" (measured through SCR)" if profile.scr_rates and "encode_bytes_per_s"
           not in profile.scr_rates.undetermined else "") + f", sets of {set_size}"
        + _rs_arithmetic_said(stats, profile, rates, candidates),
        *((f"node-local store holds {human_bytes(capacity)} for {CACHED_CHECKPOINTS} cached "
           f"checkpoints: {', '.join(unfit)}, left out",) if unfit else ()),
        "expected waste: " + ", ".join(f"{c.scheme} {100 * c.waste_share:.3g}%"
                                       for c in sorted(candidates, key=lambda c: c.waste_share)),
        f"chosen: {best.scheme}",
        *(("RS: sets span one rank per node, and redset aborts SCR_Init when a set has no "
           "more ranks than its 2 parity blocks: on 2 nodes or fewer, run recommend again",)
          if best.scheme == "RS" else ()),
    )
    return Intent(name="redundancy", scope="job", confidence=0.5 if profile.node_local else 0.3,
                  evidence=evidence,
                  value=Redundancy(scheme=scheme, set_size=set_size, set_failures=2,
                                   xor_every=int(every) if every else 1,
                                   candidates=tuple(candidates)))
