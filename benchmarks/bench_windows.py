"""Memory and `recommend` time of the daemon's statistics under a stream of checkpoint regions.

    python benchmarks/bench_windows.py [--regions 1000000] [--tree /tmp/previous]

Feeds the daemon's engine (Stats with the daemon's process bound, through the daemon's own
parse step) blocks of 25,000 checkpoint save regions of one process, 10 µs apart: what a buggy
or hostile sender can stream at the daemon's intake rate in well under a second. Reports the
windows held, the growth of resident memory, and the time of what each `recommend` does with
the state (a copy through bytes, then `finish`). `--tree` runs the same in another checkout,
in a subprocess, for a before-and-after table.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys

_MEASURE = r"""
import sys, time
from scrtune.daemon.intake import parse_messages
from scrtune.daemon.service import MAX_PROCESSES
from scrtune.engine.stats import Stats
from scrtune.engine.summary import finish

def rss_mib():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024

regions, block = int(sys.argv[1]), 25_000
stats = Stats(max_processes=MAX_PROCESSES)
before = rss_mib()
ts = 1_000_000
for first in range(0, regions, block):
    lines = []
    for i in range(first, min(first + block, regions)):
        ts += 10
        lines.append(b'{"id":%d,"name":"save_checkpoint","cat":"checkpoint","pid":7,"tid":7,'
                     b'"ts":%d,"dur":5,"ph":1,"args":{"epoch":%d}}' % (i, ts, i))
    for batch in parse_messages([b"\n".join(lines)]).batches:
        stats.add(batch)
grown = rss_mib() - before
held = sum(len(t.windows) for t in stats.timelines.values())
started = time.perf_counter()
finish(Stats.from_bytes(stats.to_bytes()))
print(held, round(grown), round(time.perf_counter() - started, 2))
"""


def measure(regions: int, tree: str | None) -> list[str]:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    if tree:
        env["PYTHONPATH"] = tree
    out = subprocess.run([sys.executable, "-c", _MEASURE, str(regions)], capture_output=True,
                         text=True, env=env, cwd="/" if tree else None, check=True)
    return out.stdout.split()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--regions", type=int, default=1_000_000)
    parser.add_argument("--tree", help="also run a previous checkout (its C parts built)")
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    print("| code | regions | windows held | RSS growth MiB | recommend's copy + finish s |")
    print("|---|---:|---:|---:|---:|")
    runs = [("previous", args.tree)] if args.tree else []
    for name, tree in runs + [("this", None)]:
        held, grown, seconds = measure(args.regions, tree)
        print(f"| {name} | {args.regions:,} | {int(held):,} | {grown} | {seconds} |")


if __name__ == "__main__":
    main()
