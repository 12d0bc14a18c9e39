"""A training job that logs the wall-clock time of its every phase itself: goodput's ground truth.

MPI ranks checkpoint through TunedSCR over the real SCR (`$SCRTUNE_SCR_PREFIX`). Rank 0 appends
to OUT/truth.jsonl, written line by line, one object per phase boundary: `init` (SCR_Init
returned: where TunedSCR's job_started stands), `restore_start`, `restore_end` (the step restored),
`step_start`/`step_end` (each step), `save_start`, `scr_completed` (SCR_Complete_output
returned, before TunedSCR records the save), `save_end`, `end` (after finalize) and `crash`
(written just before the rank kills itself). `--crash WHERE:STEP` kills rank 0 with SIGKILL:
`step:K` halfway through step K, `save:K` inside save K before SCR completes it, `after_scr:K`
after SCR completed save K but before TunedSCR recorded it, `restore:K` inside the restore of
step K, `startup` before SCR_Init. `--straggle STEP:SECONDS` holds rank 1 back after step STEP
(rank 0 waits for it in need_checkpoint, between the step's end and its save). A checkpoint
whose file does not say its step is refused at restore time (SCR then offers the next older
one). With `--trace-dir` every process also traces its steps (`train.step`, category compute),
saves and restores (category checkpoint, with the step) through DFTracer's Python API
(DFTRACER_ENABLE=1 and the rest from the environment).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time

from mpi4py import MPI

from scrtune.client import DaemonClient, TunedSCR

sys.path.insert(0, os.path.join(os.environ["SCRTUNE_SCR_PREFIX"], "share", "scr", "python"))
import scr as scr_module  # noqa: E402


class Truth:
    def __init__(self, path: str, rank: int, crash: str) -> None:
        self.path = path if rank == 0 else None
        self.crash = crash if rank == 0 else ""

    def __call__(self, phase: str, step: int = -1) -> None:
        if self.path:
            with open(self.path, "a") as handle:
                handle.write(json.dumps({"phase": phase, "wall_s": time.time(), "step": step})
                             + "\n")
                handle.flush()  # written: a SIGKILL loses nothing (no fsync: no power loss
                # here, and its wait would sit between the phases it marks)
        if self.crash and self.crash == (f"{phase}:{step}" if step >= 0 else phase):
            self("crash", step)
            os.kill(os.getpid(), signal.SIGKILL)


class Completing:
    """SCR's module, logging the moments SCR_Init and SCR_Complete_output return (the latter a
    crash point)."""

    def __init__(self, scr, truth: Truth) -> None:
        self._scr, self._truth, self.step = scr, truth, -1

    def __getattr__(self, name: str):
        return getattr(self._scr, name)

    def init(self):
        result = self._scr.init()
        self._truth("init")  # where TunedSCR's job_started stands, its own work after it
        return result

    def complete_output(self, valid: bool):
        result = self._scr.complete_output(valid)
        self._truth("scr_completed", self.step)
        self._truth("after_scr", self.step)  # a crash point only: kills, or logs nothing
        return result


def tracer(trace_dir: str | None):
    """DFTracer's region context manager writing to TRACE_DIR/<pid> files, or a stand-in."""
    if not trace_dir:
        return (lambda **_: contextlib.nullcontext()), None
    from dftracer.python import dft_fn, dftracer

    log = dftracer.initialize_log(os.path.join(trace_dir, "truth"), os.getcwd(), -1)
    return dft_fn, log


def restore(scr: TunedSCR, rank: int, comm, truth: Truth, region) -> int:
    while scr.have_restart():
        truth("restore_start")
        name = scr.start_restart()
        step = int(name.rsplit(".", 1)[1])
        with region(cat="checkpoint", name="restore", step=step):
            truth("restore", step)
            valid = _valid(scr, rank, name, step)
        valid = bool(comm.allreduce(valid, op=MPI.LAND))
        scr.complete_restart(valid, step=step if valid else None)
        if valid:
            truth("restore_end", step)
            return step
    return 0


def _valid(scr: TunedSCR, rank: int, name: str, step: int) -> bool:
    try:
        with open(scr.route_file(os.path.join(os.getcwd(), name, f"rank_{rank}.dat"))) as f:
            return f.readline().split() == ["rank", str(rank), "step", str(step)]
    except OSError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--compute-s", type=float, default=0.1)
    parser.add_argument("--every", type=int, default=5, help="checkpoint every N steps")
    parser.add_argument("--crash", default="", help="WHERE:STEP (see the module's doc)")
    parser.add_argument("--heartbeat-s", type=float, default=0.05)
    parser.add_argument("--straggle", default="", help="STEP:SECONDS[,...]: rank 1 falls "
                        "behind by SECONDS after step STEP, so rank 0 waits in need_checkpoint")
    parser.add_argument("--trace-dir", help="trace with DFTracer's Python API into this folder")
    args = parser.parse_args()
    comm = MPI.COMM_WORLD
    rank = comm.Get_rank()
    truth = Truth(os.path.join(args.out, "truth.jsonl"), rank, args.crash)
    stragglers = {int(step): float(wait_s) for step, wait_s in
                  (item.split(":") for item in args.straggle.split(",") if item)}
    truth("startup")  # a crash point only
    scr_proxy = Completing(scr_module, truth)
    scr = TunedSCR(scr_proxy, comm=comm, job="truth",
                   client=DaemonClient(timeout_s=2.0, retries=1), default_interval_s=0,
                   heartbeat_s=args.heartbeat_s)
    scr.init()
    # traced from here, where TunedSCR's job_started stands: a trace begins a launch at its
    # first event, and SCR_Init's own I/O would start it earlier than the store's run
    region, trace = tracer(args.trace_dir)
    step = restore(scr, rank, comm, truth, region)
    while step < args.steps:
        step += 1
        truth("step_start", step)
        with region(cat="compute", name="train.step", step=step):
            time.sleep(args.compute_s / 2)
            truth("step", step)  # a crash point halfway through the step
            time.sleep(args.compute_s / 2)
        truth("step_end", step)
        if rank == 1:  # a straggler: rank 0 waits for it in need_checkpoint's collective
            time.sleep(stragglers.get(step, 0.0))
        scr.need_checkpoint()
        if step % args.every == 0:
            truth("save_start", step)
            with region(cat="checkpoint", name="save", step=step):
                save(scr, scr_proxy, rank, step, truth)
            truth("save_end", step)
    scr.finalize()
    truth("end", step)
    if trace is not None:
        trace.finalize()


def save(scr: TunedSCR, scr_proxy: Completing, rank: int, step: int, truth: Truth) -> None:
    scr_proxy.step = step
    scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
    path = scr.route_file(os.path.join(os.getcwd(), f"ckpt.{step}", f"rank_{rank}.dat"))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write(f"rank {rank} step {step}\n")
        handle.write("x" * (1 << 18))
    truth("save", step)  # a crash point inside the save
    scr.complete_output(True, step=step)


if __name__ == "__main__":
    main()
