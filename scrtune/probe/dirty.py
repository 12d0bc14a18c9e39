"""How many unsynced bytes this node's page cache takes before the kernel writes them back and
holds writers to the file system's rate: the dirty allowance of an application's checkpoint
written straight to the parallel file system (SCR's bypass, whose writes SCR never syncs).

Linux writes dirty pages back from `vm.dirty_background_bytes`, or, when that is 0,
`vm.dirty_background_ratio` percent of the memory it may fill (MemAvailable stands for it).
Issue 48: on the project's machine, checkpoints of 400 MB a node went at the page cache's pace
until the node's unsynced bytes passed that threshold, and at the flush's rate after it.
"""

from __future__ import annotations

VM = "/proc/sys/vm"
MEMINFO = "/proc/meminfo"


def dirty_allowance_bytes(vm: str = VM, meminfo: str = MEMINFO) -> float:
    """The kernel's background writeback threshold in bytes; 0 where it cannot be read (not
    Linux, or an unreadable /proc)."""
    try:
        fixed = _number(f"{vm}/dirty_background_bytes")
        if fixed > 0:
            return float(fixed)
        ratio = _number(f"{vm}/dirty_background_ratio")
        return ratio / 100 * _available_bytes(meminfo)
    except (OSError, ValueError):
        return 0.0


def _number(path: str) -> int:
    with open(path) as handle:
        value = int(handle.read().strip())
    if value < 0:
        raise ValueError(f"{path}: {value}")
    return value


def _available_bytes(meminfo: str) -> float:
    with open(meminfo) as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            if name == "MemAvailable":
                number, unit = rest.split()[:2]
                if unit != "kB":
                    raise ValueError(f"{meminfo}: MemAvailable in {unit}")
                return int(number) * 1024.0
    raise ValueError(f"{meminfo}: no MemAvailable")
