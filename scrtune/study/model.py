"""What SCR does under a configuration, as time: blocking checkpoint time, flush time, goodput.

Per rank writing B bytes in the workload's write sizes, with per-call costs of each tier
(latency + size / bandwidth; a rank's bandwidth is its share of the tier's aggregate at n
nodes, capped by what one stream achieved in the trace):

- bypass: the application's writes go to the parallel file system;
- cache: they go to node-local storage, then the copy type encodes (the redundancy intent's
  `encode_s`: PARTNER a copy sent and written, XOR a read, a reduce-scatter and a parity
  write, RS k parity blocks and their arithmetic);
- flush: read from cache and write to the parallel file system in file-buffer-sized calls, by
  min(CPUs, 16, files) threads per rank; a buffer of 32 MiB or more is mapped afresh for every
  file (AXL mallocs it per file, glibc maps it), its pages faulted in at the profile's
  fresh-memory rate; threads that share the rank's core while it computes (ranks bound to
  cores, asynchronous flush) are slowed by the profile's busy_core_slowdown (the corrected
  study: about 1.8x); a synchronous flush every k-th checkpoint blocks for 1/k of a
  flush on average; an asynchronous one that outlasts the compute after its checkpoint slows
  the next checkpoint, which it overlaps, by the fitted interference per busy transfer thread
  (a thread whose calls wait on the file system leaves the core) plus the fitted slowdown of
  any flush beside it (its page cache, memory and kernel work); with the profile's measured
  busy shares, the checkpoint that starts an asynchronous flush pays SCR's work after the
  dispatch, waiting behind the threads it started (flush.dispatch_s). A timed run (calibration)
  is stepped through as SCR v3.1 runs it: a checkpoint waits only for the flush of the dataset
  it evicts (SCR_CACHE_SIZE back), and flushes at once wait on their calls side by side and
  share the bytes' rate; in a long job's steady state a flush blocks for what outlasts the
  compute of its k intervals;
- SCR adds metadata calls per file (the study counted about 6: stat, access, ...);
- expected goodput with Daly's interval, the one the recommendation sets (a timed run of
  `checkpoints`, for calibration, at the job's own cadence); restore from cache or the parallel
  file system; without redundancy, a failure that takes a node's cache costs the work the
  parallel file system's copy is behind (the flush cadence; without a flush, the whole run);
  the asynchronous flush hides behind that interval's compute, so the blocking, the interval
  and the goodput are one consistent answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import msgspec

from scrtune.goodput.intervals import daly, expected_waste
from scrtune.intents.inputs import (
    DEFAULT_RS_ARITHMETIC_BYTES_PER_S,
    ScrRates,
    SystemProfile,
    ThreadShare,
    WorkloadStats,
    rs_arithmetic_node_bytes_per_s,
)
from scrtune.intents.model import kept_gap_s
from scrtune.intents.overlap import overrun_excess_s, timed_blocking_s
from scrtune.intents.redundancy import (
    CACHED_CHECKPOINTS,
    EncodeRates,
    encode_rates,
    encode_s,
    fatal_share,
    group_of,
    pfs_lag_intervals,
    redundancy_set_size,
)
from scrtune.study.calibrate import TierCost
from scrtune.study.flush import beside_threads, flush_parts
from scrtune.study.settle import settled, settled_async

SCR_METADATA_CALLS_PER_FILE = 6
DEFAULT_LATENCY_S = 20e-6
MIB = 1 << 20


class Config(msgspec.Struct, frozen=True, kw_only=True):
    copy_type: str = "XOR"  # SINGLE, PARTNER, XOR, RS
    bypass: bool = True
    file_buf_bytes: int = 32 * MIB
    flush_async: bool = False  # PTHREAD + SCR_FLUSH_ASYNC=1; else SYNC
    threads_on_idle_cores: bool = False  # transfer-thread affinity
    flush_every: int = 1  # SCR_FLUSH; 0: never flush (the checkpoints stay in the cache)
    transfer_threads: int = 0  # PTHREAD threads per rank; 0: AXL's min(CPUs, 16, files)
    # SCR_CACHE_SIZE: a checkpoint evicts the one this many back
    cache_size: int = CACHED_CHECKPOINTS

    def label(self) -> str:
        if self.bypass:
            return "bypass (straight to the parallel file system)"
        head = f"cache {self.copy_type}, buffer {self.file_buf_bytes // MIB} MiB"
        if self.flush_every == 0:
            return f"{head}, no flush"
        flush = "sync"
        if self.flush_async:
            where = "idle cores" if self.threads_on_idle_cores else "bound"
            threads = f", {self.transfer_threads} threads" if self.transfer_threads else ""
            cache = f", cache {self.cache_size}" if self.cache_size != CACHED_CHECKPOINTS else ""
            flush = f"async ({where}{threads}{cache})"
        return f"{head}, {flush} flush every {self.flush_every}"


class Prediction(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    blocking_s: float
    flush_s: float
    goodput: float  # expected share of wall time that is progress, at Daly's interval
    interval_s: float
    write_s: float = 0.0  # the application's writes of a checkpoint alone (a timed phase)


@dataclass(frozen=True)
class Tier:
    latency_s: float
    stream_bytes_per_s: float  # what one process achieved
    node_bytes_per_s: float  # aggregate per node at one node
    scaling_per_doubling: float

    def rank_bytes_per_s(self, nodes: int, ranks_per_node: int) -> float:
        aggregate = self.node_bytes_per_s * self.scaling_per_doubling ** math.log2(max(nodes, 1))
        return min(self.stream_bytes_per_s, aggregate / (nodes * ranks_per_node))

    def time(self, calls: float, nbytes: float, nodes: int, ranks_per_node: int) -> float:
        return calls * self.latency_s + nbytes / self.rank_bytes_per_s(nodes, ranks_per_node)


@dataclass(frozen=True)
class Machine:
    local_write: Tier
    local_read: Tier
    pfs_write: Tier
    pfs_read: Tier
    network_bytes_per_s: float
    cores_per_node: int
    mtbf_node_s: float
    metadata_call_s: float = DEFAULT_LATENCY_S  # mean open/stat/access/close in the trace
    busy_core_slowdown: float = 1.8  # the profile's: transfer threads on the ranks' cores
    node_loss_share: float = 0.5  # the profile's: failures that take a node's storage along
    rates: ScrRates | None = None  # SCR's own, fitted by `scrtune calibrate`
    encode_rates: EncodeRates | None = None  # per node, with `rates`: the intent's
    pfs_scaling_per_doubling: float = 1.0
    fresh_memory_bytes_per_s: float = 0.0  # the profile's; 0: a mapped buffer costs nothing
    dirty_allowance_bytes: float = 0.0  # the parallel file system's, per node; 0: unknown
    # one core's (the profile's, else the default): RS's parity arithmetic
    rs_arithmetic_core_bytes_per_s: float = DEFAULT_RS_ARITHMETIC_BYTES_PER_S
    # the profile's: a transfer thread's busy share by buffer size, ascending; empty: computed
    thread_shares: tuple[ThreadShare, ...] = ()

    def scr_rank_bytes_per_s(self, node_bytes_per_s: float, nodes: int,
                             ranks_per_node: int) -> float:
        """A rank's share of a rate SCR reached per node at the calibration's node count."""
        assert self.rates is not None
        return self.rates.node_share(node_bytes_per_s, nodes, self.pfs_scaling_per_doubling) \
            / ranks_per_node


def machine(profile: SystemProfile, costs: list[TierCost],
            metadata_call_s: float = DEFAULT_LATENCY_S,
            traced: WorkloadStats | None = None) -> Machine:
    """Tiers from the system profile, with latencies and stream rates calibrated from the trace
    (`traced`, the workload the costs were fitted from) where it touched that tier."""
    fitted = {(c.tier, c.direction): c for c in costs}

    def tier(name: str, direction: str, storage) -> Tier:
        node_bps, latency_s = 1e9, DEFAULT_LATENCY_S
        if storage is not None:  # a measured profile has read rates and latencies too
            node_bps = storage.write_bytes_per_s
            if direction == "read" and storage.read_bytes_per_s:
                node_bps = storage.read_bytes_per_s
            latency_s = getattr(storage, f"{direction}_latency_s") or latency_s
        cost = fitted.get((name, direction))  # the trace's own calls, where it has them
        scaling = storage.scaling_per_doubling if storage else 1.0
        if cost and traced is not None:
            node_bps = max(node_bps, _delivered_per_node(cost.bytes_per_s, traced, scaling))
        return Tier(latency_s=cost.latency_s if cost else latency_s,
                    stream_bytes_per_s=cost.bytes_per_s if cost else node_bps,
                    node_bytes_per_s=node_bps, scaling_per_doubling=scaling)

    return Machine(local_write=tier("local", "write", profile.node_local),
                   local_read=tier("local", "read", profile.node_local),
                   pfs_write=tier("pfs", "write", profile.parallel),
                   pfs_read=tier("pfs", "read", profile.parallel),
                   network_bytes_per_s=profile.encode_bytes_per_s(),
                   cores_per_node=profile.cores_per_node, mtbf_node_s=profile.node_mtbf_s,
                   metadata_call_s=metadata_call_s,
                   busy_core_slowdown=profile.flush_slowdown(),
                   node_loss_share=profile.node_loss_share, rates=profile.scr_rates,
                   encode_rates=encode_rates(profile) if profile.scr_rates else None,
                   pfs_scaling_per_doubling=(profile.parallel.scaling_per_doubling
                                             if profile.parallel else 1.0),
                   fresh_memory_bytes_per_s=profile.fresh_memory_bytes_per_s,
                   dirty_allowance_bytes=(profile.parallel.dirty_allowance_bytes
                                          if profile.parallel else 0.0),
                   rs_arithmetic_core_bytes_per_s=profile.rs_arithmetic_core_bytes_per_s(),
                   thread_shares=tuple(sorted(profile.transfer_thread_shares,
                                              key=lambda share: share.buffer_bytes)))


def _delivered_per_node(stream_bytes_per_s: float, traced: WorkloadStats,
                        scaling_per_doubling: float) -> float:
    """The per-node rate at one node that the trace shows the tier delivered: its ranks wrote
    at the fitted stream rate all together, at its own scale. A profile measured from one
    client can be lower (issue 48: the trace's measured write time was replaced by the
    profile's aggregate bandwidth); at the trace's scale the trace is what happened."""
    hosts = max(traced.hosts, 1)
    ranks_per_host = max(traced.ranks, 1) / hosts
    return stream_bytes_per_s * hosts * ranks_per_host / scaling_per_doubling ** math.log2(hosts)


def predict(load: WorkloadStats, box: Machine, config: Config, nodes: int,
            ranks_per_node: int, checkpoints: int = 0, goodput: bool = True) -> Prediction:
    """checkpoints: the run's count, when it is a short one (a timed run, for calibration);
    0, a long job in steady state. goodput=False: the times alone (a fit's thousands of
    predictions), the goodput and the interval NaN."""
    # the busiest rank's bytes: SCR_Complete_output returns when every rank is done, so the
    # rank that writes most sets the time (issue 48: the mean rank was modelled)
    per_rank = max(load.busiest_rank_bytes, load.ckpt_bytes / max(load.ranks, 1))
    files = max(load.ckpt_files / max(load.ranks, 1), 1.0)
    app_calls = _calls(load, per_rank)
    metadata = SCR_METADATA_CALLS_PER_FILE * files * box.metadata_call_s
    args = (nodes, ranks_per_node)
    if config.bypass:
        write = _app_write(box, app_calls, per_rank, *args, checkpoints)
        blocking = write + metadata
        flush = streaming_s = 0.0
        restore = box.pfs_read.time(files, per_rank, *args)
    else:
        write = _cache_write(box, app_calls, per_rank, *args)
        blocking = write + metadata + _encode(config.copy_type, per_rank, box, nodes,
                                              ranks_per_node)
        if box.rates is not None:  # SCR's own work on a checkpoint is around the writes
            write -= box.rates.checkpoint_overhead_s
        calls_s, streaming_s = flush_parts(per_rank, files, box, config, *args,
                                           load.largest_file_bytes)
        flush = calls_s + streaming_s
        restore = box.local_read.time(files, per_rank, *args)
    mtbf = box.mtbf_node_s / nodes
    # a timed run (calibration) went at the job's own cadence; a long job at the interval the
    # recommendation sets (Daly's), which is what the goodput is reported at (issue 48), or,
    # when it keeps its own cadence (every N steps), at the compute gap it keeps
    kept = load.interval_s - load.ckpt_dur_s if checkpoints else 0.0
    own_gap = 0.0 if checkpoints else kept_gap_s(load)

    def cadence(b: float) -> float:
        if own_gap:
            return own_gap
        return min(daly(max(b, 1e-6), mtbf), kept) if kept > 0 else daly(max(b, 1e-6), mtbf)

    slowdown, dispatch = beside_threads(per_rank, files, box, config, ranks_per_node,
                                        load.largest_file_bytes) \
        if flush and config.flush_async and box.rates else (0.0, 0.0)
    if flush and config.flush_async and checkpoints and kept > 0:
        blocking = timed_blocking_s(blocking, flush, streaming_s, kept, slowdown,
                                    config.flush_every, config.cache_size, checkpoints, dispatch)
    elif flush and config.flush_async and not checkpoints:  # a long job, as a timed one settles
        blocking = settled_async(blocking, flush, streaming_s, slowdown, config, cadence,
                                 dispatch)
    elif flush:  # the flush hides behind the compute of the interval the goodput is taken at
        blocking += overrun_excess_s(blocking, flush, cadence(blocking), slowdown,
                                     config.flush_every)
        blocking = settled(blocking, flush, config, cadence, checkpoints)
    if not goodput:
        return Prediction(nodes=nodes, blocking_s=blocking, flush_s=flush, goodput=math.nan,
                          interval_s=math.nan, write_s=write)
    interval = cadence(blocking)
    lost = _cache_loss_share(load, box, config, nodes, restore + blocking) \
        * (interval + blocking) / mtbf
    return Prediction(nodes=nodes, blocking_s=blocking, flush_s=flush,
                      goodput=1.0 - expected_waste(interval, blocking, mtbf, restore) - lost,
                      interval_s=interval, write_s=write)


def _cache_loss_share(load: WorkloadStats, box: Machine, config: Config, nodes: int,
                      rebuild_window_s: float) -> float:
    """Segments of work lost per failure beyond the usual half segment, when a failure leaves
    the checkpoint only on the parallel file system: one that takes a node's cache along
    without redundancy, or more losses in a redundancy group before SCR_Init's rebuild than
    the copy type tolerates (the redundancy intent's share). The restart then reads the
    parallel file system's copy, which is behind by the flush cadence; without any flush,
    by every checkpoint the run made."""
    if config.bypass:
        return 0.0
    copy_type = config.copy_type if nodes > 1 else "SINGLE"  # SCR forces SINGLE on one node
    share = fatal_share(*group_of(copy_type, redundancy_set_size(nodes)), box.node_loss_share,
                        box.node_loss_share / box.mtbf_node_s, rebuild_window_s)
    if config.flush_every == 0:
        behind = max(load.checkpoints, 1)
    else:
        every = max(config.flush_every, 1)
        behind = pfs_lag_intervals(every, synchronous=not config.flush_async)
    return share * behind


def _app_write(box: Machine, calls: float, per_rank: float, nodes: int,
               ranks_per_node: int, checkpoints: int = 0) -> float:
    """The application's checkpoint writes straight to the parallel file system (bypass),
    unsynced. A timed run of few checkpoints seconds apart leaves each one's bytes in the page
    cache for the next (the kernel writes back only beyond its dirty allowance, then at the
    file system's rate as the profile measured it); a long job's are written back between
    its checkpoints."""
    if box.rates is None:
        return box.pfs_write.time(calls, per_rank, nodes, ranks_per_node)
    node_bytes = per_rank * ranks_per_node
    drain = box.pfs_write.rank_bytes_per_s(nodes, ranks_per_node) * ranks_per_node
    # unsynced bytes before each checkpoint of a timed run (none in a long job's, or without
    # an allowance, where they change nothing)
    dirty = [node_bytes * index for index in range(checkpoints)] \
        if checkpoints and box.dirty_allowance_bytes > 0 else [0.0]
    return calls * box.pfs_write.latency_s + sum(
        box.rates.app_write_s(node_bytes, nodes, box.pfs_scaling_per_doubling,
                              box.dirty_allowance_bytes, before, drain) for before in dirty
    ) / len(dirty)


def _cache_write(box: Machine, calls: float, per_rank: float, nodes: int,
                 ranks_per_node: int) -> float:
    """The application's writes to the node-local cache, plus SCR's own per-checkpoint work
    when calibrated (node-local stores scale with the nodes: a node's rate is its own)."""
    if box.rates is None:
        return box.local_write.time(calls, per_rank, nodes, ranks_per_node)
    return calls * box.local_write.latency_s + box.rates.cache_write_s(per_rank * ranks_per_node)


def _calls(load: WorkloadStats, per_rank: float) -> float:
    """Write calls per rank: the trace's own count, in proportion to the rank's bytes; without
    it, the bytes divided among the dominant write sizes. (Issue 48: the dominant sizes left
    out the 256 small writes of a rank's metadata file, which with a 2 ms call cost half a
    second of every bypass checkpoint.)"""
    if load.ckpt_write_calls > 0:
        mean_rank_bytes = load.ckpt_bytes / max(load.ranks, 1)
        share = per_rank / mean_rank_bytes if mean_rank_bytes > 0 else 1.0
        return load.ckpt_write_calls / max(load.ranks, 1) * share
    if not load.write_modes:
        return 1.0
    total_share = sum(m.bytes_share for m in load.write_modes) or 1.0
    return sum(per_rank * m.bytes_share / total_share / max(m.size_bytes, 1)
               for m in load.write_modes)


def _encode(copy_type: str, per_rank: float, box: Machine, nodes: int,
            ranks_per_node: int) -> float:
    if nodes == 1 or copy_type == "SINGLE":
        return 0.0  # SCR forces SINGLE on one node
    set_size = redundancy_set_size(nodes)
    if box.encode_rates is not None:  # calibrated: as the redundancy intent weighs it
        rates = box.encode_rates
        return encode_s(copy_type, per_rank * ranks_per_node, rates.write_bytes_per_s,
                        rates.read_bytes_per_s, rates.net_bytes_per_s, set_size,
                        rates.rs_arithmetic_bytes_per_s(ranks_per_node))
    arithmetic = rs_arithmetic_node_bytes_per_s(box.rs_arithmetic_core_bytes_per_s,
                                                ranks_per_node, box.cores_per_node)
    return encode_s(copy_type, per_rank, box.local_write.rank_bytes_per_s(nodes, ranks_per_node),
                    box.local_read.rank_bytes_per_s(nodes, ranks_per_node),
                    box.network_bytes_per_s / ranks_per_node, set_size,
                    arithmetic / ranks_per_node)
