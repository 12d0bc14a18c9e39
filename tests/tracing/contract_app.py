"""One scripted sequence of SCR calls, run against the SCR double or the real module `scr`.

Each rank writes OUT/rank-N.json with what every call returned, so that a test can hold both
implementations to the same observations (the contract the double's users rely on). The real
module comes from `$SCRTUNE_SCR_PREFIX/share/scr/python`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from mpi4py import MPI

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _module(impl: str, comm):
    if impl == "real":
        sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
        import scr

        return scr
    sys.path.append(ROOT)
    from tests.scr_double import ScrDouble

    return ScrDouble(comm, os.getcwd())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--impl", choices=("double", "real"), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    scr = _module(args.impl, comm)
    seen: dict[str, object] = {"flags": [scr.FLAG_NONE, scr.FLAG_CHECKPOINT, scr.FLAG_OUTPUT]}
    seen["query_unset"] = scr.config("SCR_FLUSH")
    seen["set"] = scr.config("SCR_FLUSH=2")
    seen["query_set"] = scr.config("SCR_FLUSH")
    seen["unset"] = scr.config("SCR_FLUSH=")
    seen["query_after_unset"] = scr.config("SCR_FLUSH")
    scr.config("SCR_FLUSH=3")
    scr.config("SCR_CHECKPOINT_SECONDS=1")
    seen["init"] = scr.init()
    seen["query_after_init"] = scr.config("SCR_FLUSH")
    seen["have_restart_fresh"] = scr.have_restart()
    seen["need_checkpoint_at_once"] = scr.need_checkpoint()
    time.sleep(1.3)
    seen["need_checkpoint_after_interval"] = scr.need_checkpoint()
    seen["start_output"] = scr.start_output("ckpt.1", scr.FLAG_CHECKPOINT)
    wanted = os.path.join(os.getcwd(), "ckpt.1", f"rank_{comm.Get_rank()}.dat")
    routed = scr.route_file(wanted)
    os.makedirs(os.path.dirname(routed), exist_ok=True)
    with open(routed, "wb") as handle:
        handle.write(b"x" * 4096)
    seen["routed_is_str"] = isinstance(routed, str)
    seen["complete_output"] = scr.complete_output(True)
    seen["need_checkpoint_after_checkpoint"] = scr.need_checkpoint()
    seen["should_exit"] = scr.should_exit()
    seen["finalize"] = scr.finalize()
    with open(os.path.join(args.out, f"rank-{comm.Get_rank()}.json"), "w") as handle:
        json.dump(seen, handle)


if __name__ == "__main__":
    main()
