"""Relaunch with a better configuration, only when asked (`--allow-restart`) and only when it
pays: SCR reads its parameters in SCR_Init, so a new configuration needs a new run. The halt
goes through SCR's own `scr_halt` (the halt file is a binary kvtree that only SCR's tools should
write): SCR ends the run after its next checkpoint (SCR_Should_exit, or exit with
SCR_HALT_EXIT=1).

`scr_run` does not relaunch a halted job: it stops on any halt condition, and on the
SCR_FINALIZE_CALLED reason every clean SCR_Finalize leaves. So the job script asks
(`scrtune relaunch`): when the halt was scrtune's, the daemon clears it
(`scr_halt --unset-checkpoints --unset-reason`) and the script runs `scr_run` again; the new
run reads the rewritten SCR_CONF_FILE and restarts from the checkpoint just written.

The gain priced is what the relaunch brings (issue 44). A new cadence, when only a relaunch
brings it (longer than SCR's own running interval, as SCR resolved it at SCR_Init: a shorter
one, or any where SCR has none, the client's timer runs at once): the expected waste at the
interval the run measurably runs with against the served one, at the measured checkpoint
cost and the job's learned MTBF, over the time left in the allocation. Else what SCR reads
only at SCR_Init (the tier, the write path, redundancy): the change of blocking time the study
model predicts, times the share of the job's time it blocks now. A relaunch that brings both
gains both (`combined`). Retention and widths alone are no reason to relaunch.
"""

from __future__ import annotations

import logging
import math
import shutil
import subprocess
import time

import msgspec

from scrtune.daemon.experiment import measured_changes
from scrtune.errors import StoreError
from scrtune.goodput.intervals import expected_waste
from scrtune.goodput.store import Store
from scrtune.scr_config.config import describe_changes

log = logging.getLogger("scrtune.daemon")


HALTED_FOR_KEY = "halted_for"  # the store key of the configuration the last halt was for


def same_configuration(served_id: str, running_id: str, halted_for_id: str) -> str:
    """Why a relaunch would bring no new configuration, or "" when it would. The next SCR_Init
    reads what is served now: nothing is to be gained when that is what the running outputs
    are labelled with, or when the job was relaunched for it once already and still does not
    run it (the environment or a config file shadows it): halting again would loop forever."""
    if not served_id:
        return "nothing served yet"
    if running_id == served_id:
        return f"the run already has the configuration a relaunch would read ({served_id})"
    if halted_for_id == served_id:
        return (f"the job was relaunched for {served_id} once already; another relaunch "
                "would read the same configuration")
    return ""


# what decide() prices: a relaunch that changes none of these has no predicted gain
CADENCE_PARAMS = ("SCR_CHECKPOINT_SECONDS", "SCR_CHECKPOINT_INTERVAL", "SCR_CHECKPOINT_OVERHEAD")


def relaunch_brings_cadence(running_scr: dict, served_scr: dict) -> bool:
    """Whether only a relaunch gives the served checkpoint cadence: an interval longer than
    SCR's own running one (SCR ORs its interval with the client's timer, which runs a shorter
    one, or any where SCR has none, at once), or another of SCR's cadence knobs."""
    if not any(str(running_scr.get(name, "")) != str(served_scr.get(name, ""))
               for name in CADENCE_PARAMS):
        return False
    if any(str(running_scr.get(name, "")) != str(served_scr.get(name, ""))
           for name in CADENCE_PARAMS[1:]):
        return True
    try:
        old = float(running_scr.get(CADENCE_PARAMS[0]) or 0)
        new = float(served_scr.get(CADENCE_PARAMS[0]) or 0)
    except (TypeError, ValueError):
        return True
    return old > 0 and not 0 < new <= old


def scr_cadence_of(started_detail: str | None) -> dict[str, str] | None:
    """SCR's own checkpoint cadence in a run, as SCR resolved it after SCR_Init (the run's
    job_started record: "resolved"), or None when the record does not say. It holds until the
    next SCR_Init, whatever label the run's outputs carry: a shorter interval served later runs
    on the client's timer and its id labels the outputs, but SCR still runs its own (a CI run
    of the Slurm example took such a label's 1 s for SCR's 3 s, and halted the relaunched job
    for a 1.3 s interval the timer ran at once)."""
    try:
        resolved = msgspec.json.decode(started_detail or "").get("resolved")
    except (msgspec.DecodeError, AttributeError):
        return None
    if not isinstance(resolved, dict) or \
            not all(isinstance(resolved.get(name), str) for name in CADENCE_PARAMS):
        return None
    return {name: resolved[name] for name in CADENCE_PARAMS if resolved[name]}


class RunCadence(msgspec.Struct, frozen=True, kw_only=True):
    """SCR's own checkpoint cadence in the latest run, as SCR resolved it after SCR_Init
    (scr_cadence_of; None: its start record does not say), and when that run started."""

    started_s: float = 0.0
    scr: dict[str, str] | None = None

    def after(self, started_s: float, detail: str) -> RunCadence:
        """With the run whose start record (`detail`) says it started at `started_s`: this one
        when that is an older run's, sent late."""
        if started_s < self.started_s:
            return self
        return RunCadence(started_s=started_s, scr=scr_cadence_of(detail))


def cadence_needs_relaunch(running_scr: dict | None, served_scr: dict,
                           scr_cadence: dict | None) -> bool:
    """relaunch_brings_cadence() against SCR's own running cadence (scr_cadence_of) where the
    run's start record says it, else against the running label's; True when neither is known
    (decide() weighs it)."""
    running = scr_cadence if scr_cadence is not None else running_scr
    return running is None or relaunch_brings_cadence(running, served_scr)


def write_path_changes(running_scr: dict, served_scr: dict) -> list[str]:
    """What a relaunch changes that a measure judges, other than the cadence, in words."""
    changed = measured_changes(running_scr, served_scr) - set(CADENCE_PARAMS)
    return describe_changes({k: v for k, v in running_scr.items() if k in changed},
                            {k: v for k, v in served_scr.items() if k in changed})


def unpriced_change(running_scr: dict | None, served_scr: dict,
                    scr_cadence: dict | None = None) -> str:
    """Why a relaunch from the running configuration to the served one would not pay, or ""
    when it brings a cadence the run cannot follow without one (decide() weighs it), changes
    the write path (decide_change() weighs it), or the running configuration is not known.
    Retention and widths alone have no predicted gain: the interval the job already follows
    at run time would be credited to them, and the job halted again and again. `scr_cadence`:
    SCR's own running cadence (scr_cadence_of), where known; else the running label's."""
    if cadence_needs_relaunch(running_scr, served_scr, scr_cadence):
        return ""
    if running_scr is None:
        return ("the running configuration is not known here and SCR's own cadence needs no "
                "relaunch for the served one: nothing to price")
    if write_path_changes(running_scr, served_scr):
        return ""
    changed = describe_changes(running_scr, served_scr) or ["nothing SCR runs"]
    return (f"a relaunch would change {', '.join(changed)}: no cadence the client's timer does "
            "not run already, nothing priced, no gain to pay for it")


def relaunch_would_not_change(store: Store, served: dict, running_id: str,
                              running_scr: dict | None, scr_cadence: dict | None) -> str:
    """Why relaunching from the running configuration (the id the latest output carries, its
    served parameters `running_scr` where known; SCR's own cadence `scr_cadence` where known)
    to the served one brings nothing, or "" when it may pay (decide() or decide_change() weighs
    it)."""
    try:
        halted_for = (store.get(HALTED_FOR_KEY) or b"").decode(errors="replace")
    except StoreError:
        halted_for = ""
    return same_configuration(str(served["config_id"]), running_id, halted_for) or \
        unpriced_change(running_scr, served["scr"], scr_cadence)


class HaltDecision(msgspec.Struct, frozen=True, kw_only=True):
    requested: bool
    reason: str
    gain_s: float = 0.0
    restart_cost_s: float = 0.0
    change: str = ""  # what the relaunch brings, in words, where a gain was priced


# a running interval this close to the recommended one is kept: the recommendation rests on
# a measured checkpoint cost and a learned MTBF, and Daly's curve is flat there (within 25% of
# the optimum the waste is within 2.5% of its least), so the served interval drifting with
# the measurements would otherwise halt a job for nothing when restarts are cheap
INTERVAL_TOLERANCE = 0.25


def decide(current_interval_s: float, recommended_interval_s: float, cost_s: float,
           mtbf_s: float, remaining_s: float, restart_cost_s: float) -> HaltDecision:
    """A relaunch for the recommended interval, priced by Daly's expected waste against the
    current one. Only a longer interval is worth one: SCR ORs its own interval with the
    client's timer, which runs a shorter one at once."""
    if current_interval_s <= 0 or recommended_interval_s <= 0 or cost_s <= 0:
        return HaltDecision(requested=False, reason="no interval to compare yet")
    if recommended_interval_s < current_interval_s * (1 - INTERVAL_TOLERANCE):
        return HaltDecision(requested=False, reason=(
            f"checkpointing every {recommended_interval_s:.3g} s instead of "
            f"{current_interval_s:.3g} s: a shorter interval the client's timer runs at once, "
            "no relaunch for it"))
    if abs(recommended_interval_s / current_interval_s - 1) <= INTERVAL_TOLERANCE:
        return HaltDecision(requested=False, reason=(
            f"checkpointing every {recommended_interval_s:.0f} s instead of "
            f"{current_interval_s:.1f} s: within {100 * INTERVAL_TOLERANCE:.0f}% of each other, "
            "no relaunch for it"))
    if remaining_s <= restart_cost_s:
        return HaltDecision(requested=False, reason="too little time left in the allocation")
    now = expected_waste(current_interval_s, cost_s, mtbf_s)
    better = expected_waste(recommended_interval_s, cost_s, mtbf_s)
    return _priced((now - better) * (remaining_s - restart_cost_s), remaining_s, restart_cost_s,
                   f"checkpointing every {recommended_interval_s:.0f} s instead of "
                   f"{current_interval_s:.1f} s")


# how far the study model's blocking time may be off on a configuration it has not seen: the
# held-out median error issue 48 holds it to (measured 7-17% on three real-SCR grids)
PREDICTION_ERROR = 0.25


def decide_change(blocking_change: float, blocking_share: float, remaining_s: float,
                  restart_cost_s: float, changes: list[str]) -> HaltDecision:
    """A relaunch for what SCR reads only at SCR_Init (the tier, the write path, redundancy):
    the relative change of blocking time the study model predicts beyond its own error, times
    the share of the job's time it blocks now. A change within the error is none: as the
    measurements of a relaunched run refine, the served flush cadence moves by a step (3 -> 4,
    "24% less blocking") and the job was halted again for it (a CI run of the Slurm example)."""
    what = ", ".join(changes) or "the served configuration"
    if not math.isfinite(blocking_change) or blocking_change >= 0 or blocking_share <= 0:
        return HaltDecision(requested=False, reason=f"no gain predicted for "
                                                    f"{', '.join(changes) or 'the change'}")
    if -blocking_change <= PREDICTION_ERROR:
        return HaltDecision(requested=False, reason=(
            f"{what}: predicted {-100 * blocking_change:.0f}% less blocking, within the "
            f"model's error ({100 * PREDICTION_ERROR:.0f}%): no relaunch for it"))
    if remaining_s <= restart_cost_s:
        return HaltDecision(requested=False, reason="too little time left in the allocation")
    gain = (-blocking_change - PREDICTION_ERROR) * min(blocking_share, 1.0) * \
        (remaining_s - restart_cost_s)
    return _priced(gain, remaining_s, restart_cost_s,
                   f"{what} (predicted {-100 * blocking_change:.0f}% less blocking)")


def combined(parts: list[HaltDecision], remaining_s: float, restart_cost_s: float
             ) -> HaltDecision:
    """One relaunch that brings several changes (a cadence only a relaunch gives, and what
    SCR reads at SCR_Init) gains what each does, priced apart (issue 48: the daemon priced the
    cadence alone whenever the served interval moved as well, and never halted for the cache
    tier the same relaunch brought). A cadence is priced at the running configuration's
    checkpoint cost: where that makes the served interval a loss, the interval is Daly's for
    the served configuration's own cost, not a loss to charge."""
    if len(parts) == 1:
        return parts[0]
    gaining = [part for part in parts if part.change and part.gain_s > 0]
    if not gaining or remaining_s <= restart_cost_s:
        return HaltDecision(requested=False, reason="; ".join(part.reason for part in parts))
    return _priced(sum(part.gain_s for part in gaining), remaining_s, restart_cost_s,
                   " and ".join(part.change for part in gaining))


def _priced(gain_s: float, remaining_s: float, restart_cost_s: float, change: str
            ) -> HaltDecision:
    """Halt when the relaunch's `change` gains more than a restart costs."""
    if gain_s <= restart_cost_s:
        return HaltDecision(requested=False, gain_s=gain_s, restart_cost_s=restart_cost_s,
                            change=change,
                            reason=f"relaunching for {change} would gain {gain_s:.0f} s, "
                                   f"costing {restart_cost_s:.0f} s")
    return HaltDecision(requested=True, gain_s=gain_s, restart_cost_s=restart_cost_s,
                        change=change,
                        reason=f"{change} gains {gain_s:.0f} s over the {remaining_s:.0f} s "
                               "left, more than a restart costs")


def request_halt(prefix: str) -> bool:
    """Ask SCR to halt after the next checkpoint."""
    problem = _scr_halt("--checkpoints", "1", prefix)
    if problem:
        log.warning("cannot set a halt in %s: %s", prefix, problem)
    return not problem


def clear_halt(prefix: str) -> str:
    """Remove the conditions scrtune's halt left (checkpoints left 0, and the reason SCR_Finalize
    wrote), so scr_run launches again. An empty string, or why it could not."""
    return _scr_halt("--unset-checkpoints", "--unset-reason", prefix)


def _scr_halt(*args: str) -> str:
    tool = shutil.which("scr_halt")
    if tool is None:
        return "scr_halt not found on PATH"
    try:
        result = subprocess.run([tool, *args], capture_output=True, text=True, timeout=30,
                                check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"scr_halt failed: {exc}"
    if result.returncode != 0:
        return f"scr_halt failed: {(result.stderr or result.stdout).strip()[-300:]}"
    return ""


def remaining_s(end_time_s: float) -> float:
    return end_time_s - time.time() if end_time_s > 0 else 0.0


def allocation_end_s(environ: dict[str, str] | None = None, timeout_s: float = 10.0) -> float:
    """The allocation's end, epoch seconds (0: unknown). `SCR_END_TIME` when set (scr_run sets
    it, but only for the job it launches: a daemon started beside it never sees it), else
    Slurm's own answer for `SLURM_JOB_ID`: `SLURM_JOB_END_TIME` (Slurm 23.02 and later), else
    `squeue -o %e` (local time), asked once with a bounded wait."""
    import os
    from datetime import datetime

    environ = dict(os.environ) if environ is None else environ
    for name in ("SCR_END_TIME", "SLURM_JOB_END_TIME"):
        try:
            value = float(environ.get(name, "") or 0)
        except ValueError:
            continue
        if value > 0 and value == value and value != float("inf"):
            return value
    job, squeue = environ.get("SLURM_JOB_ID", ""), shutil.which("squeue")
    if not job.isdigit() or squeue is None:
        return 0.0
    try:
        answer = subprocess.run([squeue, "-h", "-j", job, "-o", "%e"], capture_output=True,
                                text=True, timeout=timeout_s, check=False).stdout.strip()
        return datetime.strptime(answer, "%Y-%m-%dT%H:%M:%S").timestamp()
    except (OSError, subprocess.TimeoutExpired, ValueError) as exc:
        log.info("allocation end unknown (squeue -j %s): %s", job, exc)
        return 0.0
