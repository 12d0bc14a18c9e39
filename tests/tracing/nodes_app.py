"""TunedSCR over the real SCR, its recommendation from the daemon at `--endpoint`: SCR_Init,
one checkpoint, SCR_Finalize; rank 0 writes OUT with the strings applied and the copy type
SCR holds (issue 46: a Reed-Solomon recommendation on too few nodes aborted SCR_Init)."""

from __future__ import annotations

import argparse
import json
import os
import sys

from mpi4py import MPI

sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
import scr  # noqa: E402

from scrtune.client import DaemonClient, TunedSCR  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--endpoint", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    tuned = TunedSCR(scr, comm=comm, client=DaemonClient(args.endpoint, timeout_s=10))
    tuned.init()
    rank = comm.Get_rank()
    tuned.start_output("ckpt.1", scr.FLAG_CHECKPOINT)
    path = tuned.route_file(os.path.join(os.getcwd(), "ckpt.1", f"rank_{rank}.dat"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as out:
        out.write(b"x" * 4096)
    tuned.complete_output(True)
    held = scr.config("SCR_COPY_TYPE")
    tuned.finalize()
    if rank == 0:
        with open(args.out, "w") as handle:
            json.dump({"applied": tuned.applied, "copy_type": held}, handle)


if __name__ == "__main__":
    main()
