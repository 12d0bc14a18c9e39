"""SCR's own rates on this system, fitted to timed runs of a job through the study's model.

`scrtune profile` times the storage; what SCR makes of it differs (on this project's machine a
real flush moved 0.25 GB/s per node where a synced copy moved 0.48, encoding ran at 2.3 GB/s
where the profile's network would allow 10, an application's writes to the parallel file
system landed in its page cache, and a checkpoint took a third longer beside a background
flush). Given the blocking time per checkpoint of a job run under several SCR
configurations, `fit_rates` finds the `ScrRates` under which the study's own `predict` best
matches them, in relative (log) error with a robust loss. Recommend, study and the daemon then
read those rates from the profile: the model that is fitted is the model that decides.

Runs are given in the format of `scrtune.study.runs` (what benchmarks/real_scr_tuning.py
writes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec
import numpy as np

from scrtune.errors import UsageError
from scrtune.intents.inputs import ScrRates, SystemProfile, WorkloadStats
from scrtune.study.calibrate import TierCost
from scrtune.study.fitted_rates import (
    HIGH,
    LOW,
    RATE_NAMES,
    START,
    rates_of,
    uncalibrated,
)
from scrtune.study.model import DEFAULT_LATENCY_S, Prediction, machine, predict
from scrtune.study.runs import MIN_CONFIGS, Measured

# the flush rate leans on the profile's parallel file system (its per-call cost too, where the
# profile measured a call's latency; below): a factor e on the rate costs as much as a 2%
# error on one run, which the runs outweigh wherever they show it. Runs whose flushes all
# hide behind compute bound it only from one side (their flush times are bounds), and it
# stays near what the profile measured instead of drifting to the search's bound (issue 48:
# 72 GB/s fitted, 0.8 GB/s profiled, synchronous flushes held out 70% off, 36% with this)
FLUSH_RATE = RATE_NAMES.index("flush_bytes_per_s")
PRIOR_WEIGHT = 0.02
FLUSH_CALL = RATE_NAMES.index("flush_call_s")
# SCR's flush calls go to the file system whose call the profile timed: a factor e away from
# that costs as much as a 50% error on one run. At 0.02 the runs of one buffer size, their
# flushes shorter with more threads, set the call at 114 ms where the profile measured 2.2 ms
# and said it was determined; the held-out 1 MB runs came out 12x too slow (issue 48)
CALL_PRIOR_WEIGHT = 0.5
FLUSH_CALL_STARTS_S = (1e-4, 1e-3, 1e-2)  # a local disk's call, a file system's, a slow one's
# the search stops when a step improves the fit by less than this share: on runs whose rates
# run to their bounds (every flush outlasting the compute), SciPy's 1e-8 took 400-700
# evaluations a start, a minute a fit, for a cost 0.01% lower (issue 48, tenth round)
FIT_FTOL = 1e-6


Predictor = Callable[[ScrRates | None, Measured], float]


@dataclass(frozen=True)
class Predictors:
    """What the model says of a measured configuration under given rates (None: the
    profile's tiers alone), for each kind of time a run can give: its blocking seconds per
    checkpoint, one flush's seconds, and the application's own writes of one checkpoint.
    A fit to blocking times alone leaves the other two out."""
    blocking_s: Predictor
    flush_s: Predictor | None = None
    write_s: Predictor | None = None


def predictors(load: WorkloadStats, profile: SystemProfile, costs: Sequence[TierCost],
               nodes: int, ranks_per_node: int, metadata_call_s: float | None = None
               ) -> Predictors:
    """The study's predict of a measured configuration, on the profile with the given rates
    in it, for a run of as many checkpoints as were timed. The three share each prediction:
    a fit asks all of a row under one set of rates."""
    # a fit predicts every run under one set of rates before it tries the next: the machine
    # is built once per set (building it for each run was half of a fit's time), and a row
    # is predicted once per set (its flush and its blocking were two predictions, a third
    # of a fit's time)
    built: list = [None, None, {}]  # the rates, their machine, each row's prediction

    def prediction(rates: ScrRates | None, row: Measured) -> Prediction:
        if built[1] is None or built[0] != rates:
            built[:] = [rates, machine(msgspec.structs.replace(profile, scr_rates=rates),
                                       list(costs), metadata_call_s or DEFAULT_LATENCY_S,
                                       traced=load), {}]
        key = (row.config, row.checkpoints)
        done = built[2].get(key)
        if done is None:
            done = built[2][key] = predict(load, built[1], row.config, nodes, ranks_per_node,
                                           row.checkpoints, goodput=False)
        return done

    return Predictors(lambda rates, row: prediction(rates, row).blocking_s,
                      lambda rates, row: prediction(rates, row).flush_s,
                      lambda rates, row: prediction(rates, row).write_s)


def fit_rates(rows: Sequence[Measured], predict: Predictors, nodes: int,
              source: str = "", profile: SystemProfile | None = None,
              near: ScrRates | None = None) -> ScrRates:
    """The rates under which the model's blocking times (and the flush times and the
    application's own writes of the runs that timed them, where `predict` has them) best
    match the measured ones, in log error with a soft-L1 loss (a stalled run pulls less).
    Blocking times alone see a flush's rate and the slowdown of threads beside busy ranks only
    as a ratio, through an assumed compute gap; a flush's own time separates them. They see
    the cache's write rate only with the encode's beside it (a copy type's checkpoint is both;
    SCR's own work on every checkpoint too): the application's writes, timed apart, separate
    those. `near`: rates to start the search from (a fit to more runs) instead of the usual
    starts."""
    from scipy.optimize import least_squares

    if len(rows) < MIN_CONFIGS:
        raise UsageError(f"fitting {len(RATE_NAMES)} rates needs runs of at least "
                         f"{MIN_CONFIGS} configurations, got {len(rows)}")

    blocking_s, flush_s, write_s = predict.blocking_s, predict.flush_s, predict.write_s
    flushed = [row for row in rows if row.flush_s] if flush_s else []
    written = [row for row in rows if row.write_s] if write_s else []

    def residuals(theta: np.ndarray) -> np.ndarray:
        rates = rates_of(theta, nodes)
        blocking = [math.log(max(blocking_s(rates, row), 1e-9) / max(row.blocking_s, 1e-9))
                    for row in rows]
        flushes = [_flush_residual(flush_s(rates, row), row)  # type: ignore[misc]
                   for row in flushed]
        writes = [math.log(max(write_s(rates, row), 1e-9) / row.write_s)  # type: ignore
                  for row in written]
        lean = weights * (theta[leaning] - prior[leaning])
        return np.array([*blocking, *flushes, *writes, *lean])

    prior = uncalibrated(profile, nodes)
    # the flush's per-call cost leans on the file system's call latency where the profile
    # measured one: with the runs of 1 MB buffers held out, nothing else shows it (issue 48)
    leans = {FLUSH_RATE: PRIOR_WEIGHT}
    if profile and profile.parallel and profile.parallel.write_latency_s:
        leans[FLUSH_CALL] = CALL_PRIOR_WEIGHT
    leaning, weights = list(leans), np.array(list(leans.values()))
    data = len(rows) + len(flushed) + len(written)
    found = min((least_squares(residuals, start, bounds=(LOW, HIGH), loss="soft_l1",
                               f_scale=0.1, ftol=FIT_FTOL) for start in _starts(near)),
                key=lambda f: f.cost)
    undetermined = _undetermined(found.jac[:data], found.active_mask, data)  # runs alone
    theta = found.x.copy()
    # a rate no run depends on is wherever the search left it: the uncalibrated model's
    # value instead. Those the runs see only together with others keep their fitted values
    # (together they reproduce the runs), marked as not measured
    unused = [i for i in undetermined if not np.any(np.abs(found.jac[:data, i]) > 1e-12)]
    theta[unused] = prior[unused]
    fitted = rates_of(theta, nodes, source)
    return msgspec.structs.replace(fitted, undetermined=tuple(RATE_NAMES[i]
                                                              for i in undetermined))


def _starts(near: ScrRates | None = None) -> list[np.ndarray]:
    """Where the search starts: the model is piecewise (a flush hides behind the compute or
    it does not), so the fit has local minima. From one start, with one copy type's runs held
    out, the per-call cost of a flush stayed at its start (0.1 ms) where the runs showed 1.3
    ms (issue 48: held-out 1 MB synchronous flushes 36% low); the best of a few starts
    across its plausible range is kept."""
    if near is not None:
        return [np.clip(np.log([getattr(near, name) for name in RATE_NAMES]), LOW, HIGH)]
    out = []
    for call_s in FLUSH_CALL_STARTS_S:
        start = START.copy()
        start[FLUSH_CALL] = math.log(call_s)
        out.append(np.clip(start, LOW, HIGH))
    return out


def _flush_residual(predicted_s: float, row: Measured) -> float:
    """Log error of a flush time. SCR_DEBUG's time of an asynchronous flush runs until SCR
    noticed it had finished, at the end of a later SCR_Complete_output: a flush hidden behind the
    compute shows as the checkpoint period (issue 48: on the real SCR, 1.78 s for every
    asynchronous flush of a 1.76 s period, whatever its buffer). It bounds the flush from
    above; only a prediction beyond it is an error. A flush's real end (`flush_end_s`) is a
    duration, an error either way."""
    error = math.log(max(predicted_s, 1e-9) / row.flush_s)  # type: ignore[operator]
    return max(error, 0.0) if row.config.flush_async and not row.flush_exact else error


# a rate is determined when a factor of 2 on it, every other rate refitted, worsens the
# root-mean-square log error of the runs it acts on by at least this much (5%): below, the
# runs cannot tell
DETERMINED_RMS = 0.05


def _undetermined(jacobian: np.ndarray, active: np.ndarray, count: int) -> list[int]:
    """Indices of the rates the runs do not determine: stopped at a search bound, or flat
    within the fit (the profile of the loss, to second order: moving rate i by d with the
    others free raises the sum of squares by d^2 / C_ii, C the pseudo-inverse of J'J). Two
    rates seen only as a ratio (a flush rate and a slowdown, through an assumed compute gap)
    are then both undetermined, however well they fit."""
    information = jacobian.T @ jacobian
    # a ridge far below any real curvature: a direction the runs do not see at all (a rate no
    # configuration uses) gets a huge spread instead of the pseudo-inverse's zero
    ridge = 1e-9 * max(float(np.trace(information)), 1e-30) / len(RATE_NAMES)
    covariance = np.linalg.inv(information + ridge * np.eye(len(RATE_NAMES)))
    out = []
    for index in range(len(RATE_NAMES)):
        spread = covariance[index, index]
        rise = math.log(2) ** 2 / spread if spread > 0 else math.inf
        if active[index] != 0 or not math.sqrt(rise / _carriers(jacobian[:, index], count)) \
                >= DETERMINED_RMS:
            out.append(index)
    return out


def _carriers(column: np.ndarray, count: int) -> float:
    """How many runs a rate's effect is spread over (the participation ratio of its column
    of the Jacobian: n for an even spread, 1 for one run): its root-mean-square error is
    taken over those. Over every run, the 2 ms call that about 13 runs show clearly (most
    with 1 MB buffers) was diluted among 96 times and said to be undetermined (issue 48)."""
    size = np.abs(column)
    energy = float(size @ size)
    if energy <= 0:
        return float(max(count, 1))
    return min(float(size.sum()) ** 2 / energy, float(max(count, 1)))


def leave_one_out(rows: Sequence[Measured], predict: Predictors, nodes: int,
                  profile: SystemProfile | None = None,
                  everything: ScrRates | None = None) -> dict[str, float]:
    """Each configuration predicted by rates fitted to all the others: the honest error.
    Each fold's search starts where the fit to every run (`everything`, fitted here when not
    given) ended: its optimum lies near; the usual starts made `calibrate --leave-one-out`
    take minutes."""
    if everything is None:
        everything = fit_rates(rows, predict, nodes, profile=profile)
    out = {}
    for index, row in enumerate(rows):
        rates = fit_rates([r for i, r in enumerate(rows) if i != index], predict, nodes,
                          profile=profile, near=everything)
        out[row.name] = predict.blocking_s(rates, row)
    return out


def spearman(left: Sequence[float], right: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(left, right)[0])
