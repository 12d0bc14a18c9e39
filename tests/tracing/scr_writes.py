"""The checkpoints the real-SCR test apps write: a directory per checkpoint (with
SCR_PREFIX_SIZE, SCR deletes a retired checkpoint's files, which would be the newest one's too
if names were reused), one file per rank beginning with `head(step)`."""

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
