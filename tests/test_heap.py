"""Freed memory kept for reuse (scrtune/heap.py): a freed block stays resident
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
from scrtune.heap import hold_freed_memory

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


_AFTER_REPLAY = """
import contextlib, io, sys
from scrtune.engine.replay import EXAMPLE_TRACE, replay

def rss_kib():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])

if sys.argv[1] == "command":
    from scrtune.cli.main import main
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["replay", "--example", "--format", "json"]) == 0
else:
    replay([EXAMPLE_TRACE])
block = bytearray(16 << 20)
before = rss_kib()
del block
print(before - rss_kib())
"""


def test_trace_reading_commands_keep_freed_memory_and_the_library_does_not():
    """`scrtune replay` (and the commands that read traces) set the heap for their blocks;
    a library call leaves the host process's allocator as it was."""
    returned = {}
    for mode in ("command", "library"):
        out = subprocess.run([sys.executable, "-c", _AFTER_REPLAY, mode], capture_output=True,
                             text=True, check=True, timeout=120)
        returned[mode] = int(out.stdout.split()[-1])
    assert returned["command"] < 4 << 10
    assert returned["library"] > 12 << 10
