"""Goodput events from DFTracer traces, through the replay engine: the job's launches (its
processes' lifetimes, merged where they overlap: a relaunch's processes start after the ones
that died), its checkpoint saves and restores (regions, with their steps or epochs), and the
mean compute-region time as the ideal step time when none is given. A trace logs no crash:
a launch another one followed ended as one does, where its last event is, and the one after
it starts where it begins to load its checkpoint."""

from __future__ import annotations

from scrtune.engine.summary import Summary
from scrtune.goodput.events import ORDER, Event, Kind


def events_from_summary(summary: Summary, job: str = "trace") -> tuple[list[Event], float | None]:
    """Events in time order, and the ideal step time the trace suggests (None when it has no
    compute regions)."""
    if not summary.span_us:
        return [], None
    launches = summary.launches or [(summary.start_us, summary.end_us)]
    events = []
    resumed, refused = _resumes(summary, launches)
    loading = {_launch_of(first_us, launches): first_us for first_us, _ in resumed.values()}
    for index, (start_us, end_us) in enumerate(launches):
        # a relaunch restarts until it loads its checkpoint: its processes' start, SCR_Init
        # and SCR's search are the restart's, not time nothing claims (on a busy machine
        # 0.2 s a relaunch came out as "other", against the job's own clock)
        begun_us = loading.get(index, start_us) if index else start_us
        events.append(Event(kind=Kind.JOB_STARTED, wall_s=begun_us / 1e6, job=job))
        if index + 1 < len(launches):
            events.append(Event(kind=Kind.JOB_CRASHED, wall_s=end_us / 1e6, job=job))
    events.append(Event(kind=Kind.JOB_TERMINATED, wall_s=summary.end_us / 1e6, job=job))
    for restore in summary.restores:
        if restore.index in refused:
            continue  # inside the launch's one restore
        if restore.index in resumed:  # the launch's loads up to it, SCR's search between: one
            first_us, step = resumed[restore.index]
            events.append(Event(kind=Kind.RESTORE_STARTED, wall_s=first_us / 1e6, job=job))
        else:  # a read after the launch's first save
            step = -1
            events.append(Event(kind=Kind.RESTORE_STARTED, wall_s=restore.start_us / 1e6,
                                job=job))
        events.append(Event(kind=Kind.RESTORE_FINISHED, wall_s=(restore.start_us +
                            restore.dur_us) / 1e6, step=step, job=job))
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
    # a region is written when it ends: in the trace's order, a load comes after the saves of
    # the regions that enclose it, and the clock would seem to go back
    events.sort(key=lambda event: (event.wall_s, ORDER[event.kind]))
    ideal = summary.compute_us / summary.compute_regions / 1e6 if summary.compute_regions else None
    return events, ideal


def _launch_of(time_us: int, launches: list[tuple[int, int]]) -> int:
    return max([i for i, (start, _) in enumerate(launches) if start <= time_us], default=0)


def _resumes(summary: Summary, launches: list[tuple[int, int]]
             ) -> tuple[dict[int, tuple[int, int]], set[int]]:
    """The restore each launch resumed from, by index: (when the launch's first load began,
    the step): its last load before its first save; and the loads before it, refused (SCR
    then offered an older checkpoint). A load after the first save is a read of a checkpoint
    (DLIO's checkpoint workload reads back what it wrote)."""
    first_save = [float("inf")] * len(launches)
    for save in summary.checkpoints:
        at = _launch_of(save.start_us, launches)
        first_save[at] = min(first_save[at], save.start_us)
    loads: dict[int, list] = {}  # launch -> its loads before its first save, by start
    for restore in sorted(summary.restores, key=lambda r: r.start_us):
        at = _launch_of(restore.start_us, launches)
        if restore.start_us < first_save[at]:
            loads.setdefault(at, []).append(restore)
    resumed = {found[-1].index: (found[0].start_us, _progress(found[-1].step, found[-1].epoch))
               for found in loads.values()}
    return resumed, {r.index for found in loads.values() for r in found[:-1]}


def _progress(step: int | None, epoch: int | None) -> int:
    return step if step is not None else (epoch if epoch is not None else -1)
