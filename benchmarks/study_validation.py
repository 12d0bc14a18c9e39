"""Leave-one-out validation of the study's cost model on runs traced here.

    python benchmarks/study_validation.py

Traces the checkpoint workload (tests/tracing/ckpt_workload.py) with the real tracer (dftracer
2.x) at several write sizes and writer-thread counts. For each run, the call costs are fitted on
all the other runs (calibrate.fit per tier, metadata calls by their mean cost), and the run's
blocking checkpoint time is predicted from its own calls: sum over write sizes of calls x
(latency + size / bandwidth), plus its other calls (open, fsync, close, ...) at their mean cost,
divided by its writer parallelism (threads, at most the cores). Printed against the measured
mean checkpoint time, for benchmarks/RESULTS.md.
"""

from __future__ import annotations

import glob
import os
import platform
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from scrtune.engine.replay import ReplayOptions, new_stats, read_files  # noqa: E402
from scrtune.engine.stats import Stats  # noqa: E402
from scrtune.engine.summary import finish  # noqa: E402
from scrtune.events.reader import expand_paths  # noqa: E402
from scrtune.study.calibrate import fit, points  # noqa: E402

# tmpfs: fsync to a VM's disk varies several-fold from run to run, which no cost model of
# calls can predict; in memory the runs differ by what the model describes (calls and sizes)
WORK = os.path.join("/dev/shm" if os.path.isdir("/dev/shm") else HERE, "scrtune-validation")
WORKLOAD = os.path.join(os.path.dirname(HERE), "tests", "tracing", "ckpt_workload.py")
RUNS = [(write_kib, threads) for write_kib in (64, 1024, 8192) for threads in (1, 2)]
DATA_CALLS = ("write", "pwrite", "pwrite64", "read", "pread", "pread64")


def trace(write_kib: int, threads: int) -> str:
    name = f"w{write_kib}k-t{threads}"
    folder = os.path.join(WORK, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    env = dict(os.environ, DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1",
               DFTRACER_INIT="FUNCTION", DFTRACER_DATA_DIR=os.path.join(folder, "ckpt"))
    subprocess.run([sys.executable, WORKLOAD, "--dir", os.path.join(folder, "ckpt"), "--log",
                    os.path.join(folder, "trace"), "--steps", "8", "--files", "4",
                    "--file-bytes", str(32 << 20), "--write-size", str(write_kib << 10),
                    "--threads", str(threads), "--compute-s", "0.05"],
                   env=env, check=True, capture_output=True)
    return folder


def load(folder: str) -> tuple[Stats, float, dict[str, list[int]]]:
    stats = new_stats(ReplayOptions())
    read_files(stats, expand_paths(glob.glob(os.path.join(folder, "trace*"))))
    copy = Stats.from_bytes(stats.to_bytes())
    summary = finish(copy)
    saves = summary.checkpoints[1:]  # the first save also creates directories: left out
    measured = sum(c.dur_us for c in saves) / len(saves) / 1e6
    ops: dict[str, list[int]] = {}
    for checkpoint in saves:
        for name, op in checkpoint.ops.items():
            slot = ops.setdefault(name, [0, 0])
            slot[0] += op.calls
            slot[1] += op.dur_us
    return stats, measured, {k: [v[0] / len(saves), v[1]] for k, v in ops.items()}


def main() -> None:
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores")
    loaded = {run: load(trace(*run)) for run in RUNS}
    cores = os.cpu_count() or 1
    print("| run (write size, threads) | measured s | predicted s | error |")
    print("|---|---:|---:|---:|")
    errors = []
    for held_out in RUNS:
        others = [loaded[r] for r in RUNS if r != held_out]
        pooled: dict[int, list[int]] = {}
        meta_calls: dict[str, list[float]] = {}
        for stats, _, ops in others:
            for size, (calls, dur) in points(stats, {"/": "disk"}).get(("disk", "write"),
                                                                        {}).items():
                slot = pooled.setdefault(size, [0, 0])
                slot[0] += calls
                slot[1] += dur
            for name, (calls, dur) in ops.items():
                if name not in DATA_CALLS:
                    slot = meta_calls.setdefault(name, [0.0, 0.0])
                    slot[0] += calls
                    slot[1] += dur
        cost = fit(pooled, "disk", "write")
        stats, measured, ops = loaded[held_out]
        own = points(stats, {"/": "disk"}).get(("disk", "write"), {})
        checkpoints = len(finish(Stats.from_bytes(stats.to_bytes())).checkpoints)
        write_s = sum(calls / checkpoints * (cost.latency_s + size / cost.bytes_per_s)
                      for size, (calls, _) in own.items() if size > 0)
        meta_s = sum(calls * meta_calls[name][1] / max(meta_calls[name][0], 1) / 1e6
                     for name, (calls, _) in ops.items()
                     if name not in DATA_CALLS and name in meta_calls)
        predicted = (write_s + meta_s) / min(held_out[1], cores)
        error = predicted / measured - 1
        errors.append(abs(error))
        print(f"| {held_out[0]} KiB, {held_out[1]} | {measured:.4f} | {predicted:.4f} | "
              f"{100 * error:+.0f}% |")
    print(f"\nmean absolute error {100 * sum(errors) / len(errors):.0f}%")


if __name__ == "__main__":
    main()
