"""The daemon's small records and helpers: counters, the restart policy, configuration ids,
the atomic rewrite of SCR's config file, and what a save record says about its checkpoint."""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import tempfile

import msgspec

from scrtune.goodput.tuner import Output


def config_id(scr: dict) -> str:
    """A short stable id of a configuration, echoed back by clients with their outputs."""
    return hashlib.sha1(msgspec.json.encode(scr, order="sorted")).hexdigest()[:12]


class RestartPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """--allow-restart: halt the job when relaunching it with the new settings pays."""

    prefix: str
    end_time_s: float  # allocation end, epoch seconds (SCR_END_TIME)
    restart_cost_s: float


class Counters(msgspec.Struct, kw_only=True):
    """What `status` reports about intake and requests."""

    batches_received: int = 0
    batches_dropped: int = 0  # intake outran processing: dropped, producers never blocked
    batches_invalid: int = 0  # not a batch, not trace lines
    batches_out_of_order: int = 0  # forwarded lines not where their file stands: resent later
    records: int = 0
    invalid_lines: int = 0
    requests: int = 0
    request_errors: int = 0
    events_recorded: int = 0
    intake_s: float = 0.0  # time spent parsing and aggregating events


def replace_file(path: str, text: str) -> None:
    """Write `path` whole or not at all, through a temporary file of an unpredictable name,
    created exclusively next to it: a symlink planted in the directory is never followed."""
    folder, name = os.path.split(os.path.abspath(path))
    fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".scrtune", dir=folder)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(temporary, 0o644)  # SCR's config file is read by the job's other processes
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def output_of(wall_s: float, detail: str) -> Output | None:
    """The checkpoint a TunedSCR save record describes (its detail: the configuration in
    force, the blocking seconds, the steps protected, the compute before it, whether
    need_checkpoint() asked for it); None for a save without one or with impossible values."""
    try:
        fields = msgspec.json.decode(detail) if detail.startswith("{") else {}
        output = Output(config=str(fields.get("config", "")), wall_s=wall_s,
                        save_s=float(fields.get("save_s", 0.0)),
                        steps=int(fields.get("steps", 0)),
                        compute_s=float(fields.get("compute_s", 0.0)),
                        due=int(fields.get("due", -1)),
                        timer_s=float(fields.get("interval_s", 0.0) or 0.0))
    except (msgspec.DecodeError, ValueError, TypeError, AttributeError, OverflowError):
        return None
    finite = all(math.isfinite(x) and x >= 0
                 for x in (output.save_s, output.compute_s, output.timer_s))
    return output if output.config and finite and output.due in (-1, 0, 1) else None
