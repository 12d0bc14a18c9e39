"""The daemon keeps freed memory for reuse (daemon/heap.py): a freed block stays resident
instead of being unmapped, so the next block does not fault its pages in again."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or
                                not os.confstr("CS_GNU_LIBC_VERSION"),
                                reason="glibc's mallopt only")

_PROBE = """
import sys
from scrtune.daemon.heap import hold_freed_memory

def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

held = hold_freed_memory() if sys.argv[1] == "held" else None
block = bytearray(16 << 20)  # zeroed: every page touched
before = rss_kib()
del block
print(held, before - rss_kib())
"""


def _freed_kib(mode: str) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True,
                         check=True, timeout=60).stdout.split()
    return out[0], int(out[1])


def test_freed_blocks_stay_resident_only_when_held():
    held, kept_back = _freed_kib("held")
    default, given_back = _freed_kib("default")
    assert held == "True" and default == "None"
    assert given_back > 12 << 10  # glibc's default: the 16 MiB block is unmapped when freed
    assert kept_back < 4 << 10  # held: it stays for the next block
