"""Closing the loop: measured costs and failures feed the interval; every configuration change
is an experiment, kept when checkpoint badput per step improved beyond the noise, else reverted.

Pure functions over recorded outputs, so the daemon and offline studies judge alike.
"""

from __future__ import annotations

import math
import statistics

import msgspec

MIN_SAMPLES = 3  # checkpoints measured under a configuration before it is judged
MIN_IMPROVEMENT = 0.05  # and at least this share better than before, whatever the noise


class Output(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint as measured: which configuration, how long it blocked, how many steps of
    progress it protects (since the previous one)."""

    config: str  # an id of the configuration in force (e.g. a hash of its SCR_Config strings)
    wall_s: float
    save_s: float
    steps: int


class Experiment(msgspec.Struct, frozen=True, kw_only=True):
    before: str
    after: str
    started_s: float
    predicted_change: float  # relative change of checkpoint badput per step the model expected
    measured_before: float  # seconds of checkpoint badput per step
    measured_after: float
    noise: float  # relative
    verdict: str  # "kept", "reverted" or "measuring"
    changes: list[str] = []  # in words, e.g. "SCR_FILE_BUF_SIZE 32MB -> 192MB" (the daemon's)


def mtbf_estimate(prior_mtbf_s: float, crashes: int, observed_s: float) -> float:
    """Gamma-Poisson: the prior counts as one failure over prior_mtbf_s, then the job's own
    crashes over its own time take over as they accumulate."""
    return (prior_mtbf_s + max(observed_s, 0.0)) / (1 + max(crashes, 0))


def badput_per_step(outputs: list[Output]) -> tuple[float, float]:
    """Mean checkpoint seconds per protected step, and its relative standard error."""
    rates = [o.save_s / o.steps for o in outputs if o.steps > 0]
    if not rates:
        return math.nan, math.inf
    mean = statistics.fmean(rates)
    return mean, (relative_error(rates) if len(rates) > 1 else 1.0 if mean else math.inf)


def relative_error(values: list[float]) -> float:
    """The standard error of the mean of `values`, relative to it; inf when it cannot say."""
    if len(values) < 2:
        return math.inf
    mean = statistics.fmean(values)
    return statistics.stdev(values) / math.sqrt(len(values)) / mean if mean > 0 else math.inf


def experiments(outputs: list[Output], predicted: dict[str, float] | None = None
                ) -> list[Experiment]:
    """One experiment per change of configuration, in order. `predicted` maps a configuration
    to what its recommendation expected (e.g. the expected waste share); an experiment reports
    the relative change predicted from its `before` to its `after` (negative = better)."""
    runs: list[tuple[str, list[Output]]] = []
    for output in sorted(outputs, key=lambda o: o.wall_s):
        if runs and runs[-1][0] == output.config:
            runs[-1][1].append(output)
        else:
            runs.append((output.config, [output]))
    found: list[Experiment] = []
    baseline = runs[0] if runs else None
    for config, measured in runs[1:]:
        assert baseline is not None
        if config == baseline[0]:  # back to the baseline after a revert: more of it, no change
            baseline = (config, baseline[1] + measured)
            continue
        before, noise_before = badput_per_step(baseline[1])
        after, noise_after = badput_per_step(measured)
        noise = max(MIN_IMPROVEMENT, 2 * math.hypot(noise_before, noise_after))
        if len(measured) < MIN_SAMPLES or len(baseline[1]) < MIN_SAMPLES:
            verdict = "measuring"
        elif after < before * (1 - noise):
            verdict = "kept"
        else:
            verdict = "reverted"
        found.append(Experiment(before=baseline[0], after=config,
                                started_s=measured[0].wall_s,
                                predicted_change=_change(predicted or {}, baseline[0], config),
                                measured_before=before, measured_after=after, noise=noise,
                                verdict=verdict))
        if verdict == "kept":
            baseline = (config, measured)  # the new baseline; a reverted one is not
    return found


def _change(predicted: dict[str, float], before: str, after: str) -> float:
    if predicted.get(before) and after in predicted:
        return predicted[after] / predicted[before] - 1.0
    return math.nan
