"""Intent 4: concurrent writers against storage targets: Lustre striping of the prefix
directory (a runtime `lfs setstripe`), and SCR_FLUSH_WIDTH only for SCR v2 (v3 ignores it)."""

from __future__ import annotations

import math

import msgspec

from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import Intent, mib, nodes, ranks_per_node
from scrtune.units import plural

MIB = 1 << 20
LARGE_FILE_PER_STRIPE = 4 << 30  # spread files beyond this over more OSTs


class Striping(msgspec.Struct, frozen=True, kw_only=True):
    stripe_count: int
    stripe_size_bytes: int
    directory: str
    command: str
    flush_width: int | None  # SCR v2 only


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    osts = profile.ost_count
    files = max(1, round(stats.ckpt_files))
    # SCR flushes each checkpoint into a directory under its prefix: stripe that, not the file
    # system's root the profile names (the client fills in its own SCR_PREFIX at run time)
    directory = "$SCR_PREFIX"
    behind = profile.parallel.path if profile.parallel else "the parallel file system"
    if osts:
        count = min(osts, max(1, math.ceil(osts / files),
                              math.ceil(stats.largest_file_bytes / LARGE_FILE_PER_STRIPE)))
    else:
        count = 1
    dominant = max((m.size_bytes for m in stats.write_modes), default=MIB)
    size = min(64 * MIB, max(MIB, 1 << max(0, (dominant - 1).bit_length())))
    evidence = [
        f"{plural(files, 'file')} per checkpoint from {plural(stats.ranks, 'rank')}; largest file "
        f"{mib(stats.largest_file_bytes)}",
        f"{osts} OSTs behind {behind}" if osts else "OST count unknown (give ost_count in "
        "the system profile): one stripe per file",
        f"stripe size {mib(size)} to match the dominant writes",
    ]
    v2 = profile.scr_version.startswith("2")
    # the planned job's ranks (the profile's nodes x ranks per node), not the trace's
    planned = nodes(stats, profile) * ranks_per_node(stats, profile)
    width = min(planned, 4 * osts) if v2 and osts else None
    if not v2:
        evidence.append(f"SCR v{profile.scr_version} ignores SCR_FLUSH_WIDTH: every rank "
                        "flushes at once, so striping is the lever")
    elif width:
        evidence.append(f"SCR v{profile.scr_version} limits concurrent flushes with "
                        f"SCR_FLUSH_WIDTH: {width} (4 per OST, at most one per rank)")
    else:
        evidence.append(f"SCR v{profile.scr_version} limits concurrent flushes with "
                        "SCR_FLUSH_WIDTH, but the OST count is unknown: left at its default")
    command = f"lfs setstripe -c {count} -S {size // MIB}M {directory}"
    return Intent(name="striping", scope="job", confidence=0.6 if osts else 0.2,
                  evidence=tuple(evidence),
                  value=Striping(stripe_count=count, stripe_size_bytes=size,
                                 directory=directory, command=command, flush_width=width))
