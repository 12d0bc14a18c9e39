"""When does SCR's asynchronous flush really end, and what does it do to the next checkpoint?

    SCRTUNE_SCR_PREFIX=... python benchmarks/flush_end.py --pfs /tmp/slowpfs --pfs-call-us 2000 \
        --copies SINGLE,PARTNER --buffers 64MB --threads 1,2,4 --reps 2 \
        --json benchmarks/results/flush_end.json --steps 6 --compute-s 1.5

SCR_DEBUG's time of an asynchronous flush runs until SCR notices its end, at a later
SCR_Complete_output: a bound. The flushed files' times do not say either; their sizes do
(real_scr_tuning.FlushWatch: a thread polls the prefix every 10 ms and notes when a
checkpoint's directory holds all its bytes). Against each checkpoint's wall-clock end
(benchmarks/scr_ckpt_app.py), per flush: how long it ran, how far it ran into the next
checkpoint (negative: it ended that long before), and that checkpoint's blocking time. The
jobs are real_scr_tuning.py's (2 ranks on 2 fake nodes, each write call to --pfs made to wait
--pfs-call-us), asynchronous flushes with SCR_CACHE_SIZE=2, transfer threads free, AXL shown
as many CPUs as --threads says. A flush is timed from its checkpoint's end, when
SCR_Complete_output, which starts it, returned.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import sys

from real_scr_tuning import COPIES, Bench, GridConfig, grid


def one_job(bench: Bench, config: GridConfig) -> list[dict]:
    """One job; per flush that a later checkpoint follows: its seconds, its overrun into that
    checkpoint (negative: it ended that long before) and that checkpoint's blocking."""
    result = bench.run(config)
    ends, blocking = result["checkpoint_end_unix_s"], result["per_checkpoint_s"]
    rows = []
    for step, flush_s in enumerate(result["flush_end_s"][:-1], start=1):  # a next one follows
        if flush_s is None:  # the watch did not see its bytes arrive
            continue
        next_start = ends[step] - blocking[step]
        rows.append({"step": step, "flush_s": flush_s,
                     "overrun_s": ends[step - 1] + flush_s - next_start,
                     "next_blocking_s": blocking[step]})
    return rows


def configs(copies: list[str], buffers: list[str], threads: list[int]) -> dict[str, GridConfig]:
    """real_scr_tuning's free asynchronous flushes with a thread count, for these copy types,
    named without the words they share."""
    chosen = grid(tuple(buffers), (), tuple(threads))
    return {name.removeprefix("cache ").replace(" async/1 free", ""): config
            for name, config in chosen.items() if config.env.get("SCR_COPY_TYPE") in copies}


def summary(rows: list[dict]) -> str:
    """Medians over the flushes, and of the next checkpoint's blocking without and with an
    overrun into it."""
    def median(key: str, keep=lambda row: True) -> str:
        values = [row[key] for row in rows if keep(row)]
        return f"{statistics.median(values):13.2f}" if values else f"{'':13}"

    return (f"{len(rows):3} {median('flush_s')} {median('overrun_s')} "
            f"{median('next_blocking_s', lambda r: r['overrun_s'] <= 0)} "
            f"{median('next_blocking_s', lambda r: r['overrun_s'] > 0)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pfs", default="/tmp/slowpfs", help="the 'parallel file system'")
    parser.add_argument("--pfs-call-us", type=int, default=2000)
    parser.add_argument("--copies", default="SINGLE,PARTNER")
    parser.add_argument("--buffers", default="64MB")
    parser.add_argument("--threads", default="1,2,4", help="transfer threads per rank")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--json", help="write every flush's figures here")
    args, args.app_args = parser.parse_known_args()
    args.flush_ends = True
    if not set(args.copies.split(",")) <= set(COPIES):
        parser.error(f"--copies: of {', '.join(COPIES)}")
    os.makedirs(args.pfs, exist_ok=True)
    bench = Bench(args)
    grid = configs(args.copies.split(","), args.buffers.split(","),
                   [int(t) for t in args.threads.split(",")])
    flushes: dict[str, list[dict]] = {name: [] for name in grid}
    for _, (name, config) in itertools.product(range(args.reps), grid.items()):
        flushes[name] += one_job(bench, config)
    shutil.rmtree(bench.work, ignore_errors=True)
    print(f"{'configuration':28} {'n':>3} {'flush s':>13} {'overrun s':>13} "
          f"{'next, none s':>13} {'next, some s':>13}")
    for name, rows in flushes.items():
        print(f"{name:28} {summary(rows)}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"machine": os.uname().nodename, "args": sys.argv[1:],
                       "flushes": flushes}, handle, indent=1)


if __name__ == "__main__":
    main()
