"""Goodput events from DFTracer traces, through the replay engine: the job's span, its
checkpoint saves and restores (regions, with their steps or epochs), and the mean compute-region
time as the ideal step time when none is given. A trace has no crashes: one run."""

from __future__ import annotations

from scrtune.engine.summary import Summary
from scrtune.goodput.events import Event, Kind


def events_from_summary(summary: Summary, job: str = "trace") -> tuple[list[Event], float | None]:
    """Events, and the ideal step time the trace suggests (None when it has no compute
    regions)."""
    if not summary.span_us:
        return [], None
    events = [Event(kind=Kind.JOB_STARTED, wall_s=summary.start_us / 1e6, job=job)]
    for restore in summary.restores:
        step = _progress(restore.step, restore.epoch)
        events += [Event(kind=Kind.RESTORE_STARTED, wall_s=restore.start_us / 1e6, job=job),
                   Event(kind=Kind.RESTORE_FINISHED, wall_s=(restore.start_us + restore.dur_us)
                         / 1e6, step=step, job=job)]
    per_save = summary.compute_regions / len(summary.checkpoints) if summary.checkpoints else 0
    for ordinal, save in enumerate(summary.checkpoints, 1):
        # without a step or epoch (aggregated traces, checkpoints found by path), the k-th save
        # protects its share of the compute regions done before it
        step = _progress(save.step, save.epoch)
        if step < 0 and per_save:
            step = round(ordinal * per_save)
        events += [Event(kind=Kind.SAVE_STARTED, wall_s=save.start_us / 1e6, job=job),
                   Event(kind=Kind.SAVE_FINISHED, wall_s=(save.start_us + save.dur_us) / 1e6,
                         step=step, job=job)]
    events.append(Event(kind=Kind.JOB_TERMINATED, wall_s=summary.end_us / 1e6, job=job))
    ideal = summary.compute_us / summary.compute_regions / 1e6 if summary.compute_regions else None
    return events, ideal


def _progress(step: int | None, epoch: int | None) -> int:
    return step if step is not None else (epoch if epoch is not None else -1)
