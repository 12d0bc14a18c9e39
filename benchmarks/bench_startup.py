"""Start-up time of the `scrtune` command: wall time of whole runs, as a user sees them.

    python benchmarks/bench_startup.py --repeat 20

Runs the installed console script (beside this Python, else `python -m scrtune`) with each
argument list, `--repeat` times, and prints the median and the spread per command, next to a
bare `python -c pass` (the floor no command can beat). The goal (issue 10): `--help` under
0.15 s. Commands import only their own module, so `--help`, `--version` and `interval` must not
pay for numpy, ZeroMQ or the daemon.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import time

COMMANDS = (["--help"], ["--version"], ["interval", "--ckpt-cost", "300", "--mtbf", "86400"],
            ["lint", "--help"], ["replay", "--help"])


def _script() -> list[str]:
    beside = os.path.join(os.path.dirname(sys.executable), "scrtune")
    return [beside] if os.path.exists(beside) else [sys.executable, "-m", "scrtune"]


def _seconds(argv: list[str], repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    rows = [("python -c pass", [sys.executable, "-c", "pass"])]
    rows += [("scrtune " + " ".join(argv), [*_script(), *argv]) for argv in COMMANDS]
    print(f"{'command':<55} {'median s':>9} {'min s':>7} {'max s':>7}")
    for label, argv in rows:
        times = _seconds(argv, args.repeat)
        print(f"{label:<55} {statistics.median(times):>9.3f} {min(times):>7.3f} "
              f"{max(times):>7.3f}")


if __name__ == "__main__":
    main()
