"""Optimal checkpoint intervals: Young (1974) and Daly (2006), from the checkpoint cost C, the
mean time between failures M and the restart time R (all seconds). `interval_s` is compute time
between the end of one checkpoint and the start of the next."""

from __future__ import annotations

import math


def young(cost_s: float, mtbf_s: float) -> float:
    """T = sqrt(2 C M)."""
    return math.sqrt(2.0 * cost_s * mtbf_s)


def daly(cost_s: float, mtbf_s: float) -> float:
    """Daly's higher-order estimate: sqrt(2CM) [1 + (1/3) sqrt(C/2M) + (1/9) (C/2M)] - C for
    C < 2M, else M."""
    if cost_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = cost_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * cost_s * mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - cost_s


def expected_waste(interval_s: float, cost_s: float, mtbf_s: float, restart_s: float = 0.0
                   ) -> float:
    """Share of wall time lost, first order: checkpoints C/(T+C), plus per failure half an
    interval of lost work and the restart, at rate (T+C)/M per segment."""
    segment = interval_s + cost_s
    if segment <= 0:
        return restart_s / mtbf_s
    return cost_s / segment + (segment / 2.0 + restart_s) / mtbf_s
