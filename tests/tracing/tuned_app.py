"""A small MPI training loop checkpointing through TunedSCR over the SCR double.

Each rank writes its applied SCR_Config strings to OUT/rank-N.json, so a test can check that
every rank applied the same configuration. Run under mpirun, optionally traced by DFTracer.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from mpi4py import MPI  # noqa: E402

from scrtune.client import DaemonClient, TunedSCR  # noqa: E402
from tests.scr_double import ScrDouble  # noqa: E402


class _NoRegion:
    def __init__(self, **_: object) -> None:
        pass

    def __enter__(self) -> None:
        return None

    def __exit__(self, *_: object) -> None:
        return None


def _tracer(args):
    if not args.trace_log:
        return _NoRegion, None
    from dftracer.python import dft_fn, dftracer

    data_dir = os.path.join(args.out, "prefix")
    os.makedirs(data_dir, exist_ok=True)
    return dft_fn, dftracer.initialize_log(args.trace_log, data_dir, -1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--bytes", type=int, default=1 << 20)
    parser.add_argument("--trace-log", help="trace with DFTracer's Python API to this prefix")
    args = parser.parse_args()
    region, tracer = _tracer(args)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    prefix = os.path.join(args.out, "prefix")
    os.makedirs(prefix, exist_ok=True)
    scr = TunedSCR(ScrDouble(comm, prefix), comm=comm,
                   client=DaemonClient(timeout_s=2.0, retries=1), job="tuned-app")
    scr.config("SCR_DEBUG=1")  # the application's own setting: applied after the tuned ones
    scr.init()
    for step in range(1, args.steps + 1):
        time.sleep(0.02)  # compute
        scr.need_checkpoint()
        with region(cat="CHECKPOINT", name="checkpoint.save", step=step):
            scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
            path = scr.route_file(f"ckpt.{step}/rank_{rank}.pt")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            for _ in range(args.bytes // (256 << 10)):
                os.write(fd, b"x" * (256 << 10))
            os.fsync(fd)
            os.close(fd)
            scr.complete_output(True)
    scr.finalize()
    if tracer is not None:
        tracer.finalize()
    with open(os.path.join(args.out, f"rank-{rank}.json"), "w") as handle:
        json.dump({"applied": scr.applied, "node": os.environ.get("SCRTUNE_NODE", "")}, handle)


if __name__ == "__main__":
    main()
