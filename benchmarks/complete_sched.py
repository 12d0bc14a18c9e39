"""What SCR_Complete_output waits on when it starts an asynchronous flush (issue 48):

    python benchmarks/complete_sched.py benchmarks/results/real_scr_complete_sched.json

A grid of benchmarks/real_scr_tuning.py whose runs logged, per rank and checkpoint, the
rank's seconds on a CPU and on a run queue during SCR_Complete_output and those of the
threads it started there (AXL's transfer threads; benchmarks/scr_ckpt_app.py reads them from
/proc's schedstat). Printed per configuration, the mean over ranks and checkpoints after the
first (the first has no flush before it): the phase's seconds; the rank's on a CPU and
waiting for one; what is left (asleep: waiting on another rank, a lock or a call); the
started threads' seconds on a CPU and waiting for one; and how much of the phase those
threads were runnable, per thread (their CPU and run-queue seconds over the phase's, per
thread that had a file to copy).
"""

from __future__ import annotations

import json
import statistics
import sys

from real_scr_tuning import files_per_rank  # this script's folder


def rows(grid: dict) -> list[tuple[str, int, list[float]]]:
    out = []
    for name, runs in sorted(grid["runs"].items()):
        threads = grid["configs"][name].get("transfer_threads", 0)
        samples = [[phases[index][2], *sched[rank][index]]
                   for run in runs if run.get("complete_sched_s")
                   for phases, sched in [(run["phases_s"], run["complete_sched_s"])]
                   for index in range(1, len(phases)) for rank in range(len(sched))]
        if samples:
            out.append((name, threads, [statistics.fmean(column) for column in zip(*samples)]))
    return out


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: complete_sched.py GRID.json")
    with open(sys.argv[1]) as handle:
        grid = json.load(handle)
    files = files_per_rank(grid["app_args"])
    print(f"{'configuration':46} {'threads':>7} {'phase':>6} {'rank on CPU':>11} "
          f"{'queued':>6} {'asleep':>6} {'threads on CPU':>14} {'queued':>6} "
          f"{'runnable':>8}")
    for name, threads, (phase, on, queued, started_on, started_queued) in rows(grid):
        busy = min(threads, files)
        runnable = (started_on + started_queued) / (phase * busy) if busy else 0.0
        print(f"{name:46} {threads:7} {phase:6.3f} {on:11.3f} {queued:6.3f} "
              f"{max(0.0, phase - on - queued):6.3f} {started_on:14.3f} {started_queued:6.3f} "
              f"{runnable:8.2f}")


if __name__ == "__main__":
    main()
