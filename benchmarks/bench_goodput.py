"""Goodput from a long job's log (issue 13): time and peak memory of `read_jsonl` + `compute`
against Python's own `json.loads` over the same lines.

    python benchmarks/bench_goodput.py --events 1000000

The log: a step every second, a checkpoint save (started, finished) every 100 steps, a crash
every 100,000 steps, then a restart that restores the last save.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import tempfile
import time

from scrtune.goodput.calculator import compute
from scrtune.goodput.readers import read_jsonl


def write_log(path: str, events: int) -> int:
    written, wall_s, step, saved = 0, 1.7e9, 0, 0
    with open(path, "w") as out:
        def line(kind: str, step_: int = -1) -> None:
            nonlocal written
            out.write(json.dumps({"kind": kind, "wall_s": round(wall_s, 3), "step": step_,
                                  "job": "long"}) + "\n")
            written += 1
        line("job_started")
        while written < events:
            wall_s += 1.0
            step += 1
            line("step_finished", step)
            if step % 100 == 0:
                line("checkpoint_save_started", step)
                wall_s += 5.0
                line("checkpoint_save_finished", step)
                saved = step
            if step % 100_000 == 0:  # a crash: the next run restores the last save
                wall_s += 30.0
                line("job_started")
                line("checkpoint_restore_started")
                wall_s += 10.0
                line("checkpoint_restore_finished", saved)
                step = saved
        line("job_terminated")
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "goodput.jsonl")
        events = write_log(path, args.events)
        started = time.perf_counter()
        with open(path) as handle:
            for text in handle:
                json.loads(text)
        json_s = time.perf_counter() - started
        rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        loaded = read_jsonl(path)
        read_s = time.perf_counter() - started
        started = time.perf_counter()
        report = compute(loaded.log)
        compute_s = time.perf_counter() - started
        rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({
        "machine": f"{platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
                   f"Python {platform.python_version()}",
        "events": events, "json_loads_s": round(json_s, 2), "read_s": round(read_s, 2),
        "compute_s": round(compute_s, 2),
        "ratio_to_json_loads": round((read_s + compute_s) / json_s, 2),
        "peak_rss_growth_mib": round((rss_after - rss_before) / 1024, 1),
        "goodput_pct": round(report.goodput_pct, 3), "runs": report.runs,
        "segments": len(report.segments)}, indent=1))


if __name__ == "__main__":
    main()
