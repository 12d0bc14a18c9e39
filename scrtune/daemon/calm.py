"""When the daemon changes the configuration it serves: only when the change is judged, not
whenever a statistic moves.

Every event moves the statistics a little, and a recommendation recomputed from them moved
with it (9 changes in a 20 s run). A change of what is served now needs enough outputs under
the current configuration to judge it, and then either a predicted gain beyond the measured
noise (a new checkpoint interval, weighed with the job's own checkpoint cost and failure
rate) or, for any other parameter, the same candidate computed twice running.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from scrtune.goodput.tuner import MIN_IMPROVEMENT, MIN_SAMPLES, relative_error

INTERVAL = "SCR_CHECKPOINT_SECONDS"


@dataclass(frozen=True)
class Judged:
    change: bool
    reason: str


def judge(served: dict, candidate: dict, previous_candidate: str, outputs_since: int,
          saves_s: list[float], job_mtbf_s: float, rejected: list[dict] = ()) -> Judged:
    """Whether to serve `candidate` instead of `served` (both recommendations as JSON);
    `rejected`: SCR parameters served before and measured worse (then reverted)."""
    if candidate.get("config_id") == served.get("config_id"):
        return Judged(False, "unchanged")
    if any(_alike(candidate.get("scr", {}), scr) for scr in rejected):
        return Judged(False, "tried and measured worse (reverted)")
    if outputs_since < MIN_SAMPLES:
        return Judged(False, f"{outputs_since} of {MIN_SAMPLES} outputs under the current "
                             "configuration")
    old, new = served.get("scr", {}), candidate.get("scr", {})
    others = {k for k in set(old) | set(new) if k != INTERVAL and old.get(k) != new.get(k)}
    if others:
        if candidate.get("config_id") != previous_candidate:
            return Judged(False, "a new candidate: served when computed again")
        return Judged(True, "the same candidate twice running")
    gain = interval_gain(old.get(INTERVAL), new.get(INTERVAL), saves_s, job_mtbf_s)
    noise = max(MIN_IMPROVEMENT, 2 * relative_error(saves_s))
    if gain > noise:
        return Judged(True, f"predicted waste {100 * gain:.0f}% lower (noise {100 * noise:.0f}%)")
    return Judged(False, f"predicted gain {100 * gain:.0f}% within the noise "
                         f"({100 * noise:.0f}%)")


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


def _alike(one: dict, other: dict) -> bool:
    """The same parameters, the checkpoint interval within a quarter of the other's."""
    if {k: v for k, v in one.items() if k != INTERVAL} != \
            {k: v for k, v in other.items() if k != INTERVAL}:
        return False
    try:
        first, second = float(one.get(INTERVAL) or 0), float(other.get(INTERVAL) or 0)
    except (TypeError, ValueError):
        return False
    if not first or not second:
        return first == second
    return abs(math.log(first / second)) < math.log(1.25)
