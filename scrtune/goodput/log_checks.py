"""What a goodput log's own clock and step numbers say that the calculator cannot fix: said as
warnings, so that a user knows which figures to doubt."""

from __future__ import annotations

from scrtune.goodput.columns import Clock
from scrtune.goodput.runs import Back


def clock_warnings(clock: Clock, now_s: float | None) -> list[str]:
    """What the log's own clock says that the result cannot fix: times going backwards in the
    order logged (a clock stepped back, a daylight-saving fall-back in local timestamps, two
    launchers writing one log), and a --now before the last event."""
    warnings = []
    if clock.first_back is not None:
        first, then = clock.first_back
        warnings.append(f"the log's clock went backwards {clock.backwards} time(s), first from "
                        f"{first:.3f} to {then:.3f}: events are taken in time order")
    if now_s is not None and now_s < clock.last_s:
        warnings.append(f"--now {now_s:.3f} is before the last event ({clock.last_s:.3f}): "
                        "measured up to the last event")
    return warnings


def interleaved(back: Back) -> list[str]:
    """Step numbers that repeat or go back more than once within runs: a restart goes back
    once, at its start (and is a run of its own); two launchers writing one log without run
    ids go back and forth. Their events are read as one job's, which they are not."""
    if back.count < 2 or back.first is None:
        return []
    before, after, wall_s = back.first
    return [f"step numbers repeated or went back {back.count} times within runs, first at "
            f"{wall_s:.3f} (step {before} then {after}): two launchers may be "
            "writing one log. Give each its own job name, or a run id per launch (scrtune's "
            "own events carry one)"]
