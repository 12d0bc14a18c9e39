"""When the daemon changes the configuration it serves: only for an experiment worth running.

Every event moves the statistics a little, and a recommendation recomputed from them moved
with it (9 changes in a 20 s run). experiment.plan() keeps from a candidate only what can change
what SCR does for this job; judge() then serves it only when the served configuration has been
measured, no experiment on it is still measuring, and the predicted gain is one the noise
measured lets the outputs left in the allocation show (a new cadence weighed with the job's
own checkpoint cost and failure rate; a new write path with the study model). A change the
model does not price is not tried; a write-path change must be computed twice running, so that
a statistic's jitter is no change.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from scrtune.daemon.experiment import INTERVAL, measured_changes, resolvable
from scrtune.goodput.tuner import MAX_SAMPLES, MIN_SAMPLES, Output


@dataclass(frozen=True)
class Judged:
    change: bool
    reason: str
    predicted_change: float = math.nan  # of the experiment's measure, negative: better


@dataclass(frozen=True)
class Context:
    """What the job measured, for judging a planned change of what is served."""

    outputs_since: int  # outputs under the served configuration
    baseline: list[Output]  # its latest outputs
    job_mtbf_s: float
    outputs_left: int  # in the allocation, at the job's cadence (MAX_SAMPLES: not known)
    measuring: str = ""  # the experiment on the served configuration still measuring, if any
    previous_plans: frozenset[str] = frozenset()  # the ids of the options computed before
    blocking_change: float = 0.0  # the study model's, from the served to the planned write path
    crashes_since: int = 0  # crashes the job showed since the served configuration was served


def judge(served: dict, planned: dict, planned_id: str, context: Context) -> Judged:
    """Whether to serve the `planned` SCR parameters instead of the `served` ones."""
    if planned == served:
        return Judged(False, "unchanged")
    sooner = _sooner_cadence_only(served, planned, context)
    if sooner and context.crashes_since:  # a job crashing before it can be measured
        return Judged(True, f"{context.crashes_since} crash(es) since the current configuration "
                            f"was served: the failure rate learned says checkpoint every "
                            f"{sooner:g} s", predicted_change=math.nan)
    if context.measuring:
        return Judged(False, f"an experiment is measuring: {context.measuring}")
    if context.outputs_since < MIN_SAMPLES:
        return Judged(False, f"{context.outputs_since} of {MIN_SAMPLES} outputs under the "
                             "current configuration")
    timers = [o.timer_s for o in context.baseline if o.timer_s > 0]
    # where SCR had no cadence, the client's own timer was the one in force
    old = served.get(INTERVAL) or (statistics.median(timers) if timers else None)
    new = planned.get(INTERVAL)
    saves = [o.save_s for o in context.baseline if o.save_s > 0]
    if new and not old:
        return Judged(True, "SCR had no checkpoint cadence: without one need_checkpoint() "
                            "never says yes", predicted_change=-1.0)
    cadence_gain = interval_gain(old, new, saves, context.job_mtbf_s) if old != new else 0.0
    predicted = (1 + context.blocking_change) * (1 - cadence_gain) - 1
    others = measured_changes(served, planned) - {INTERVAL}
    if predicted > -1e-9:
        return Judged(False, f"predicted no gain ({100 * predicted:+.0f}%): not worth an "
                             "experiment", predicted)
    if others and planned_id not in context.previous_plans:
        return Judged(False, "a new candidate: served when computed again", predicted)
    left = min(context.outputs_left, MAX_SAMPLES)
    why = resolvable(predicted, context.baseline, context.job_mtbf_s, left)
    if why:
        return Judged(False, why, predicted)
    return Judged(True, f"predicted {100 * -predicted:.0f}% less waste, within what {left} "
                        "outputs can show", predicted)


def _sooner_cadence_only(served: dict, planned: dict, context: Context) -> float:
    """The planned interval when the plan changes only the cadence, to a shorter one; else 0."""
    if measured_changes(served, planned) - {INTERVAL}:
        return 0.0
    timers = [o.timer_s for o in context.baseline if o.timer_s > 0]
    try:
        old = float(served.get(INTERVAL) or 0) or (statistics.median(timers) if timers else 0.0)
        new = float(planned.get(INTERVAL) or 0)
    except (TypeError, ValueError):
        return 0.0
    return new if 0 < new < (old or math.inf) else 0.0


def interval_gain(old_s: object, new_s: object, saves_s: list[float],
                  job_mtbf_s: float) -> float:
    """Relative drop of the expected waste (checkpoint time plus rework) from the old
    checkpoint interval to the new one, at the measured checkpoint cost and failure rate;
    1 when the old one was unset and the new one is not."""
    try:
        old, new = float(old_s or 0), float(new_s or 0)
    except (TypeError, ValueError):
        return 0.0
    if not new or not saves_s or job_mtbf_s <= 0:
        return 0.0
    if not old:
        return 1.0
    cost_s = statistics.median(saves_s)
    before, after = (_waste(t, cost_s, job_mtbf_s) for t in (old, new))
    return (before - after) / before if before > 0 else 0.0


def _waste(interval_s: float, cost_s: float, mtbf_s: float) -> float:
    period_s = interval_s + cost_s
    return cost_s / period_s + period_s / (2 * mtbf_s)
