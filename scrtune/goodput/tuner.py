"""Closing the loop: every change of configuration is an experiment, judged on the outputs
measured under it against those of the configuration before it, with a stated error rate.

The measure, per output, is its expected waste share: the blocking time over the segment it
closes (compute since the previous checkpoint plus the save), plus the rework a failure in that
segment costs on average (half the segment over the job's MTBF). A write-path change moves the
first term, a cadence change both; the same measure judges either. Outputs recorded without
their compute time fall back to blocking seconds per checkpoint, for both sides alike.

The test is sequential: after each output under the change, from MIN_SAMPLES to MAX_SAMPLES, a
one-sided Welch t-test on the logarithm of the measure, at FALSE_KEEP_RATE / LOOKS per look. By
the union bound a change that does nothing is kept with probability at most FALSE_KEEP_RATE,
whatever the number of looks used (noise independent between outputs; a machine whose load
drifts between relaunches breaks that, and is not separable from the change). A change is
reverted as soon as it measures worse at the same level, or when MAX_SAMPLES outputs do not
show the gain. Pure functions over recorded outputs: the daemon and offline studies judge alike.
"""

from __future__ import annotations

import functools
import math
import statistics

import msgspec

MIN_SAMPLES = 3  # outputs under a configuration before it is judged (each side)
MAX_SAMPLES = 12  # outputs under a change before a gain not shown is given up
LOOKS = MAX_SAMPLES - MIN_SAMPLES + 1
FALSE_KEEP_RATE = 0.05  # at most this share of changes that do nothing is kept
POWER = 0.8  # what an experiment is sized for: the predicted gain found 4 times in 5
MIN_IMPROVEMENT = 0.05  # and a kept change is at least this much better, whatever the noise
BASELINE_OUTPUTS = 24  # the latest outputs of the baseline it is compared with
# the profile's MTBF counts as this much of the job's own running: a job's crashes soon outweigh
# it (7 in 216 s: 39 s, where 600 s of weight said 117 s). Too short an interval from an early
# crash costs checkpoint time; too long a one loses work, and the profile's rate bounds it.
PRIOR_WEIGHT_S = 60.0


class Output(msgspec.Struct, frozen=True, kw_only=True):
    """One checkpoint as measured: which configuration, how long it blocked, how many steps of
    progress it protects, and the compute since the previous one (0: not recorded)."""

    config: str  # an id of the configuration in force (e.g. a hash of its SCR_Config strings)
    wall_s: float
    save_s: float
    steps: int
    compute_s: float = 0.0
    due: int = -1  # 1: need_checkpoint() said yes before it, 0: it did not, -1: not recorded
    timer_s: float = 0.0  # the client's own cadence in force (SCR had none, or an action's)


class Experiment(msgspec.Struct, frozen=True, kw_only=True):
    before: str
    after: str
    started_s: float
    predicted_change: float  # relative change of the measure the model expected (nan: none)
    measured_before: float  # mean of the measure (see `measure`)
    measured_after: float
    noise: float  # relative: the 1 - FALSE_KEEP_RATE / LOOKS bound on the change measured
    # "kept", "reverted", "measuring", "abandoned" (superseded before a verdict) or "unjudged"
    # (MAX_SAMPLES outputs, but too few of the configuration before it to compare with)
    verdict: str
    outputs_before: int = 0
    outputs_after: int = 0  # used for the verdict (those after it are not judged again)
    measure: str = "waste share"  # or "blocking s" when compute times were not recorded
    why: str = ""
    changes: list[str] = []  # in words, e.g. "SCR_FILE_BUF_SIZE 32MB -> 192MB" (the daemon's)

    @property
    def key(self) -> str:
        """Which change this is: its configurations and the wall time of its first output."""
        return f"{self.before}>{self.after}@{self.started_s!r}"

    def summary(self) -> str:
        """The experiment in words: what changed, on how many outputs, by how much, with what
        uncertainty, and the verdict with its reason. The daemon's log, `status` and the
        goodput report all print this."""
        what = "; ".join(self.changes) or f"{self.before} -> {self.after}"
        change = self.measured_after / self.measured_before - 1 \
            if self.measured_before > 0 else math.nan
        measured = f"{self.measure} {self.measured_before:.4g} -> {self.measured_after:.4g}"
        if math.isfinite(change) and math.isfinite(self.noise):
            measured += f" ({100 * change:+.0f}% \u00b1 {100 * self.noise:.0f}%)"
        elif math.isfinite(change):  # one output on a side: no spread to bound it with
            measured += f" ({100 * change:+.0f}%, noise not measurable)"
        predicted = f", predicted {100 * self.predicted_change:+.0f}%" \
            if math.isfinite(self.predicted_change) else ""
        return (f"{what}: {self.verdict} after {self.outputs_after} outputs against "
                f"{self.outputs_before}: {measured}{predicted}; {self.why}")


def measured_interval_s(outputs: list[Output], since_s: float = 0.0) -> float:
    """Median compute time between the job's last recorded checkpoints (of those recorded at
    `since_s` or later: a run's own, where a relaunch changed SCR's interval); 0 before two."""
    recent = [output for output in outputs[-33:] if output.wall_s >= since_s]
    gaps = [after.wall_s - before.wall_s - after.save_s
            for before, after in zip(recent, recent[1:])]
    return max(statistics.median(gaps), 1e-3) if gaps else 0.0


def mtbf_estimate(prior_mtbf_s: float, crashes: int, observed_s: float,
                  prior_weight_s: float = PRIOR_WEIGHT_S) -> float:
    """The job's MTBF: the failure rate's Gamma posterior mean with the profile's rate as a
    prior worth `prior_weight_s` seconds of the job's own running, (W/M + n) / (W + T), never
    below the profile's rate (a job's hours cannot show that nodes fail less often than the
    machine's record says, so no crash keeps the profile's MTBF rather than growing it)."""
    prior_rate = 1.0 / prior_mtbf_s if prior_mtbf_s > 0 else 0.0
    weight, exposure = max(prior_weight_s, 0.0), max(observed_s, 0.0)
    if weight + exposure <= 0:
        return prior_mtbf_s
    rate = max(prior_rate, (prior_rate * weight + max(crashes, 0)) / (weight + exposure))
    return 1.0 / rate if rate > 0 else math.inf


def waste_share(output: Output, job_mtbf_s: float) -> float:
    """The output's expected waste share (see the module's docstring)."""
    segment_s = output.compute_s + output.save_s
    rework = segment_s / (2 * job_mtbf_s) if job_mtbf_s > 0 and math.isfinite(job_mtbf_s) else 0
    return output.save_s / segment_s + rework if segment_s > 0 else math.nan


def measures(outputs: list[Output], job_mtbf_s: float, timed: bool) -> list[float]:
    """The positive, finite measures of `outputs`: waste shares when `timed`, else blocking."""
    values = [waste_share(o, job_mtbf_s) if timed else o.save_s for o in outputs]
    return [v for v in values if v > 0 and math.isfinite(v)]


def relative_error(values: list[float]) -> float:
    """The standard error of the mean of `values`, relative to it; inf when it cannot say."""
    if len(values) < 2:
        return math.inf
    mean = statistics.fmean(values)
    return statistics.stdev(values) / math.sqrt(len(values)) / mean if mean > 0 else math.inf


def log_spread(values: list[float]) -> float:
    """The standard deviation of log(values): the relative noise of one output."""
    logs = [math.log(v) for v in values if v > 0]
    return statistics.stdev(logs) if len(logs) > 1 else math.inf


def _welch(before: list[float], after: list[float]) -> tuple[float, float, float]:
    """Mean difference of the logs (after - before), its standard error and Welch's df."""
    a, b = [math.log(v) for v in before], [math.log(v) for v in after]
    va, vb = statistics.variance(a) / len(a), statistics.variance(b) / len(b)
    se = math.sqrt(va + vb)
    # floor: identical outputs (a double, a quiet machine) would give a zero error
    se = max(se, 1e-3)
    df = (va + vb) ** 2 / ((va * va / (len(a) - 1)) + (vb * vb / (len(b) - 1))) \
        if va + vb > 0 else len(a) + len(b) - 2
    return statistics.fmean(b) - statistics.fmean(a), se, max(1.0, df)


def critical_t(df: float) -> float:
    """The one-sided t quantile of one look."""
    return t_quantile(1 - FALSE_KEEP_RATE / LOOKS, df)


def detectable_change(spread: float, baseline: int, outputs_left: int) -> float:
    """The smallest relative improvement an experiment of `outputs_left` outputs (at most
    MAX_SAMPLES) finds with probability POWER, at one output's log spread `spread`."""
    n = min(outputs_left, MAX_SAMPLES)
    if n < MIN_SAMPLES or baseline < MIN_SAMPLES or not math.isfinite(spread):
        return 1.0
    df = max(1.0, min(n, baseline) - 1.0)
    shift = (critical_t(df) + t_quantile(POWER, df)) * spread * math.sqrt(1 / n + 1 / baseline)
    return max(MIN_IMPROVEMENT, 1 - math.exp(-shift))


def judge(before: list[float], after: list[float]) -> tuple[str, int, float, str]:
    """The sequential test over `after` in order: (verdict, outputs used, relative bound of
    the change at the level of one look, why)."""
    if len(before) < MIN_SAMPLES:
        # served without one (the first run's defaults, or after a crash): no output of the
        # configuration before it will come while it runs, so once it has the outputs a
        # baseline needs it stays (waiting for MAX_SAMPLES held every later change back 12
        # outputs: on the Slurm example a 3 s cadence held the cache tier past the job's end)
        if len(after) >= MIN_SAMPLES:
            return "unjudged", MIN_SAMPLES, math.inf, \
                (f"the configuration before it has {len(before)} of {MIN_SAMPLES} outputs: "
                 "nothing to compare with; it stays, the baseline of the next change")
        return "measuring", len(after), math.inf, \
            f"{len(before)} of {MIN_SAMPLES} baseline outputs measured"
    noise = math.inf
    for used in range(MIN_SAMPLES, min(len(after), MAX_SAMPLES) + 1):
        diff, se, df = _welch(before, after[:used])
        bound = critical_t(df) * se
        noise = math.expm1(bound)
        if diff <= -bound and -math.expm1(diff) >= MIN_IMPROVEMENT:
            return "kept", used, noise, (f"better beyond the noise (false-keep rate at most "
                                         f"{100 * FALSE_KEEP_RATE:.0f}%)")
        if diff >= bound:
            return "reverted", used, noise, "measured worse beyond the noise"
    if len(after) >= MAX_SAMPLES:
        return "reverted", MAX_SAMPLES, noise, \
            f"no gain beyond the noise in {MAX_SAMPLES} outputs"
    return "measuring", len(after), noise, \
        f"{len(after)} outputs, judged from {MIN_SAMPLES} up to {MAX_SAMPLES}"


def _runs(outputs: list[Output]) -> list[tuple[str, list[Output]]]:
    runs: list[tuple[str, list[Output]]] = []
    for output in sorted(outputs, key=lambda o: o.wall_s):
        if runs and runs[-1][0] == output.config:
            runs[-1][1].append(output)
        else:
            runs.append((output.config, [output]))
    return runs


def experiments(outputs: list[Output], predicted: dict[str, float] | None = None,
                job_mtbf_s: float = math.inf,
                decided: dict[str, Experiment] | None = None) -> list[Experiment]:
    """One experiment per change of configuration, in order. `predicted` maps a configuration
    to the relative change of the measure expected when it was served (negative: better).
    A change is judged against the latest BASELINE_OUTPUTS outputs of the configuration in
    force before it; back to the baseline after a revert, it is more of the baseline.
    `decided`: verdicts already reached, by Experiment.key, kept as they were (the measure
    moves with the failure rate learned since; a sequential test decides once)."""
    decided = decided or {}

    def judged(pending: Experiment, baseline: list[Output], after: list[Output],
               ended: str = "") -> Experiment:
        """`ended`: why another configuration ran before its verdict, if one did."""
        found = decided.get(pending.key) or _judged(pending, baseline, after, job_mtbf_s)
        if ended and found.verdict == "measuring":  # never judged: neither kept nor reverted
            return msgspec.structs.replace(found, verdict="abandoned", why=ended)
        return found

    found: list[Experiment] = []
    runs = _runs(outputs)
    if not runs:
        return found
    baseline_id, baseline = runs[0][0], list(runs[0][1])
    pending: Experiment | None = None  # the change being measured, with its outputs so far
    pending_outputs: list[Output] = []
    for config, measured in runs[1:]:
        if pending is not None and config == pending.after:
            pending_outputs += measured  # relaunched with the change: more of the same
        elif config == baseline_id:
            if pending is not None:  # abandoned before its verdict: judged on what it has
                found.append(judged(pending, baseline, pending_outputs,
                                    "the configuration before it ran again before a verdict"))
                pending = None
            baseline += measured
            continue
        else:
            if pending is not None:
                found.append(judged(pending, baseline, pending_outputs,
                                    f"{config} was served before a verdict"))
                if found[-1].verdict in ("kept", "unjudged"):
                    baseline_id, baseline = pending.after, list(pending_outputs)
            pending = Experiment(before=baseline_id, after=config, started_s=measured[0].wall_s,
                                 predicted_change=(predicted or {}).get(config, math.nan),
                                 measured_before=math.nan, measured_after=math.nan,
                                 noise=math.inf, verdict="measuring")
            pending_outputs = list(measured)
    if pending is not None:
        found.append(judged(pending, baseline, pending_outputs))
    return found


def _judged(experiment: Experiment, baseline: list[Output], after: list[Output],
            job_mtbf_s: float) -> Experiment:
    before = baseline[-BASELINE_OUTPUTS:]
    timed = all(o.compute_s > 0 for o in before + after)
    values_before, values_after = (measures(x, job_mtbf_s, timed) for x in (before, after))
    verdict, used, noise, why = judge(values_before, values_after)
    judged_after = values_after[:used]
    return msgspec.structs.replace(
        experiment, verdict=verdict, noise=noise, why=why,
        outputs_before=len(values_before), outputs_after=len(judged_after),
        measure="waste share" if timed else "blocking s",
        measured_before=statistics.fmean(values_before) if values_before else math.nan,
        measured_after=statistics.fmean(judged_after) if judged_after else math.nan)


# -- Student's t, for the test's thresholds (no SciPy at run time) --------------------------
def t_quantile(p: float, df: float) -> float:
    """The p-quantile (p >= 0.5) of Student's t with `df` degrees of freedom (to 0.01), by
    bisection on its distribution function."""
    # Welch's degrees of freedom are a fresh float at every look: cached unrounded, nearly
    # every call missed and bisected anew (three quarters of a judgement's time)
    return _t_quantile(p, round(df, 2))


@functools.lru_cache(maxsize=4096)
def _t_quantile(p: float, df: float) -> float:
    low, high = 0.0, 1.0
    while _t_cdf(high, df) < p:
        high *= 2
    for _ in range(80):
        middle = (low + high) / 2
        low, high = (middle, high) if _t_cdf(middle, df) < p else (low, middle)
    return (low + high) / 2


def _t_cdf(t: float, df: float) -> float:
    x = df / (df + t * t)
    tail = 0.5 * _incomplete_beta(x, df / 2, 0.5)
    return 1 - tail if t >= 0 else tail


def _incomplete_beta(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (a continued fraction, after
    Numerical Recipes' betacf)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * _continued_fraction(x, a, b) / a
    return 1 - front * _continued_fraction(1 - x, b, a) / b


def _continued_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1 + numerator * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= d * c
        if abs(d * c - 1) < 1e-14:
            break
    return result
