"""Optimal checkpoint intervals: Young (1974) and Daly (2006), from the checkpoint cost C, the
mean time between failures M and the restart time R (all seconds). `interval_s` is compute time
between the end of one checkpoint and the start of the next."""

from __future__ import annotations

import math


def young(cost_s: float, mtbf_s: float) -> float:
    """T = sqrt(2 C M)."""
    return math.sqrt(2.0 * cost_s * mtbf_s)


def daly_first_order(cost_s: float, mtbf_s: float) -> float:
    """Daly's first-order estimate: sqrt(2CM) - C."""
    return max(0.0, math.sqrt(2.0 * cost_s * mtbf_s) - cost_s)


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


def daly_waste(interval_s: float, cost_s: float, mtbf_s: float, restart_s: float = 0.0
               ) -> float:
    """Share of wall time lost under Daly's complete model (exponential failures, a failure
    possible during checkpoints and restarts too): the wall time per unit of work is
    M e^(R/M) (e^((T+C)/M) - 1) / T (Daly 2006, eq. 20). Unlike the first-order estimate it
    stays below 1 while the job progresses at all: for his published case (C 5 min, R 10 min,
    M 15 min, T 9.14 min) it is 80%, where the first-order sum is 149%."""
    if interval_s <= 0:
        return 1.0
    try:
        wall = mtbf_s * math.exp(restart_s / mtbf_s) * math.expm1((interval_s + cost_s) / mtbf_s)
    except OverflowError:
        return 1.0
    return max(0.0, 1.0 - interval_s / wall) if wall > 0 else 1.0


def multilevel(levels: list[tuple[float, float]]) -> tuple[list[int], float, float]:
    """First-order multi-level checkpointing (after Benoit et al., IEEE TC 2017).

    `levels` are (cost C_l seconds, MTBF M_l seconds of the failures that level l, and no lower
    one, recovers from), cheapest first (e.g. SINGLE in cache, then XOR, then the parallel file
    system). Level l would checkpoint every sqrt(2 C_l M_l); SCR's descriptors need whole
    multiples of the first level (`INTERVAL=k`), so T_l = k_l T_1. Returns (k per level,
    T_1 seconds, expected waste share: sum C_l/T_l + sum T_l/(2 M_l))."""
    if not levels:
        raise ValueError("no levels")
    base = math.sqrt(2.0 * levels[0][0] * levels[0][1])
    ks = [max(1, round(math.sqrt(2.0 * cost * mtbf) / base)) for cost, mtbf in levels]
    ks = [max(ks[: i + 1]) for i in range(len(ks))]  # higher levels no more often than lower
    waste = sum(cost / (k * base) + k * base / (2.0 * mtbf) for (cost, mtbf), k in zip(levels, ks))
    return ks, base, waste
