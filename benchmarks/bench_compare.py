"""Replay of one trace by this code and by a previous checkout, alternating, in one session.

    git worktree add /tmp/previous <commit>   # then build its C parts in place:
    (cd /tmp/previous && python setup.py build_ext --inplace)
    python benchmarks/bench_compare.py TRACE --previous /tmp/previous --rounds 5
    python benchmarks/bench_compare.py TRACE --previous /tmp/previous --in-process

Each round runs `gzip -dc`, python-isal's inflate alone (the floor), then `scrtune replay
--format json` with 1 and 2 workers for both codes; alternating keeps a noisy machine's drift
out of the comparison. Prints median (min-max) seconds and the ratio to `gzip -dc`.
`--in-process` times `replay()` inside one interpreter instead (no start-up, no output) and
adds the CPU of the replaying thread, which inflates and aggregates: the part parse threads
cannot share, and a steadier figure than wall time on a noisy machine.
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


_IN_PROCESS = """import sys, time
from scrtune.engine.replay import ReplayOptions, replay
cpu, wall = time.thread_time(), time.perf_counter()
replay([sys.argv[1]], ReplayOptions(workers=int(sys.argv[2])))
print(time.perf_counter() - wall, time.thread_time() - cpu)
"""


def commands(trace: str, previous: str | None, in_process: bool = False
             ) -> dict[str, tuple[list[str], dict[str, str]]]:
    found = {"gzip -dc": (["sh", "-c", f"gzip -dc '{trace}' > /dev/null"], {}),
             "ISA-L inflate (python-isal)": ([sys.executable, "-c", _INFLATE, trace], {})}
    codes = [("this", {})] + ([("previous", {"PYTHONPATH": previous})] if previous else [])
    for label, env in codes:
        for workers in (1, 2):
            cmd = [sys.executable, "-c", _IN_PROCESS, trace, str(workers)] if in_process \
                else [sys.executable, "-m", "scrtune", "replay", trace, "--format", "json",
                      "--workers", str(workers)]
            found[f"{label}, --workers {workers}"] = (cmd, env)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--previous", help="a checkout of the previous code (its PYTHONPATH)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--in-process", action="store_true",
                        help="time replay() in one interpreter, with the replaying thread's CPU")
    args = parser.parse_args()
    runs = commands(os.path.abspath(args.trace), args.previous, args.in_process)
    seconds: dict[str, list[float]] = {name: [] for name in runs}
    thread_cpu: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(args.rounds):
        for name, (cmd, env) in runs.items():
            started = time.perf_counter()
            out = subprocess.run(cmd, env={**os.environ, "OPENBLAS_NUM_THREADS": "1", **env},
                                 cwd="/", check=True, capture_output=True, text=True).stdout
            elapsed = time.perf_counter() - started
            if args.in_process and name.startswith(("this", "previous")):
                wall, cpu = map(float, out.split())
                seconds[name].append(wall)
                thread_cpu[name].append(cpu)
            else:
                seconds[name].append(elapsed)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; {args.rounds} rounds"
          f"{', replay() in process' if args.in_process else ''}\n")
    print("| tool | seconds, median (min-max) | x gzip -dc | replaying thread CPU s |\n"
          "|---|---:|---:|---:|")
    gzip_s = statistics.median(seconds["gzip -dc"])
    for name, times in seconds.items():
        middle = statistics.median(times)
        cpu = f"{statistics.median(thread_cpu[name]):.2f}" if thread_cpu[name] else ""
        print(f"| {name} | {middle:.2f} ({min(times):.2f}-{max(times):.2f}) | "
              f"{middle / gzip_s:.2f} | {cpu} |")


if __name__ == "__main__":
    main()
