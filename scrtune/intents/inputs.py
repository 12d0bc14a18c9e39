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

    def __post_init__(self) -> None:
        _check(bool(self.path), "path", "a directory", self.path)
        _check(_positive(self.write_bytes_per_s), "write_bytes_per_s",
               "a positive, finite bandwidth in bytes/s", self.write_bytes_per_s)
        for name in ("read_bytes_per_s", "write_latency_s", "read_latency_s", "capacity_bytes"):
            value = getattr(self, name)
            _check(math.isfinite(value) and value >= 0, name, "0 (unknown) or a positive, "
                   "finite number", value)
        _check(math.isfinite(self.scaling_per_doubling) and 0 < self.scaling_per_doubling <= 2,
               "scaling_per_doubling", "above 0 and at most 2 (2: bandwidth doubles with nodes)",
               self.scaling_per_doubling)


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
    # how much longer a flush copy takes when its thread shares a core with a busy rank: the
    # study saw ~10x on Corona; `scrtune profile` measures this node's
    busy_core_slowdown: float = 10.0

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
        unknown = [t for t in self.flush_types if t not in FLUSH_TYPES]
        _check(bool(self.flush_types) and not unknown, "flush_types",
               f"a non-empty list of {', '.join(FLUSH_TYPES)} (upper case, as SCR reads them)",
               list(self.flush_types))


def load_profile(path: str) -> SystemProfile:
    """A system profile from TOML; unknown keys and wrong types are one-line errors."""
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: not UTF-8 at byte {exc.start}") from None
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
        source=f"measured on this machine with psutil ({cores} cores, {memory >> 30} GiB); "
               "no storage bandwidths, OST count or failure rates were given: defaults assumed "
               "(`scrtune profile` measures the storage)",
        cores_per_node=cores, memory_per_node_bytes=memory, nodes=nodes)
