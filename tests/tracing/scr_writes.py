"""The checkpoints the real-SCR test apps write: a directory per checkpoint (with
SCR_PREFIX_SIZE, SCR deletes a retired checkpoint's files, which would be the newest one's too
if names were reused), one file per rank beginning with `head(step)`; and their restore."""

from __future__ import annotations

import os
from collections.abc import Callable


def write_checkpoints(scr, rank: int, steps: range, head: Callable[[int], bytes],
                      size_bytes: int) -> None:
    for step in steps:
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        path = scr.route_file(os.path.join(os.getcwd(), f"ckpt.{step}", f"rank_{rank}.dat"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as out:
            out.write(head(step) + b"x" * size_bytes)
        scr.complete_output(True)


def restore_step(scr, rank: int) -> int:
    """The step of the newest checkpoint SCR restores whose file reads as one written with
    `head=lambda step: f"{step}\\n".encode()` (older ones offered after a refusal); 0: none."""
    step = 0
    while scr.have_restart():
        name = scr.start_restart()
        path = scr.route_file(os.path.join(os.getcwd(), name, f"rank_{rank}.dat"))
        try:
            with open(path, "rb") as handle:
                step = int(handle.readline())
            valid = True
        except (OSError, ValueError):
            valid, step = False, 0
        scr.complete_restart(valid)
        if valid:
            break
    return step
