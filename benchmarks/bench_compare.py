"""Replay of one trace by this code and by a previous checkout, alternating, in one session.

    git worktree add /tmp/previous <commit>   # then build its C parts in place:
    (cd /tmp/previous && python setup.py build_ext --inplace)
    python benchmarks/bench_compare.py TRACE --previous /tmp/previous --rounds 5

Each round runs `gzip -dc`, python-isal's inflate alone (the floor), then `scrtune replay
--format json` with 1 and 2 workers for both codes; alternating keeps a noisy machine's drift
out of the comparison. Prints median (min-max) seconds and the ratio to `gzip -dc`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

_INFLATE = """import sys
from isal import isal_zlib
inflater, handle = isal_zlib.decompressobj(31), open(sys.argv[1], "rb")
while block := handle.read(1 << 20):
    while block:
        inflater.decompress(block, 4 << 20)
        block = inflater.unconsumed_tail
        if inflater.eof:
            block, inflater = inflater.unused_data, isal_zlib.decompressobj(31)
"""


def commands(trace: str, previous: str | None) -> dict[str, tuple[list[str], dict[str, str]]]:
    found = {"gzip -dc": (["sh", "-c", f"gzip -dc '{trace}' > /dev/null"], {}),
             "ISA-L inflate (python-isal)": ([sys.executable, "-c", _INFLATE, trace], {})}
    codes = [("this", {})] + ([("previous", {"PYTHONPATH": previous})] if previous else [])
    for label, env in codes:
        for workers in (1, 2):
            found[f"{label}, --workers {workers}"] = (
                [sys.executable, "-m", "scrtune", "replay", trace, "--format", "json",
                 "--workers", str(workers)], env)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--previous", help="a checkout of the previous code (its PYTHONPATH)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    runs = commands(os.path.abspath(args.trace), args.previous)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (cmd, env) in runs.items():
            started = time.perf_counter()
            subprocess.run(cmd, env={**os.environ, **env}, cwd="/", check=True,
                           stdout=subprocess.DEVNULL)
            seconds[name].append(time.perf_counter() - started)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; {args.rounds} rounds\n")
    print("| tool | seconds, median (min-max) | x gzip -dc |\n|---|---:|---:|")
    gzip_s = statistics.median(seconds["gzip -dc"])
    for name, times in seconds.items():
        middle = statistics.median(times)
        print(f"| {name} | {middle:.2f} ({min(times):.2f}-{max(times):.2f}) | "
              f"{middle / gzip_s:.2f} |")


if __name__ == "__main__":
    main()
