"""Goodput events: what a job did and when, from any source (client, traces, logs)."""

from __future__ import annotations

import enum

import msgspec


class Kind(str, enum.Enum):
    JOB_STARTED = "job_started"
    JOB_TERMINATED = "job_terminated"
    JOB_CRASHED = "job_crashed"
    STEP_STARTED = "step_started"
    STEP_FINISHED = "step_finished"
    SAVE_STARTED = "checkpoint_save_started"
    SAVE_FINISHED = "checkpoint_save_finished"
    RESTORE_STARTED = "checkpoint_restore_started"
    RESTORE_FINISHED = "checkpoint_restore_finished"
    STARTUP_STARTED = "startup_started"  # initialisation, preparation, compilation
    STARTUP_FINISHED = "startup_finished"
    DATA_LOADING_STARTED = "data_loading_started"
    DATA_LOADING_FINISHED = "data_loading_finished"
    CUSTOM_STARTED = "custom_started"  # a named badput region
    CUSTOM_FINISHED = "custom_finished"


# At equal times: an end comes before the next start, a restore before the steps after it.
ORDER = {Kind.JOB_TERMINATED: 0, Kind.JOB_CRASHED: 0, Kind.JOB_STARTED: 1,
          Kind.STARTUP_STARTED: 2, Kind.STARTUP_FINISHED: 3, Kind.RESTORE_STARTED: 4,
          Kind.RESTORE_FINISHED: 5, Kind.DATA_LOADING_STARTED: 6, Kind.CUSTOM_STARTED: 6,
          Kind.STEP_STARTED: 7, Kind.STEP_FINISHED: 8, Kind.DATA_LOADING_FINISHED: 9,
          Kind.CUSTOM_FINISHED: 9, Kind.SAVE_STARTED: 10, Kind.SAVE_FINISHED: 11}

# Names other tools use for the same events.
ALIASES = {
    "checkpoint_loaded": Kind.RESTORE_FINISHED,  # resiliency goodput_measure
    "checkpoint_saved": Kind.SAVE_FINISHED,
    "job_finished": Kind.JOB_TERMINATED,
    "user_terminated": Kind.JOB_TERMINATED,
    "job_restarted": Kind.JOB_STARTED,
    "initialization_started": Kind.STARTUP_STARTED,
    "initialization_finished": Kind.STARTUP_FINISHED,
    "preparation_started": Kind.STARTUP_STARTED,
    "preparation_finished": Kind.STARTUP_FINISHED,
}


class Event(msgspec.Struct, frozen=True, kw_only=True, gc=False):  # no cycles: GC skips it
    kind: Kind
    wall_s: float
    step: int = -1
    job: str = ""
    run: int = 0
    name: str = ""  # for custom badput regions


KINDS = {**{kind.value: kind for kind in Kind}, **ALIASES}  # every name a log may use


def kind_of(text: str) -> Kind | None:
    return KINDS.get(text)
