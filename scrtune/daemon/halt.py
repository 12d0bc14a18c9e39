"""Relaunch with a better configuration, only when asked (`--allow-restart`) and only when it
pays: SCR reads its parameters in SCR_Init, so a new configuration needs a new run. The halt
goes through SCR's own `scr_halt` (the halt file is a binary kvtree that only SCR's tools should
write); `scr_run` then starts the next run, which reads the rewritten SCR_CONF_FILE.

The gain modelled is the checkpoint interval's: expected waste at the interval the job runs with
(the one served at its SCR_Init, or what the trace shows) against the recommended one, over the
time left in the allocation (SCR_END_TIME). Other changes (cache, redundancy) are not valued.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
import time

import msgspec

from scrtune.goodput.intervals import expected_waste

log = logging.getLogger("scrtune.daemon")


class HaltDecision(msgspec.Struct, frozen=True, kw_only=True):
    requested: bool
    reason: str
    gain_s: float = 0.0
    restart_cost_s: float = 0.0


def decide(current_interval_s: float, recommended_interval_s: float, cost_s: float,
           mtbf_s: float, remaining_s: float, restart_cost_s: float) -> HaltDecision:
    if current_interval_s <= 0 or recommended_interval_s <= 0 or cost_s <= 0:
        return HaltDecision(requested=False, reason="no interval to compare yet")
    if remaining_s <= restart_cost_s:
        return HaltDecision(requested=False, reason="too little time left in the allocation")
    now = expected_waste(current_interval_s, cost_s, mtbf_s)
    better = expected_waste(recommended_interval_s, cost_s, mtbf_s)
    gain = (now - better) * (remaining_s - restart_cost_s)
    if gain <= restart_cost_s:
        return HaltDecision(requested=False, gain_s=gain, restart_cost_s=restart_cost_s,
                            reason=f"relaunching would gain {gain:.0f} s, costing "
                                   f"{restart_cost_s:.0f} s")
    return HaltDecision(requested=True, gain_s=gain, restart_cost_s=restart_cost_s,
                        reason=f"checkpointing every {recommended_interval_s:.0f} s instead of "
                               f"{current_interval_s:.1f} s gains {gain:.0f} s over the "
                               f"{remaining_s:.0f} s left, more than a restart costs")


def request_halt(prefix: str) -> bool:
    """Ask SCR to halt after the next checkpoint (scr_run then relaunches)."""
    tool = shutil.which("scr_halt")
    if tool is None:
        log.warning("scr_halt not found: cannot set a halt in %s", prefix)
        return False
    try:
        result = subprocess.run([tool, "--checkpoints", "1", prefix], capture_output=True,
                                text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("scr_halt failed: %s", exc)
        return False
    if result.returncode != 0:
        log.warning("scr_halt failed: %s", result.stderr.strip())
    return result.returncode == 0


def remaining_s(end_time_s: float) -> float:
    return end_time_s - time.time() if end_time_s > 0 else 0.0
