"""A small MPI training loop checkpointing through TunedSCR over the real SCR library.

The real module `scr` (SCR's own cffi bindings) is imported from
`$SCRTUNE_SCR_PREFIX/share/scr/python`. Each rank writes OUT/rank-N.json with the SCR_Config
strings it passed (`applied`), the values SCR holds after SCR_Init for every parameter it was
given (`held`: SCR_Config queries are allowed after init), the checkpoints it wrote, and, with
`--restart`, what it restored. Checkpoint files hold a line naming rank and step, so a restart
can check what came back. With `--until-halt` it stops after the checkpoint at which
SCR_Should_exit first says so (`halted`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from mpi4py import MPI

from scrtune.client import DaemonClient, TunedSCR

sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
import scr as scr_module  # noqa: E402


def _write(path: str, rank: int, step: int, size: int) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(f"rank {rank} step {step}\n".encode())
        handle.write(b"x" * size)


def _restore(scr: TunedSCR, rank: int) -> dict[str, object]:
    """What SCR restores, if it has a checkpoint: its name and the step its file names."""
    name = scr.have_restart()
    if not name:
        return {"name": None}
    scr.start_restart()
    path = scr.route_file(f"ckpt/rank_{rank}.dat")
    with open(path, "rb") as handle:
        first = handle.readline().decode().split()
    valid = first[:2] == ["rank", str(rank)]
    scr.complete_restart(valid)
    return {"name": name, "step": int(first[3]) if valid else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--restart", action="store_true", help="restore first, if SCR can")
    parser.add_argument("--daemon-timeout-s", type=float, default=2.0)
    parser.add_argument("--until-halt", action="store_true",
                        help="after each checkpoint, stop when SCR_Should_exit says so")
    parser.add_argument("--compute-s", type=float, default=0.02)
    parser.add_argument("--when-needed", action="store_true",
                        help="checkpoint a step only when need_checkpoint() says so")
    parser.add_argument("--default-interval-s", type=float, default=600.0)
    parser.add_argument("--save-s", type=float, default=0.0,
                        help="each save takes this much longer (a slow file system)")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    scr = TunedSCR(scr_module, comm=comm, job="real-scr-app",
                   client=DaemonClient(timeout_s=args.daemon_timeout_s, retries=1),
                   default_interval_s=args.default_interval_s)
    scr.config("SCR_DEBUG=1")  # the application's own setting: passed after the tuned ones
    scr.init()
    given = [s.split("=", 1)[0] for s in scr.applied if "=" in s and not s.startswith("CKPT")]
    held = {name: scr.config(name) for name in given}
    restored = _restore(scr, rank) if args.restart else {"name": None}
    first = (restored.get("step") or 0) + 1
    written: list[int] = []
    halted = False
    for step in range(first, first + args.steps):
        time.sleep(args.compute_s)
        if not scr.need_checkpoint() and args.when_needed:
            continue
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        _write(scr.route_file(os.path.join(os.getcwd(), "ckpt", f"rank_{rank}.dat")), rank,
               step, args.bytes)
        time.sleep(args.save_s)
        scr.complete_output(True)
        written.append(step)
        if args.until_halt and scr.should_exit():
            halted = True
            break
    scr.finalize()
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as handle:
        json.dump({"applied": scr.applied, "held": held, "written": written,
                   "restored": restored, "halted": halted, "label": scr.label,
                   "resolved": scr.resolved.values,
                   "shadowed": {k: list(v) for k, v in scr.resolved.shadowed.items()}},
                  handle)


if __name__ == "__main__":
    main()
