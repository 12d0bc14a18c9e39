"""`scrtune profile`: this node measured, written as the system-profile TOML that recommend,
study and the daemon read.

One node can measure its cores, its memory and the write/read rates and per-call latency of
the directories it sees. It cannot measure how the parallel file system's bandwidth scales
with node count, the failure rates, the network between nodes, the OSTs behind a Lustre
directory, or which flush types the site's SCR build offers: those keep documented defaults,
and the file says so next to each one, for the user to edit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import msgspec
import psutil

from scrtune.intents.inputs import SystemProfile, ThreadShare
from scrtune.probe.arithmetic import rs_arithmetic_bytes_per_s
from scrtune.probe.contention import busy_core_slowdown
from scrtune.probe.copy_share import thread_shares
from scrtune.probe.dirty import dirty_allowance_bytes
from scrtune.probe.memory import fresh_memory_bytes_per_s
from scrtune.probe.storage import ProbeError, TierMeasurement, measure_tier, scratch_dir
from scrtune.units import human_bytes, human_rate, human_seconds, human_us

DEFAULT_SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20)  # metadata to tensor-sized writes
DEFAULT_CAP_BYTES = 512 << 20  # per file: enough to leave caches behind, bounded for tmpfs


@dataclass(frozen=True)
class ProbeSettings:
    local_path: str
    parallel_path: str
    budget_s: float = 50.0
    sizes: tuple[int, ...] = DEFAULT_SIZES
    streams: int = 0  # 0: min(cores, 4)
    cap_bytes: int = DEFAULT_CAP_BYTES


@dataclass(frozen=True)
class NodeMeasurement:
    cores: int
    memory_bytes: int
    local: TierMeasurement
    parallel: TierMeasurement
    busy_core_slowdown: float
    budget_s: float
    fresh_memory_bytes_per_s: float = 0.0
    dirty_allowance_bytes: float = 0.0  # the kernel's, for the parallel file system's writes
    rs_arithmetic_bytes_per_s: float = 0.0  # one core's RS parity arithmetic
    thread_shares: tuple[ThreadShare, ...] = ()  # a transfer thread's busy share by buffer


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
        psutil.cpu_count() or 1


def measure_node(settings: ProbeSettings) -> NodeMeasurement:
    for path in (settings.local_path, settings.parallel_path):  # before minutes are spent
        if not os.path.isdir(path):
            raise ProbeError(f"{path}: not a directory")
        if not os.access(path, os.W_OK | os.X_OK):
            raise ProbeError(f"{path}: not writable")
    cores = usable_cores()
    streams = settings.streams or min(cores, 4)
    # the node-local store is small and fast, the parallel one slower and noisier; then the
    # flush copy beside a busy core: 1 : 2 : 1
    local = measure_tier(settings.local_path, settings.sizes, streams, settings.budget_s / 4,
                         settings.cap_bytes)
    parallel = measure_tier(settings.parallel_path, settings.sizes, streams,
                            settings.budget_s / 2, settings.cap_bytes)
    with scratch_dir(settings.local_path) as cached, \
            scratch_dir(settings.parallel_path) as flushed:
        slowdown = busy_core_slowdown(cached, flushed, min(settings.cap_bytes, 256 << 20),
                                      settings.budget_s / 4)
        shares = thread_shares(cached, flushed, min(1.5, settings.budget_s / 20))
    # a second at most: the rate varies little, and the tiers' budgets stay as they were
    fresh = fresh_memory_bytes_per_s(min(1.0, settings.budget_s / 20))
    arithmetic = rs_arithmetic_bytes_per_s(min(0.5, settings.budget_s / 40))
    return NodeMeasurement(cores=cores, memory_bytes=psutil.virtual_memory().total,
                           local=local, parallel=parallel, busy_core_slowdown=slowdown,
                           budget_s=settings.budget_s, fresh_memory_bytes_per_s=fresh,
                           dirty_allowance_bytes=dirty_allowance_bytes(),
                           rs_arithmetic_bytes_per_s=arithmetic, thread_shares=shares)


def as_profile(node: NodeMeasurement) -> SystemProfile:
    """The measurement as a SystemProfile (the defaults for what one node cannot measure)."""
    data = {"source": "measured by scrtune profile", "cores_per_node": node.cores,
            "memory_per_node_bytes": node.memory_bytes,
            "node_local": _tier(node.local),
            "parallel": {**_tier(node.parallel),
                         "dirty_allowance_bytes": float(f"{node.dirty_allowance_bytes:.4g}")},
            "busy_core_slowdown": round(node.busy_core_slowdown, 2),
            "fresh_memory_bytes_per_s": float(f"{node.fresh_memory_bytes_per_s:.4g}"),
            "rs_arithmetic_bytes_per_s": float(f"{node.rs_arithmetic_bytes_per_s:.4g}"),
            "transfer_thread_shares": node.thread_shares}
    return msgspec.convert(data, SystemProfile)


def _tier(tier: TierMeasurement) -> dict[str, object]:
    return {"path": tier.path, "write_bytes_per_s": float(f"{tier.write_bytes_per_s:.4g}"),
            "read_bytes_per_s": float(f"{tier.read_bytes_per_s:.4g}"),
            "write_latency_s": float(f"{tier.write.latency_s:.3g}"),
            "read_latency_s": float(f"{tier.read.latency_s:.3g}"),
            "capacity_bytes": float(tier.free_bytes)}


NOT_MEASURED = """
# Not measurable on one node: defaults, edit them for your system.
nodes = 1                     # node count the job runs on (recommend/study take --nodes)
ranks_per_node = 0            # 0: from the trace
node_mtbf_s = {mtbf:.6g}      # mean time between failures of one node (5 years); from
                              # your centre's failure logs
node_loss_share = {loss}        # share of failures that destroy the node-local store
network_bytes_per_s = {net:.4g}  # per node, for PARTNER/XOR/RS encode traffic
ost_count = 0                 # Lustre OSTs behind the parallel path (`lfs df`); 0 unknown
flush_types = ["SYNC", "PTHREAD"]  # what your SCR/AXL build offers
scr_version = "{version}"
"""


def render_toml(node: NodeMeasurement) -> str:
    profile = as_profile(node)
    defaults = SystemProfile()
    lines = [
        f"# System profile measured by `scrtune profile` in {human_seconds(node.budget_s)} "
        "or less.",
        "# Writes are timed with their fsync; reads after posix_fadvise(DONTNEED), so the page",
        "# cache does not stand in for the store. Bandwidths are of all streams of one node at",
        "# once; a call's latency is what the smallest calls "
        f"({human_bytes(node.local.timings[0].size_bytes)}) cost beyond their bytes.",
        f"cores_per_node = {profile.cores_per_node}",
        f"memory_per_node_bytes = {profile.memory_per_node_bytes}"
        f"  # {human_bytes(profile.memory_per_node_bytes)}",
        f"busy_core_slowdown = {profile.busy_core_slowdown}  # a flush copy (node-local to "
        "parallel, fsync) on a core a rank keeps busy, against alone",
        f"fresh_memory_bytes_per_s = {profile.fresh_memory_bytes_per_s!r}  # "
        f"{human_rate(profile.fresh_memory_bytes_per_s)}: fresh pages beyond written kept "
        "ones (a flush buffer of 32 MiB or more is mapped anew for every file)",
        f"rs_arithmetic_bytes_per_s = {profile.rs_arithmetic_bytes_per_s!r}  # "
        f"{human_rate(profile.rs_arithmetic_bytes_per_s)}: one core multiplying bytes into an "
        "RS parity block, as SCR's redset does",
        "# a flush's transfer thread alone, copying node-local to parallel in buffer-sized calls",
        "# (a buffer malloc'd per file, as AXL does): the share of its time on a core",
        "transfer_thread_shares = [" + ", ".join(
            f"{{buffer_bytes = {share.buffer_bytes}, busy_share = {share.busy_share!r}}}"
            for share in profile.transfer_thread_shares) + "]",
        NOT_MEASURED.format(mtbf=defaults.node_mtbf_s, loss=defaults.node_loss_share,
                            net=defaults.network_bytes_per_s, version=defaults.scr_version),
    ]
    for name, tier in (("node_local", node.local), ("parallel", node.parallel)):
        values = _tier(tier)
        lines += [f"[{name}]  # {tier.fs_type}, {tier.streams} streams",
                  f"path = {toml_string(str(values['path']))}"]
        lines += [f"{key} = {values[key]!r}  # {_said(key, values[key])}"
                  for key in ("write_bytes_per_s", "read_bytes_per_s", "write_latency_s",
                              "read_latency_s", "capacity_bytes")]
        if name == "parallel":
            lines.append(f"dirty_allowance_bytes = {float(f'{node.dirty_allowance_bytes:.4g}')!r}"
                         f"  # {human_bytes(node.dirty_allowance_bytes)}: unsynced bytes the "
                         "page cache takes before writes go at this store's rate (the kernel's "
                         "dirty background threshold; 0 unknown)")
        lines += ["scaling_per_doubling = "
                  f"{2.0 if name == 'node_local' else 1.0}  # not measured: aggregate "
                  "bandwidth factor when nodes double" + (
                      " (node-local stores scale with nodes)" if name == "node_local" else
                      " (assumed flat; measure at two node counts to know)"), ""]
    return "\n".join(lines)


def _said(key: str, value: object) -> str:
    assert isinstance(value, float)
    if key == "capacity_bytes":
        return f"{human_bytes(value)} free when measured"
    return human_rate(value) if key.endswith("bytes_per_s") else human_us(value * 1e6)


def toml_string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
