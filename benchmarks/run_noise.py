"""How far a grid's runs lie from themselves, and what that leaves any model of them (issue 48):
benchmarks/model_holdout.py reports these beside the model's held-out figures, so that a goal
missed says whether the model or the measurement fell short."""

from __future__ import annotations

import itertools
import random
import statistics
from dataclasses import asdict, dataclass

from scrtune.study.fit import spearman
from scrtune.study.runs import RunTimes, median_blocking_s


def _run_means(runs: list[RunTimes]) -> list[float]:
    """Each run's mean blocking time a checkpoint (what median_blocking_s takes the median of)."""
    return [statistics.fmean(run.per_checkpoint_s) for run in runs]


def repeatability(times: dict[str, list[RunTimes]], names: list[str]) -> float | None:
    """How well the measurements rank these configurations against themselves: the rank
    correlation of the odd repetitions' medians with the even ones', stepped up to all
    repetitions (Spearman-Brown). Its square root bounds how well a model can correlate with
    the medians, taking every measured spread for a true one (`without_error` estimates what
    such a model would score, the runs' noise taken out of the spread)."""
    def half(parity: int) -> list[float]:
        return [median_blocking_s(times[name][parity::2]) for name in names]

    if len(names) < 3 or any(len(times[name]) < 2 for name in names):
        return None
    halves = spearman(half(0), half(1))
    return 2 * halves / (1 + halves) if halves > -1 else None


@dataclass(frozen=True)
class AgainstHalves:
    """The held-out predictions and a repeat of the measurement, ranked against the same runs:
    every way of splitting each configuration's runs into a half and the rest, the rank
    correlation with the rest's medians of the model's predictions (`model_rank`) and of the
    half's medians (`repeat_rank`, the measurement predicting itself), averaged over the
    splits. A model at or above the repeat ranks the configurations as well as running the
    grid again would: what keeps it under a goal is the runs' noise, not the model (issue 48:
    most grids' configurations lie closer together than a run's noise). `class_means_rank`:
    each class's mean of the half's medians (where classes are given), what a model right
    about every class and blind within one would score (issue 48: on the full-scale grids
    about the held-out model's figure, on the quarter-scale job well under it)."""
    model_rank: float
    repeat_rank: float
    splits: int
    class_means_rank: float | None = None


def against_halves(times: dict[str, list[RunTimes]], predicted: dict[str, float],
                   classes: dict[str, tuple] | None = None) -> dict | None:
    """AgainstHalves over the configurations in `predicted` and the runs they all have;
    with `classes` (each configuration's), also the classes' means."""
    names = sorted(predicted)
    runs = min((len(times[name]) for name in names), default=0)
    if runs < 2 or len(names) < 3:
        return None

    def medians(picked: tuple[int, ...] | list[int]) -> list[float]:
        return [median_blocking_s(times[name][index] for index in picked)
                for name in names]

    model, repeat, classed = [], [], []
    for half in itertools.combinations(range(runs), runs // 2):
        rest = medians([index for index in range(runs) if index not in half])
        halves = medians(half)
        model.append(spearman([predicted[name] for name in names], rest))
        repeat.append(spearman(halves, rest))
        if classes:
            classed.append(spearman(_class_means(names, halves, classes), rest))
    return asdict(AgainstHalves(
        model_rank=statistics.fmean(model), repeat_rank=statistics.fmean(repeat),
        splits=len(model), class_means_rank=statistics.fmean(classed) if classed else None))


def _class_means(names: list[str], values: list[float], classes: dict[str, tuple]
                 ) -> list[float]:
    """Each configuration's class's mean of `values` (in the order of `names`)."""
    members: dict[tuple, list[float]] = {}
    for name, value in zip(names, values):
        members.setdefault(classes[name], []).append(value)
    return [statistics.fmean(members[classes[name]]) for name in names]


def spread(times: dict[str, list[RunTimes]], names: list[str]) -> float | None:
    """The median, over configurations run more than once, of how far a run's mean blocking
    time lies from the configuration's median (relative, the median over its runs): what
    repeating the measurement moves it by (issue 48: on the thread-count grid 3%, where a
    constant guess was 5% off a group and the model 14%: the group is flat and the model
    wrong, not the runs noisy)."""
    spreads = []
    for name in names:
        means = _run_means(times[name])
        middle = statistics.median(means)
        if len(means) > 1 and middle > 0:
            spreads.append(statistics.median(abs(m - middle) for m in means) / middle)
    return statistics.median(spreads) if spreads else None


@dataclass(frozen=True)
class WithoutError:
    """How a model without error would rank a grid's configurations against runs as noisy as
    these: Spearman's rank correlation of the configurations' true times with their medians
    over as many runs, in `draws` draws of the noise (the median and the 10th and 90th
    percentiles). The true times are estimated from the runs: each configuration's median
    drawn toward its class's mean as far as its runs' noise explains the spread of the class
    (within a class whose configurations differ by less than their runs' noise, the estimate
    is the class's mean: nothing in the runs tells them apart). The noise: each
    configuration's own runs' deviations, drawn again. Issue 48: on the full-scale grids,
    where the asynchronous PARTNER and XOR configurations lie within their runs' noise of
    one another, even a model without error falls short of a 0.9 rank on some measurements."""
    median_rank: float
    low_rank: float
    high_rank: float
    draws: int


def without_error(times: dict[str, list[RunTimes]], classes: dict[str, tuple],
                  draws: int = 400, seed: int = 48) -> dict | None:
    """WithoutError for the configurations in `classes` (each one's class); None with fewer
    than three configurations, one run of any, or none the runs tell apart."""
    names = sorted(classes)
    runs = {name: _run_means(times[name]) for name in names}
    if len(names) < 3 or any(len(values) < 2 for values in runs.values()):
        return None
    truth = _true_times(runs, classes)
    if len(set(truth.values())) < 2:  # nothing in the runs tells any of them apart
        return None
    # a deviation from a mean of n runs is sqrt((n - 1) / n) of the noise's
    noise = {name: [(value - statistics.fmean(values)) * (len(values) / (len(values) - 1)) ** 0.5
                    for value in values] for name, values in runs.items()}
    draw = random.Random(seed)
    ranks = sorted(spearman([truth[name] for name in names], [
        statistics.median(truth[name] + draw.choice(noise[name]) for _ in runs[name])
        for name in names]) for _ in range(draws))
    return asdict(WithoutError(median_rank=statistics.median(ranks),
                               low_rank=ranks[draws // 10], high_rank=ranks[draws * 9 // 10],
                               draws=draws))


def _true_times(runs: dict[str, list[float]], classes: dict[str, tuple]) -> dict[str, float]:
    """Each configuration's median drawn toward its class's mean by the share of the class's
    spread that its runs' noise does not explain (a method-of-moments shrinkage)."""
    members: dict[tuple, list[str]] = {}
    for name in runs:
        members.setdefault(classes[name], []).append(name)
    truth = {}
    for names in members.values():
        middles = {name: statistics.median(runs[name]) for name in names}
        if len(names) < 2:
            truth.update(middles)
            continue
        centre = statistics.fmean(middles.values())
        between = statistics.variance(middles.values())
        noise = statistics.fmean(statistics.variance(runs[name]) / len(runs[name])
                                 for name in names)
        kept = max(0.0, 1.0 - noise / between) if between > 0 else 0.0
        truth.update({name: centre + kept * (middle - centre)
                      for name, middle in middles.items()})
    return truth
