"""What intents are derived from: the workload's statistics and the system's profile.

`WorkloadStats` is the part of a replay summary that intents use (so intents can be tested on
any workload, not only on traces); `SystemProfile` is what a trace cannot tell (cores, storage
bandwidths, failure rates), from a TOML file or measured on this machine and said so.
"""

from __future__ import annotations

import math
import os
import sys

import msgspec
import psutil

from scrtune.engine.summary import Summary
from scrtune.errors import UsageError
from scrtune.units import plural

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

YEAR_S = 365.25 * 24 * 3600
# The SCR versions scrtune can target: 3.1.0, whose parameters the catalogue describes, and
# 2.0.0, where SCR_FLUSH_WIDTH still limits how many ranks flush at once.
SCR_VERSIONS = ("3.1.0", "2.0.0")
FLUSH_TYPES = ("SYNC", "PTHREAD", "BBAPI", "DATAWARP")
MAX_NODES = 1_000_000  # beyond any machine: a typo, not a plan
# one core's RS parity arithmetic where the profile has none: what `scrtune profile` measured on
# the project's machine (AMD EPYC, 1.6-1.7 GB/s; redset's own loop in C 1.9 GB/s)
DEFAULT_RS_ARITHMETIC_BYTES_PER_S = 1.7e9
HELD = "not determined by the runs"  # said beside a calibrated rate it marks


class SizeShare(msgspec.Struct, frozen=True):
    size_bytes: int
    bytes_share: float


class WorkloadStats(msgspec.Struct, frozen=True, kw_only=True):
    """Per job checkpoint means unless said otherwise."""

    ranks: int = 1
    hosts: int = 1
    cores_used: tuple[int, ...] = ()  # the application's core affinity, when traced
    checkpoints: int = 0
    ckpt_bytes: float = 0.0
    ckpt_files: float = 0.0
    ckpt_dur_s: float = 0.0
    largest_file_bytes: int = 0
    restore_dur_s: float = 0.0
    interval_s: float = 0.0  # start to start
    write_modes: tuple[SizeShare, ...] = ()
    has_sizes: bool = True
    write_bytes_per_s: dict[str, float] = {}  # storage path prefix -> observed write bandwidth
    # True only when the trace shows each checkpoint writing files of its own (False: names
    # reused, or nothing to tell)
    ckpt_files_distinct: bool = False
    # the bytes of the rank that writes most in a checkpoint (mean over checkpoints): it
    # finishes last and sets a collective checkpoint's time (0: unknown, the mean rank's)
    busiest_rank_bytes: float = 0.0
    # write calls of a checkpoint, every rank's (0: not traced): each pays the tier's per-call
    # cost, the small ones as much as the large ones
    ckpt_write_calls: float = 0.0
    # start to start, when the job checkpoints on its own cadence (every N steps) and does not
    # ask SCR_Need_checkpoint: its compute between checkpoints stays what it is whatever SCR
    # does (0: the job follows the interval the recommendation sets)
    job_interval_s: float = 0.0
    # where ckpt_dur_s was measured, in words, when not the trace's checkpoint regions (the
    # daemon's: the saves its client timed); "": the mean of `checkpoints` in the trace
    ckpt_dur_said: str = ""

    def ckpt_dur_source(self) -> str:
        """Where the checkpoint cost was measured, for the evidence."""
        return self.ckpt_dur_said or f"mean of {self.checkpoints} in the trace"

    @classmethod
    def from_summary(cls, summary: Summary) -> WorkloadStats:
        saves = summary.checkpoints
        count = len(saves)
        mean = (lambda values: sum(values) / len(values)) if count else (lambda values: 0.0)
        return cls(
            ranks=max(summary.ranks, 1),
            hosts=max(len(summary.hosts), 1),
            cores_used=tuple(summary.cores),
            checkpoints=count,
            ckpt_bytes=mean([c.bytes_written for c in saves]),
            ckpt_files=mean([c.files for c in saves]),
            ckpt_dur_s=mean([c.dur_us / 1e6 for c in saves]),
            largest_file_bytes=max((c.bytes_per_file.max_bytes for c in saves), default=0),
            restore_dur_s=(sum(r.dur_us for r in summary.restores) / len(summary.restores) / 1e6
                           if summary.restores else 0.0),
            interval_s=(sum(i.interval_us for i in summary.intervals) / len(summary.intervals)
                        / 1e6 if summary.intervals else 0.0),
            write_modes=tuple(SizeShare(m.size_bytes, m.bytes_share) for m in summary.write_sizes),
            has_sizes=summary.has_io_args,
            write_bytes_per_s={b.prefix: b.bytes_per_s for b in summary.bandwidth
                               if b.direction == "write" and b.bytes_per_s > 0},
            ckpt_files_distinct=summary.checkpoint_files_reused is False,
            busiest_rank_bytes=mean([max(c.bytes_per_rank, default=0) for c in saves]),
            ckpt_write_calls=mean([c.write_calls for c in saves]),
        )


def _check(ok: bool, field: str, meaning: str, value: object) -> None:
    """Raised inside __post_init__, msgspec reports it as a one-line validation error."""
    if not ok:
        raise ValueError(f"{field}: must be {meaning}, got {value!r}")


def _positive(value: float) -> bool:
    return math.isfinite(value) and value > 0


class StorageTier(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    path: str
    write_bytes_per_s: float  # per node
    scaling_per_doubling: float = 2.0  # aggregate bandwidth factor when nodes double
    read_bytes_per_s: float = 0.0  # per node; 0: unknown, taken as the write bandwidth
    write_latency_s: float = 0.0  # per call; 0: unknown (from the trace, else a default)
    read_latency_s: float = 0.0
    capacity_bytes: float = 0.0  # what the store can hold per node; 0: unknown
    # unsynced bytes a node's writes may leave in its page cache before the kernel writes
    # them back and holds the writers to the store's rate (Linux: the dirty background
    # threshold); 0: unknown
    dirty_allowance_bytes: float = 0.0

    def __post_init__(self) -> None:
        _check(bool(self.path), "path", "a directory", self.path)
        _check(_positive(self.write_bytes_per_s), "write_bytes_per_s",
               "a positive, finite bandwidth in bytes/s", self.write_bytes_per_s)
        for name in ("read_bytes_per_s", "write_latency_s", "read_latency_s", "capacity_bytes",
                     "dirty_allowance_bytes"):
            value = getattr(self, name)
            _check(math.isfinite(value) and value >= 0, name, "0 (unknown) or a positive, "
                   "finite number", value)
        _check(math.isfinite(self.scaling_per_doubling) and 0 < self.scaling_per_doubling <= 2,
               "scaling_per_doubling", "above 0 and at most 2 (2: bandwidth doubles with nodes)",
               self.scaling_per_doubling)


class ScrRates(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What SCR itself achieved on this system, fitted by `scrtune calibrate` from timed runs
    of a job under several SCR configurations. Where present these replace what the storage
    tiers suggest: a real flush is slower than a plain synced copy, encoding is slower than the
    network, an application's writes to the parallel file system land in its page cache.
    Rates are per node at `nodes` nodes; other node counts scale them as the tiers say."""

    source: str = ""
    nodes: int = 1  # the node count of the runs fitted
    app_pfs_write_bytes_per_s: float  # the application's writes with SCR_CACHE_BYPASS=1
    cache_write_bytes_per_s: float  # the application's writes to the node-local cache
    encode_bytes_per_s: float  # PARTNER/XOR encode traffic, sent and stored
    flush_bytes_per_s: float  # SCR's flush, cache to parallel file system, end to end
    flush_call_s: float = 0.0  # per file-buffer-sized call of a flush, beyond its bytes
    busy_core_slowdown: float = 1.0  # a flush whose threads share the ranks' busy cores
    checkpoint_overhead_s: float = 0.0  # SCR's own cost per cached checkpoint
    # how much longer the checkpoint's own writes and encode take while a background flush
    # runs, per unit of the interval the flush is active and per busy transfer thread (one
    # copying, not waiting on the file system's call)
    flush_interference: float = 0.0
    # how much longer they take while a background flush runs, whatever its threads do (its
    # page cache, memory and kernel work), per unit of the interval the flush is active (issue
    # 48: on the real SCR, SINGLE checkpoints with 1 MB buffers, whose threads mostly wait on
    # the file system's calls, blocked 0.5 s with a flush beside each and 0.3 s without)
    flush_overlap_slowdown: float = 0.0
    # the rates the runs did not determine (a factor of 2 on one, the others refitted, moved
    # the fit by less than its noise; or the search stopped at a bound): they hold the
    # uncalibrated model's value, not a measurement
    undetermined: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _check(1 <= self.nodes <= MAX_NODES, "scr_rates.nodes", "a node count", self.nodes)
        unknown = set(self.undetermined) - (set(type(self).__struct_fields__)
                                            - {"source", "nodes", "undetermined"})
        _check(not unknown, "scr_rates.undetermined", "names of rates in this table",
               sorted(unknown))
        for name in ("app_pfs_write_bytes_per_s", "cache_write_bytes_per_s",
                     "encode_bytes_per_s", "flush_bytes_per_s"):
            _check(_positive(getattr(self, name)), f"scr_rates.{name}",
                   "a positive, finite bandwidth in bytes/s", getattr(self, name))
        for name in ("flush_call_s", "checkpoint_overhead_s"):
            value = getattr(self, name)
            _check(math.isfinite(value) and 0 <= value <= 3600, f"scr_rates.{name}",
                   "seconds from 0 to 3600", value)
        for name in ("flush_interference", "flush_overlap_slowdown"):
            value = getattr(self, name)
            _check(math.isfinite(value) and 0 <= value <= 100, f"scr_rates.{name}",
                   "a slowdown from 0 (none) to 100 (101 times as long)", value)
        _check(math.isfinite(self.busy_core_slowdown) and 1 <= self.busy_core_slowdown <= 1000,
               "scr_rates.busy_core_slowdown", "a factor from 1 to 1000",
               self.busy_core_slowdown)

    def held(self, name: str) -> bool:
        """Whether the runs left this rate undetermined: a value held, not a measurement."""
        return name in self.undetermined

    def node_share(self, bytes_per_s: float, nodes: int, scaling_per_doubling: float) -> float:
        """One node's share at `nodes` nodes of a rate each node reached at the runs' node
        count, the aggregate scaled per doubling like the parallel file system's."""
        aggregate = bytes_per_s * self.nodes \
            * scaling_per_doubling ** math.log2(max(nodes, 1) / self.nodes)
        return aggregate / max(nodes, 1)

    def cache_write_s(self, node_bytes: float) -> float:
        """A node's checkpoint of `node_bytes` into its cache, with SCR's per-checkpoint work
        (node-local stores scale with the nodes: a node's rate is its own)."""
        return node_bytes / self.cache_write_bytes_per_s + self.checkpoint_overhead_s

    def app_write_s(self, node_bytes: float, nodes: int, scaling_per_doubling: float,
                    allowance_bytes: float = 0.0, dirty_bytes: float = 0.0,
                    drain_bytes_per_s: float = 0.0) -> float:
        """A node's checkpoint of `node_bytes` written by the application to the parallel file
        system (bypass), its aggregate shared by `nodes` nodes. The writes are not synced:
        they go at the page cache's pace while the node's unsynced bytes (`dirty_bytes` before
        it) stay within its `allowance_bytes`, and beyond it at the file system's own rate,
        `drain_bytes_per_s` a node (issue 48: the 4th and 5th checkpoints' 400 MB a node went
        at 0.26 GB/s, the file system's rate, the first three's ten times as fast). Either 0
        (unknown): every byte at the page cache's pace."""
        paced = self.node_share(self.app_pfs_write_bytes_per_s, nodes, scaling_per_doubling)
        if allowance_bytes <= 0 or drain_bytes_per_s <= 0:
            return node_bytes / paced
        room = min(max(allowance_bytes - dirty_bytes, 0.0), node_bytes)
        return room / paced + (node_bytes - room) / drain_bytes_per_s


class ThreadShare(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """A flush's transfer thread alone, copying node-local files to the parallel file system in
    `buffer_bytes` calls as AXL does: the share of its time it keeps a core busy."""
    buffer_bytes: int
    busy_share: float

    def __post_init__(self) -> None:
        _check(1 <= self.buffer_bytes <= 1 << 40, "transfer_thread_shares.buffer_bytes",
               "a buffer size from 1 byte to 1 TiB", self.buffer_bytes)
        _check(math.isfinite(self.busy_share) and 0 < self.busy_share <= 1,
               "transfer_thread_shares.busy_share", "a share above 0 and at most 1",
               self.busy_share)


class SystemProfile(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    source: str = "defaults"
    cores_per_node: int = 1
    memory_per_node_bytes: int = 0
    nodes: int = 1
    ranks_per_node: int = 0  # 0: from the trace
    node_local: StorageTier | None = None
    parallel: StorageTier | None = None
    ost_count: int = 0  # Lustre OSTs behind the prefix directory; 0 unknown
    node_mtbf_s: float = 5 * YEAR_S
    node_loss_share: float = 0.5  # share of failures that destroy the node's local storage
    scr_version: str = "3.1.0"
    network_bytes_per_s: float = 10e9  # per node, for encode traffic
    flush_types: tuple[str, ...] = ("SYNC", "PTHREAD")  # what this SCR/AXL build offers
    # how much longer a flush copy takes when its thread shares a core with a busy rank:
    # `scrtune profile` measures this node's, `calibrate` SCR's own. Unmeasured, the corrected
    # study's figure (one file's Lustre write during the async flush, bound against unbound,
    # on Corona: ~1.8x; the 10x once shipped here compared thread-seconds with one thread's
    # time, scr-dlio-study.md, corrected 2026-11-24)
    busy_core_slowdown: float = 1.8
    # fresh pages a second beyond written kept ones (`scrtune profile`): what a flush buffer
    # that glibc maps afresh for every file costs (SCR_FILE_BUF_SIZE of 32 MiB or more, issue
    # 48); 0: unmeasured, and the study's model prices no such mapping
    fresh_memory_bytes_per_s: float = 0.0
    # one core's Reed-Solomon parity arithmetic (redset multiplies every byte it receives into
    # each parity block by table lookup, on the rank's own core): `scrtune profile` measures it;
    # 0: unmeasured, and RS is weighed at DEFAULT_RS_ARITHMETIC_BYTES_PER_S
    rs_arithmetic_bytes_per_s: float = 0.0
    # a transfer thread's busy share of a core by file buffer size (`scrtune profile`, issue
    # 48); empty: unmeasured, and the study's model computes one from the node-local read rate
    transfer_thread_shares: tuple[ThreadShare, ...] = ()
    scr_rates: ScrRates | None = None  # measured through SCR itself (`scrtune calibrate`)

    def __post_init__(self) -> None:
        _check(1 <= self.cores_per_node <= 1 << 20, "cores_per_node", "a positive count",
               self.cores_per_node)
        _check(1 <= self.nodes <= MAX_NODES, "nodes", f"a count from 1 to {MAX_NODES:,}",
               self.nodes)
        for name in ("memory_per_node_bytes", "ranks_per_node", "ost_count"):
            value = getattr(self, name)
            _check(0 <= value <= 1 << 62, name, "0 (unknown) or a positive number", value)
        _check(_positive(self.node_mtbf_s), "node_mtbf_s",
               "a positive, finite number of seconds", self.node_mtbf_s)
        _check(0 <= self.node_loss_share <= 1, "node_loss_share", "a share from 0 to 1",
               self.node_loss_share)
        _check(_positive(self.network_bytes_per_s), "network_bytes_per_s",
               "a positive, finite bandwidth in bytes/s", self.network_bytes_per_s)
        _check(self.scr_version in SCR_VERSIONS, "scr_version",
               f"one of {', '.join(SCR_VERSIONS)}", self.scr_version)
        _check(math.isfinite(self.busy_core_slowdown) and 1 <= self.busy_core_slowdown <= 1000,
               "busy_core_slowdown", "a factor from 1 to 1000", self.busy_core_slowdown)
        _check(self.fresh_memory_bytes_per_s == 0 or _positive(self.fresh_memory_bytes_per_s),
               "fresh_memory_bytes_per_s", "0 (unmeasured) or a positive, finite rate in "
               "bytes/s", self.fresh_memory_bytes_per_s)
        _check(self.rs_arithmetic_bytes_per_s == 0 or _positive(self.rs_arithmetic_bytes_per_s),
               "rs_arithmetic_bytes_per_s", "0 (unmeasured) or a positive, finite rate in "
               "bytes/s", self.rs_arithmetic_bytes_per_s)
        sizes = [share.buffer_bytes for share in self.transfer_thread_shares]
        _check(len(set(sizes)) == len(sizes), "transfer_thread_shares",
               "one entry per buffer_bytes", sizes)
        unknown = [t for t in self.flush_types if t not in FLUSH_TYPES]
        _check(bool(self.flush_types) and not unknown, "flush_types",
               f"a non-empty list of {', '.join(FLUSH_TYPES)} (upper case, as SCR reads them)",
               list(self.flush_types))

    def flush_slowdown(self) -> float:
        """A flush's slowdown beside busy ranks: fitted through SCR when calibrated."""
        return self.scr_rates.busy_core_slowdown if self.scr_rates else self.busy_core_slowdown

    def rs_arithmetic_core_bytes_per_s(self) -> float:
        return self.rs_arithmetic_bytes_per_s or DEFAULT_RS_ARITHMETIC_BYTES_PER_S

    def encode_bytes_per_s(self) -> float:
        """Per node, for redundancy encoding: SCR's own rate when calibrated."""
        return self.scr_rates.encode_bytes_per_s if self.scr_rates else self.network_bytes_per_s

    def flush_node_bytes_per_s(self, nodes: int) -> float:
        """One node's share of the flush bandwidth at `nodes` nodes, from SCR's measured flush
        when calibrated (at its node count), else from the parallel tier's synced writes; the
        aggregate scales by the tier's factor per doubling. 0 without either."""
        scaling = self.parallel.scaling_per_doubling if self.parallel else 1.0
        if self.scr_rates:
            return self.scr_rates.node_share(self.scr_rates.flush_bytes_per_s, nodes, scaling)
        if self.parallel:
            return self.parallel.write_bytes_per_s * scaling ** math.log2(max(nodes, 1)) \
                / max(nodes, 1)
        return 0.0


def rs_arithmetic_node_bytes_per_s(per_core_bytes_per_s: float, ranks_per_node: int,
                                   cores_per_node: int) -> float:
    """Per node, RS's parity arithmetic: each rank multiplies on its own core, so as many at
    once as there are ranks, up to the cores."""
    return per_core_bytes_per_s * min(max(ranks_per_node, 1), cores_per_node)


def load_profile(path: str) -> SystemProfile:
    """A system profile from TOML; unknown keys and wrong types are one-line errors."""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode()
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: not UTF-8 at byte {exc.start}") from None
    return parse_profile(text, path)


def parse_profile(text: str, path: str) -> SystemProfile:
    """A system profile from TOML text; `path` names it in errors and in its source."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    if not data:  # accepted before without a word, as "1 cores per node" (issue 49)
        sys.stderr.write(f"warning: {path} is an empty system profile: every value is "
                         "assumed (1 core per node, no storage tiers, a 5-year node MTBF)\n")
        data["source"] = f"file {path}, empty: every value assumed"
    data.setdefault("source", f"file {path}")
    try:
        return msgspec.convert(data, SystemProfile)
    except msgspec.ValidationError as exc:
        raise UsageError(f"{path}: {exc}") from None


def with_nodes(profile: SystemProfile, nodes: int) -> SystemProfile:
    """The profile planned for `nodes` nodes, validated like the file's own count."""
    try:
        return msgspec.structs.replace(profile, nodes=nodes)
    except ValueError as exc:
        raise UsageError(f"--nodes: {exc}") from None


def profile_from(path: str | None) -> SystemProfile:
    """The profile in `path` (TOML), or this machine as measured when no path is given."""
    return load_profile(path) if path else measured_profile()


def measured_profile(nodes: int = 1) -> SystemProfile:
    """This machine, as psutil sees it; storage bandwidths are unknown (not measured here)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        psutil.cpu_count() or 1
    memory = psutil.virtual_memory().total
    return SystemProfile(
        source=f"measured on this machine with psutil ({plural(cores, 'core')}, "
               f"{memory >> 30} GiB); "
               "no storage bandwidths, OST count or failure rates were given: defaults assumed "
               "(`scrtune profile` measures the storage)",
        cores_per_node=cores, memory_per_node_bytes=memory, nodes=nodes)
