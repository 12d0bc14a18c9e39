"""What a goodput log's own clock and step numbers say that the calculator cannot fix: said as
warnings, so that a user knows which figures to doubt."""

from __future__ import annotations

from scrtune.goodput.events import Event, Kind


def clock_warnings(events: list[Event], now_s: float | None) -> list[str]:
    """What the log's own clock says that the result cannot fix: times going backwards in the
    order logged (a clock stepped back, a daylight-saving fall-back in local timestamps, two
    launchers writing one log), and a --now before the last event."""
    warnings = []
    backwards = [(a.wall_s, b.wall_s) for a, b in zip(events, events[1:])
                 if b.wall_s < a.wall_s - 1e-6]
    if backwards:
        first, then = backwards[0]
        warnings.append(f"the log's clock went backwards {len(backwards)} time(s), first from "
                        f"{first:.3f} to {then:.3f}: events are taken in time order")
    last = max(event.wall_s for event in events)
    if now_s is not None and now_s < last:
        warnings.append(f"--now {now_s:.3f} is before the last event ({last:.3f}): measured "
                        "up to the last event")
    return warnings


def interleaved(runs: list[list[Event]]) -> list[str]:
    """Step numbers that repeat or go back more than once within runs: a restart goes back
    once, at its start (and is a run of its own); two launchers writing one log without run
    ids go back and forth. Their events are read as one job's, which they are not."""
    back = []
    for events in runs:
        steps = [e for e in events if (e.kind is Kind.STEP_FINISHED or e.kind is
                                       Kind.STEP_STARTED) and e.step >= 0]
        back += [(a, b) for a, b in zip(steps, steps[1:])
                 if b.step < a.step or b.step == a.step and b.kind is a.kind]
    if len(back) < 2:
        return []
    first, then = back[0]
    return [f"step numbers repeated or went back {len(back)} times within runs, first at "
            f"{then.wall_s:.3f} (step {first.step} then {then.step}): two launchers may be "
            "writing one log. Give each its own job name, or a run id per launch (scrtune's "
            "own events carry one)"]
