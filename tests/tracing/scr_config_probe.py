"""Run a configuration through the real SCR: pass `--strings` (one SCR_Config string per line)
before SCR_Init, query every name in `--names` after it, write three checkpoints through
route_file, finalize. Each rank writes OUT/rank-N.json with what SCR held and what it wrote.
The environment and SCR_CONF_FILE forms are set up by the caller."""

from __future__ import annotations

import argparse
import json
import os
import sys

from mpi4py import MPI

sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
import scr  # noqa: E402
from scr_writes import write_checkpoints  # noqa: E402 - beside this script


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--names", required=True, help="file: one parameter name per line")
    parser.add_argument("--strings", help="file: one SCR_Config string per line")
    args = parser.parse_args()
    rank = MPI.COMM_WORLD.Get_rank()
    if args.strings:
        with open(args.strings) as handle:
            for line in handle.read().splitlines():
                scr.config(line)
    scr.init()
    with open(args.names) as handle:
        held = {name: scr.config(name) for name in handle.read().split()}
    write_checkpoints(scr, rank, range(1, 4), lambda step: f"rank {rank} step {step}\n".encode(),
                      256 << 10)
    scr.finalize()
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as handle:
        json.dump({"held": held}, handle)


if __name__ == "__main__":
    main()
