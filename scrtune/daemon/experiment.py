"""Which parts of a candidate configuration are worth an experiment on this job.

A candidate differs from what is served in groups of SCR parameters (the redundancy scheme and
its set, the asynchronous flush, the buffer, the cadence, ...). A group is tried only when the
job's own evidence says it changes what SCR does for this job, was not tried and reverted
before, and (judge()) the predicted gain exceeds what the noise measured lets the outputs left
in the allocation resolve. The rest keeps its served value, with the reason in words.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from scrtune.goodput.tuner import (
    Experiment,
    Output,
    detectable_change,
    log_spread,
    measured_interval_s,
    measures,
)
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.scr_config.config import describe_changes
from scrtune.scr_config.values import byte_count, format_bytes
from scrtune.study.model import MIB, Config, machine, predict
from scrtune.study.study import canonical

INTERVAL = "SCR_CHECKPOINT_SECONDS"
DEFAULT_BUFFER_BYTES = 32 * MIB  # SCR's SCR_FILE_BUF_SIZE
BINDING = 1.25  # a cadence binds when the job checkpoints no later than this after it
NODES_NEEDED = {"SINGLE": 1, "PARTNER": 2, "XOR": 2, "FILE": 2, "RS": 3}


@dataclass(frozen=True)
class Evidence:
    """What the job showed: its node layout, its files, its cadence."""

    nodes: int
    ranks_per_node: int
    cores_per_node: int
    largest_file_bytes: int  # 0: no file sizes traced
    compute_s: float  # median compute between checkpoints (outputs, else the trace); 0: none
    scr_decides_cadence: bool | None  # saves follow need_checkpoint(); None: not known
    timer_s: float = 0.0  # the client's own cadence, where SCR had none (TunedSCR's default)


def evidence_of(outputs: list[Output], stats: WorkloadStats, profile: SystemProfile,
                nodes: int, ranks_per_node: int) -> Evidence:
    # the job's own cadence shows only in outputs the client's timer did not ask for: a timer
    # (SCR had no cadence, or a runtime action's) stops as soon as SCR has one
    recent = outputs[-32:]
    own = [o for o in recent if o.timer_s <= 0]
    timed = [o.compute_s for o in own if o.compute_s > 0]
    if timed:
        compute_s = statistics.median(timed)
    elif outputs:  # gaps between checkpoints mean a cadence only where no timer asked
        compute_s = measured_interval_s(own) if len(own) == len(recent) else 0.0
    else:
        compute_s = max(stats.interval_s - stats.ckpt_dur_s, 0.0)
    asked = [o.due for o in recent if o.due >= 0]
    timers = [o.timer_s for o in recent if o.timer_s > 0]
    decides = None if not asked else sum(asked) * 2 > len(asked)
    return Evidence(nodes=nodes, ranks_per_node=ranks_per_node,
                    cores_per_node=profile.cores_per_node,
                    largest_file_bytes=stats.largest_file_bytes, compute_s=compute_s,
                    scr_decides_cadence=decides,
                    timer_s=statistics.median(timers) if timers else 0.0)


def _bypassed(scr: dict) -> bool:
    return str(scr.get("SCR_CACHE_BYPASS", "1")) != "0"


def _cadence(old: dict, new: dict, result: dict, seen: Evidence) -> str:
    if seen.scr_decides_cadence is False:
        return "the job checkpoints on its own cadence (its saves do not follow need_checkpoint())"
    # where SCR had no cadence, the client's own timer was the one in force
    before, after = float(old.get(INTERVAL) or 0) or seen.timer_s, float(new.get(INTERVAL) or 0)
    if seen.compute_s > 0 and not any(0 < t <= BINDING * seen.compute_s for t in (before, after)):
        return (f"the job checkpoints every {seen.compute_s:.3g} s, sooner than either value: "
                "SCR ORs it with the application's own cadence, it decides nothing here")
    return ""


def _cached_only(old: dict, new: dict, result: dict, seen: Evidence) -> str:
    return "the cache is bypassed: SCR does not use it" if _bypassed(result) else ""


def _buffer(old: dict, new: dict, result: dict, seen: Evidence) -> str:
    if _bypassed(result):
        return _cached_only(old, new, result, seen)
    sizes = [byte_count(str(x.get("SCR_FILE_BUF_SIZE") or DEFAULT_BUFFER_BYTES))
             for x in (old, new)]
    if not seen.largest_file_bytes:
        return "no checkpoint file sizes traced to compare the buffers with"
    if seen.largest_file_bytes <= min(sizes):
        return (f"the largest checkpoint file ({format_bytes(seen.largest_file_bytes)}) fits "
                "either buffer")
    return ""


def _async(old: dict, new: dict, result: dict, seen: Evidence) -> str:
    if _bypassed(result):
        return _cached_only(old, new, result, seen)
    if str(result.get("SCR_FLUSH", "10")) == "0":
        return "nothing is flushed (SCR_FLUSH=0)"
    if str(new.get("SCR_FLUSH_ASYNC", "0")) == "1" and seen.cores_per_node <= seen.ranks_per_node:
        return (f"no idle cores ({seen.ranks_per_node} ranks on {seen.cores_per_node} cores) for "
                "the transfer threads")
    return ""


def _redundancy(old: dict, new: dict, result: dict, seen: Evidence) -> str:
    if _bypassed(result):
        return _cached_only(old, new, result, seen)
    scheme = str(new.get("SCR_COPY_TYPE") or "XOR")
    needed = NODES_NEEDED.get(scheme, 1)
    if seen.nodes < needed:
        return f"{scheme} needs {needed} nodes, the job runs on {seen.nodes}"
    return ""


def _always(old: dict, new: dict, result: dict, seen: Evidence) -> str:
    return ""


@dataclass(frozen=True)
class Group:
    name: str
    params: tuple[str, ...]
    relevant: Callable[[dict, dict, dict, Evidence], str]  # why it changes nothing, or ""
    performance: bool = True  # judged on the measure; else it follows a change that is


# in order: the bypass decides what the others mean
GROUPS = (
    Group("cache bypass", ("SCR_CACHE_BYPASS", "SCR_CACHE_BASE"), _always),
    Group("redundancy", ("SCR_COPY_TYPE", "SCR_SET_SIZE", "SCR_SET_FAILURES", "descriptors"),
          _redundancy),
    Group("asynchronous flush", ("SCR_FLUSH_TYPE", "SCR_FLUSH_ASYNC", "SCR_CACHE_SIZE"), _async),
    Group("file buffer", ("SCR_FILE_BUF_SIZE",), _buffer),
    Group("flush cadence", ("SCR_FLUSH",), _cached_only),
    Group("checkpoint cadence", (INTERVAL,), _cadence),
)


def measured_changes(served: dict, planned: dict) -> set[str]:
    """The parameters that differ and that a measure judges (not retention, widths: they ride
    along with a measured change)."""
    return {k for k in set(served) | set(planned)  # no descriptors are none
            if (served.get(k) or None) != (planned.get(k) or None) and _group_of(k).performance}


def _group_of(param: str) -> Group:
    for group in GROUPS:
        if param in group.params:
            return group
    return Group(param, (param,), _always, performance=False)  # retention, widths: no measure


@dataclass(frozen=True)
class Option:
    """One experiment the candidate offers: the served parameters with one group changed
    (a change of tier, cache or bypass, with the settings that come with it)."""

    name: str
    scr: dict
    taken: list[str]  # the changes, in words


@dataclass(frozen=True)
class Plan:
    """What the candidate offers instead of `served`: every group that can matter together
    (`scr`), each as an experiment of its own (`options`), and the groups left out with why."""

    scr: dict
    taken: list[str] = field(default_factory=list)  # the changes, in words
    left: list[str] = field(default_factory=list)  # "group: why"
    options: list[Option] = field(default_factory=list)

    def changed(self, served: dict) -> bool:
        return self.scr != served


def plan(served: dict, candidate: dict, seen: Evidence, rejected: list[dict]) -> Plan:
    """The candidate's groups that can matter and were not reverted before; the others keep the
    served values. One group at a time is an experiment whose verdict says what helped: each
    is an option; a change of tier takes the groups that come with it. Groups that no measure
    judges (retention, widths) follow only a change that is taken."""
    groups: list[Group] = []
    for param in sorted(set(served) | set(candidate)):
        group = _group_of(param)
        if served.get(param) != candidate.get(param) and group not in groups:
            groups.append(group)
    groups.sort(key=lambda g: GROUPS.index(g) if g in GROUPS else len(GROUPS))
    result, left, riders, taken = dict(served), [], [], []
    for group in groups:
        old, new = _part(served, group), _part(candidate, group)
        if any(_alike(new, _part(scr, group)) for scr in rejected if _touches(scr, group)):
            left.append(f"{group.name}: tried and reverted before")
            continue
        if not group.performance:
            riders.append(group)
            continue
        why = group.relevant(old, new, {**result, **new}, seen)
        if why:
            left.append(f"{group.name}: {why}")
            continue
        _put(result, new, group)
        taken.append(group)
    if result == served and riders:
        left.append(f"{', '.join(g.name for g in riders)}: follows the next measured change")
    singles = [(g.name, [g]) for g in taken] if GROUPS[0] not in taken else \
        [("cache tier", taken)]
    options = []
    for name, part in singles:
        scr = dict(served)
        # not on a new cadence alone: the client's timer runs that at once, and labels the
        # run's outputs with it only when nothing else differs from what SCR_Init read
        for group in part + (riders if name != GROUPS[-1].name else []):
            _put(scr, _part(candidate, group), group)
        options.append(Option(name, scr, describe_changes(served, scr)))
    if taken:
        for group in riders:
            _put(result, _part(candidate, group), group)
    return Plan(scr=result, taken=describe_changes(served, result), left=left, options=options)


def _part(scr: dict, group: Group) -> dict:
    return {k: scr[k] for k in group.params if k in scr}


def _put(result: dict, part: dict, group: Group) -> None:
    for param in group.params:
        result.pop(param, None)
    result.update(part)


def _touches(rejected: dict, group: Group) -> bool:
    return any(param in rejected for param in group.params)


def _alike(one: dict, other: dict) -> bool:
    """The same values, a checkpoint interval within a quarter of the other's."""
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


def rejected_changes(found: list[Experiment], served_scr: Callable[[str], dict | None]
                     ) -> list[dict]:
    """The parameters each reverted experiment changed, with the values it tried: not served
    again for this job (derived from the recorded outputs, so a restarted daemon knows too)."""
    rejected = []
    for experiment in found:
        if experiment.verdict != "reverted":
            continue
        before, after = served_scr(experiment.before), served_scr(experiment.after)
        if before is None or after is None:
            continue
        rejected.append({k: after.get(k) for k in set(before) | set(after)
                         if before.get(k) != after.get(k)})
    return rejected


# -- what the model predicts, and whether the outputs left can show it -----------------------
def study_config(scr: dict) -> Config:
    """The study model's view of a configuration (SCR's defaults where unset)."""
    if _bypassed(scr):
        return Config(bypass=True)
    return canonical(Config(
        bypass=False, copy_type=str(scr.get("SCR_COPY_TYPE") or "XOR").replace("FILE", "XOR"),
        file_buf_bytes=byte_count(str(scr.get("SCR_FILE_BUF_SIZE") or DEFAULT_BUFFER_BYTES)),
        flush_async=str(scr.get("SCR_FLUSH_ASYNC", "0")) == "1",
        flush_every=int(scr.get("SCR_FLUSH") or 10)))


def predicted_blocking_change(stats: WorkloadStats, profile: SystemProfile, served: dict,
                              planned: dict, nodes: int, ranks_per_node: int) -> float:
    """The relative change of blocking time per checkpoint the study model predicts from the
    served to the planned write path (0: the model tells them apart no way)."""
    old, new = study_config(served), study_config(planned)
    if old == new or stats.ckpt_bytes <= 0:
        return 0.0
    box = machine(profile, [])
    before, after = (predict(stats, box, c, nodes, ranks_per_node).blocking_s for c in (old, new))
    return after / before - 1.0 if before > 0 and math.isfinite(after / before) else 0.0


def resolvable(predicted_change: float, baseline: list[Output], job_mtbf_s: float,
               outputs_left: int) -> str:
    """Why the outputs left cannot show the predicted change, or "" when they can."""
    timed = all(o.compute_s > 0 for o in baseline)
    values = measures(baseline, job_mtbf_s, timed)
    spread = log_spread(values)
    smallest = detectable_change(spread, len(values), outputs_left)
    gain = -predicted_change
    if gain >= smallest:
        return ""
    return (f"predicted {100 * gain:.0f}% better; {outputs_left} outputs left resolve "
            f"{100 * smallest:.0f}% at the noise measured ({100 * spread:.0f}% per output)")


def with_scr(recommendation: dict, scr: dict, config: str) -> dict:
    """`recommendation` serving the SCR parameters `scr` (id `config`): its runtime actions
    that repeat a parameter (the cadence, the flush every k-th) say what `scr` says."""
    actions = []
    for action in recommendation.get("runtime_actions", []):
        if action.get("kind") == "checkpoint_every_s":
            if not scr.get(INTERVAL):
                continue
            action = {**action, "seconds": int(float(scr[INTERVAL]))}
        elif action.get("kind") == "flush_every":
            action = {**action, "every": int(scr.get("SCR_FLUSH") or 10)}
        actions.append(action)
    return {**recommendation, "scr": scr, "config_id": config, "runtime_actions": actions}
