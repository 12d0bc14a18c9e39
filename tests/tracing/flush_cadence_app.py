"""TunedSCR over the real SCR with one served recommendation (the JSON file `--served`, the
daemon's reply replaced): SCR_Init, with `--restart` a restore of what SCR offers, then
`--checkpoints` checkpoints after the step restored, SCR_Finalize. Each checkpoint is a
directory of its own (scr_writes.py), so the directories in the prefix are what SCR flushed.
Each rank writes OUT/rank-R.json: the step restored (0: none) and the steps written."""

from __future__ import annotations

import argparse
import json
import os
import sys

from mpi4py import MPI

from scrtune.client import DaemonClient, TunedSCR
from scrtune.daemon.protocol import Reply

sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
import scr as scr_module  # noqa: E402
from scr_writes import restore_step, write_checkpoints  # noqa: E402 - beside this script


class Served(DaemonClient):
    """The client with the wire replaced: every request is answered with `recommendation`."""

    def __init__(self, recommendation: dict) -> None:
        super().__init__("ipc:///nonexistent", timeout_s=0.5, retries=0, spool_dir="")
        self.recommendation = recommendation

    def request(self, message):
        return Reply(request_id=message.request_id, ok=True, result=self.recommendation)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--served", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--checkpoints", type=int, required=True)
    parser.add_argument("--restart", action="store_true")
    args = parser.parse_args()
    rank = MPI.COMM_WORLD.Get_rank()
    with open(args.served) as handle:
        served = json.load(handle)
    scr = TunedSCR(scr_module, comm=MPI.COMM_WORLD, job="flush-cadence", client=Served(served))
    scr.init()
    restored = restore_step(scr, rank) if args.restart else 0
    steps = range(restored + 1, restored + 1 + args.checkpoints)
    write_checkpoints(scr, rank, steps, lambda step: f"{step}\n".encode(), 64 << 10)
    scr.finalize()
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as handle:
        json.dump({"restored": restored, "written": list(steps),
                   "resolved": scr.resolved.values}, handle)


if __name__ == "__main__":
    main()
