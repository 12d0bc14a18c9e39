"""A training loop that checkpoints through SCR, tuned by scrtune.

Run it under `examples/slurm_job.sh` (one scrtune daemon per node, `scr_run srun`, relaunches),
or on one node with `mpirun -n 2 python train.py`. It needs mpi4py, SCR's own Python module
`scr` (from `<SCR install>/share/scr/python`, on PYTHONPATH) and scrtune; DFTracer
(`pip install pydftracer dftracer`) is optional and traces its regions when
`DFTRACER_ENABLE=1`.

What it does, as a real job would:
- `TunedSCR.init()` applies the daemon's recommendation before SCR_Init, then reads back what
  SCR resolved;
- it restores SCR's newest checkpoint, if any (SCR falls back to an older one when the newest
  is damaged);
- it trains, and checkpoints when `need_checkpoint()` says so (the recommended interval, SCR's
  own cadence, or TunedSCR's default until the daemon has measured a checkpoint), and stops
  after a checkpoint when SCR says to (`should_exit()`: a halt, such as the one a daemon run
  with `--allow-restart` sets to relaunch the job with a better configuration). Every
  checkpoint goes to a directory of its own under SCR_PREFIX (`ckpt.<step>/`), or with
  `--one-directory` to the same file names every time (`ckpt/`), as many applications do:
  scrtune then never recommends SCR's retention (SCR_PREFIX_SIZE), which deletes a retired
  checkpoint's files by name, the newest checkpoint's too.
Rank 0 appends what happened, with wall-clock times, to `--log` (JSON lines, synced), the
ground truth the tests compare SCR and scrtune with.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import socket
import time

import numpy as np
import scr as scr_module  # SCR's Python module
from mpi4py import MPI

from scrtune.client import TunedSCR

HEADER = "rank {rank} step {step}\n"


def tracer(trace_dir: str | None):
    """DFTracer's region context manager, tracing to TRACE_DIR/<host>/ (one directory per node,
    for that node's `scrtune forward`), or a stand-in that records nothing."""
    if os.environ.get("DFTRACER_ENABLE") != "1" or not trace_dir:
        return (lambda **_: contextlib.nullcontext()), None
    from dftracer.python import dft_fn, dftracer

    folder = os.path.join(trace_dir, socket.gethostname())
    os.makedirs(folder, exist_ok=True)
    log = dftracer.initialize_log(os.path.join(folder, "train"), prefix(), -1)
    return dft_fn, log


def prefix() -> str:
    return os.path.abspath(os.environ.get("SCR_PREFIX") or os.getcwd())


class PhaseLog:
    """Rank 0's record of what happened, one JSON line per event, synced: it survives a kill."""

    def __init__(self, path: str | None, rank: int) -> None:
        self.path = path if rank == 0 else None

    def __call__(self, event: str, **fields: object) -> None:
        if not self.path:
            return
        line = json.dumps({"event": event, "wall_s": time.time(), **fields}, sort_keys=True)
        with open(self.path, "a") as handle:
            handle.write(line + "\n")
            handle.flush()
            os.fsync(handle.fileno())


def same_on_every_rank(comm, value: object) -> bool:
    """Whether every rank holds the same `value` (JSON): what SCR resolved and the label of
    this run's outputs. Compared through a digest's minimum and maximum (no pickle)."""
    text = json.dumps(value, sort_keys=True).encode()
    digest = np.frombuffer(hashlib.sha1(text).digest()[:8], dtype=np.int64).copy()
    low, high = np.empty_like(digest), np.empty_like(digest)
    comm.Allreduce(digest, low, op=MPI.MIN)
    comm.Allreduce(digest, high, op=MPI.MAX)
    return bool(low[0] == high[0])


def restore(scr: TunedSCR, comm, rank: int, region,
            folder) -> tuple[int, str | None]:
    """The step of the newest checkpoint SCR can restore, and its name; (0, None) without one.
    A checkpoint whose file does not hold what it should is reported invalid, and SCR offers
    the next older one."""
    while scr.have_restart():
        name = scr.start_restart()
        step = -1
        with region(cat="checkpoint", name="restore"):
            path = scr.route_file(os.path.join(prefix(), folder(name), f"rank_{rank}.pt"))
            with contextlib.suppress(OSError, ValueError, IndexError):
                with open(path) as handle:
                    words = handle.readline().split()
                if words[:2] == ["rank", str(rank)]:
                    step = int(words[3])
        valid = bool(comm.allreduce(step >= 0, op=MPI.LAND))
        scr.complete_restart(valid, step=step if valid else None)
        if valid:
            return step, name
    return 0, None


def save(scr: TunedSCR, rank: int, step: int, size_bytes: int, region, folder,
         meta_bytes: int = 0) -> None:
    """The model state (`size_bytes`), and with `meta_bytes` a small second file (optimizer
    and data-loader state, as real checkpoints have: bimodal write sizes)."""
    name = f"ckpt.{step}"
    scr.start_output(name, scr.FLAG_CHECKPOINT)
    with region(cat="checkpoint", name="save", step=step):
        path = scr.route_file(os.path.join(prefix(), folder(name), f"rank_{rank}.pt"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(HEADER.format(rank=rank, step=step))
            handle.write("x" * size_bytes)
        if meta_bytes:
            meta = scr.route_file(os.path.join(prefix(), folder(name), f"rank_{rank}.meta"))
            with open(meta, "w") as handle:
                handle.write("m" * meta_bytes)
    scr.complete_output(True, step=step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=40, help="train until this global step")
    parser.add_argument("--compute-s", type=float, default=0.25, help="seconds per step")
    parser.add_argument("--ckpt-mib", type=float, default=4.0, help="MiB per rank per checkpoint")
    parser.add_argument("--meta-kib", type=float, default=0.0,
                        help="KiB per rank per checkpoint in a second, small file (0: none)")
    parser.add_argument("--job", default="example", help="the job's name in goodput records")
    parser.add_argument("--log", help="rank 0 appends what happened here (JSON lines)")
    parser.add_argument("--trace-dir", default=os.environ.get("TRACE_DIR"),
                        help="DFTracer traces go to TRACE_DIR/<host>/ (with DFTRACER_ENABLE=1)")
    parser.add_argument("--default-interval-s", type=float, default=600.0,
                        help="checkpoint this often until the daemon has measured a checkpoint")
    parser.add_argument("--one-directory", action="store_true",
                        help="write every checkpoint to the same files, ckpt/rank_N.pt")
    args = parser.parse_args()
    folder = (lambda name: "ckpt") if args.one_directory else (lambda name: name)
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    region, trace = tracer(args.trace_dir)
    log = PhaseLog(args.log, rank)
    scr = TunedSCR(scr_module, comm=comm, job=args.job,
                   default_interval_s=args.default_interval_s)
    scr.init()
    log("started", ranks=comm.Get_size(), label=scr.label, resolved=scr.resolved.values,
        every_rank_same=same_on_every_rank(comm, [scr.label, scr.resolved.values]),
        shadowed={k: list(v) for k, v in scr.resolved.shadowed.items()}, applied=scr.applied)
    step, name = restore(scr, comm, rank, region, folder)
    log("restored", step=step, name=name)
    size_bytes = int(args.ckpt_mib * (1 << 20))
    while step < args.steps:
        with region(cat="compute", name="train.step", step=step + 1):
            time.sleep(args.compute_s)
        step += 1
        log("step", step=step)
        if scr.need_checkpoint():
            began = time.monotonic()
            save(scr, rank, step, size_bytes, region, folder, int(args.meta_kib * 1024))
            log("checkpoint", step=step, save_s=round(time.monotonic() - began, 6))
            if scr.should_exit():  # a halt (scrtune's, for a better configuration, or yours)
                break
    scr.finalize(step=step)  # the steps trained after the last checkpoint count too
    log("done" if step >= args.steps else "halted", step=step)
    if trace is not None:
        trace.finalize()


if __name__ == "__main__":
    main()
