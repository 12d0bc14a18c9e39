"""The cost of a call on each storage tier, fitted from the trace's own calls.

For every distinct call size the engine keeps the calls and their summed duration per file;
per tier (node-local or parallel file system, by path) a robust linear fit (Huber's, huber.py)
of the mean duration of each size gives duration = latency + size / bandwidth.
Each size is one point: weighting by calls would let thousands of tiny calls decide the slope
and make the few large ones look like outliers. Outlying sizes (a cache hit, a stalled call)
pull a Huber fit far less than least squares.
"""

from __future__ import annotations

import msgspec
import numpy as np

from scrtune.engine.stats import Stats
from scrtune.study.huber import huber_line

MIN_POINTS = 2


class TierCost(msgspec.Struct, frozen=True, kw_only=True):
    tier: str
    direction: str  # "write" or "read"
    latency_s: float
    bytes_per_s: float
    calls: int
    sizes: int  # distinct call sizes the fit used


def tier_of(path: str, tiers: dict[str, str]) -> str | None:
    """The tier whose path is the longest prefix of `path` (tiers: path -> tier name)."""
    best = None
    for prefix, name in tiers.items():
        if path.startswith(prefix.rstrip("/") + "/") or path == prefix:
            if best is None or len(prefix) > len(best[0]):
                best = (prefix, name)
    return best[1] if best else None


def points(stats: Stats, tiers: dict[str, str]) -> dict[tuple[str, str], dict[int, list[int]]]:
    """(tier, direction) -> size -> [calls, dur_us], over the files of that tier."""
    out: dict[tuple[str, str], dict[int, list[int]]] = {}
    for key, sizes in stats.call_costs.items():
        path = stats.hash_names.get(key, key if key.startswith("/") else "")
        tier = tier_of(path, tiers) if path else None
        if tier is None:
            continue
        for signed, (calls, dur) in sizes.items():
            direction = "read" if signed < 0 else "write"
            slot = out.setdefault((tier, direction), {}).setdefault(abs(signed), [0, 0])
            slot[0] += calls
            slot[1] += dur
    return out


def fit(per_size: dict[int, list[int]], tier: str, direction: str) -> TierCost | None:
    sizes = np.array(sorted(s for s in per_size if s > 0), dtype=np.float64)
    if len(sizes) < MIN_POINTS:
        return None
    calls = np.array([per_size[int(s)][0] for s in sizes], dtype=np.float64)
    mean_s = np.array([per_size[int(s)][1] for s in sizes], dtype=np.float64) / calls / 1e6
    scale = float(sizes.max())  # fit on sizes scaled to [0, 1]: keeps the solver well conditioned
    line = huber_line(sizes / scale, mean_s)
    if line is None:
        return None
    per_byte = max(line.slope / scale, 1e-15)
    return TierCost(tier=tier, direction=direction, latency_s=max(line.intercept, 0.0),
                    bytes_per_s=1.0 / per_byte, calls=int(calls.sum()), sizes=len(sizes))


def calibrate(stats: Stats, tiers: dict[str, str]) -> list[TierCost]:
    found = []
    for (tier, direction), per_size in sorted(points(stats, tiers).items()):
        cost = fit(per_size, tier, direction)
        if cost is not None:
            found.append(cost)
    return found
