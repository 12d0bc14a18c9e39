"""What a redundancy scheme survives, on the real SCR (issue 46). `write N`: SCR_Init with the
SCR_Config strings of `--strings`, N checkpoints (each rank's file names its step), then the
process ends without SCR_Finalize, as a job killed by a node failure does (nothing more is
flushed). `restore`: SCR_Init, restore what SCR offers, and write to OUT/rank-R.json the step
each rank read back (0: nothing restored). Ranks must all restore the same step."""

from __future__ import annotations

import argparse
import json
import os
import sys

from mpi4py import MPI

sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
import scr  # noqa: E402
from scr_writes import restore_step, write_checkpoints  # noqa: E402 - beside this script


def _init(strings: str | None) -> None:
    if strings:
        with open(strings) as handle:
            for line in handle.read().splitlines():
                scr.config(line)
    scr.init()


def _write(count: int, rank: int) -> None:
    write_checkpoints(scr, rank, range(1, count + 1), lambda step: f"{step}\n".encode(),
                      64 << 10)
    MPI.COMM_WORLD.Barrier()
    os._exit(0)  # killed: no SCR_Finalize, no flush at the end


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("write", "restore"))
    parser.add_argument("count", type=int, nargs="?", default=0)
    parser.add_argument("--out", required=True)
    parser.add_argument("--strings")
    args = parser.parse_args()
    rank = MPI.COMM_WORLD.Get_rank()
    _init(args.strings)
    if args.mode == "write":
        _write(args.count, rank)
    step = restore_step(scr, rank)
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as handle:
        json.dump({"restored": step}, handle)
    MPI.COMM_WORLD.Barrier()
    os._exit(0)  # SCR_Finalize would flush; the test looks at the cache alone


if __name__ == "__main__":
    main()
