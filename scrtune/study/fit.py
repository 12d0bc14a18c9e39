"""SCR's own rates on this system, fitted to timed runs of a job through the study's model.

`scrtune profile` times the storage; what SCR makes of it differs (on this project's machine a
real flush moved 0.25 GB/s per node where a synced copy moved 0.48, encoding ran at 2.3 GB/s
where the profile's network would allow 10, an application's writes to the parallel file
system landed in its page cache, and a checkpoint took a third longer beside a background
flush). Given the blocking time per checkpoint of a job run under several SCR
configurations, `fit_rates` finds the `ScrRates` under which the study's own `predict` best
matches them, in relative (log) error with a robust loss. Recommend, study and the daemon then
read those rates from the profile: the model that is fitted is the model that decides.

Runs are given as JSON (what benchmarks/real_scr_tuning.py writes):
    {"nodes": 2, "ranks_per_node": 1,
     "configs": {"name": {"env": {"SCR_COPY_TYPE": "SINGLE", ...}, "free_threads": false}},
     "runs": {"name": [{"per_checkpoint_s": [0.31, 0.29, ...]}, ...]}}
`env` holds the SCR parameters of the run (SCR's defaults for those left out);
`free_threads`, whether transfer threads could run on any core.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

import msgspec
import numpy as np

from scrtune.errors import UsageError
from scrtune.intents.inputs import MAX_NODES, ScrRates, SystemProfile, WorkloadStats
from scrtune.scr_config.catalogue import BY_NAME
from scrtune.scr_config.values import byte_count
from scrtune.study.calibrate import TierCost
from scrtune.study.model import DEFAULT_LATENCY_S, Config, machine, predict

RATE_NAMES = ("app_pfs_write_bytes_per_s", "cache_write_bytes_per_s", "encode_bytes_per_s",
              "flush_bytes_per_s", "flush_call_s", "busy_core_slowdown",
              "checkpoint_overhead_s", "flush_interference")
# where the search starts and how far it may go (log space): plausible for any HPC node
_START = np.log([1e9, 3e9, 3e9, 1e9, 1e-4, 2.0, 0.02, 0.1])
_LOW = np.log([1e6, 1e6, 1e6, 1e6, 1e-9, 1.0, 1e-6, 1e-6])
_HIGH = np.log([1e12, 1e12, 1e12, 1e12, 1.0, 1000.0, 600.0, 100.0])
MIN_CONFIGS = len(RATE_NAMES) + 1


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    env: dict[str, str] = {}
    free_threads: bool = False


class RunTimes(msgspec.Struct, frozen=True, kw_only=True):
    per_checkpoint_s: list[float]


class TimedRuns(msgspec.Struct, frozen=True, kw_only=True):
    nodes: int
    ranks_per_node: int = 1
    configs: dict[str, RunConfig]
    runs: dict[str, list[RunTimes]]


class Measured(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    config: Config
    blocking_s: float  # per checkpoint: the median over runs of each run's mean
    checkpoints: int  # in each run (the fewest): a short run flushes less than a long one


def load_runs(path: str) -> TimedRuns:
    """Timed runs from JSON; what cannot be used is a one-line error naming the field."""
    try:
        with open(path, "rb") as handle:
            runs = msgspec.json.decode(handle.read(), type=TimedRuns)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except msgspec.DecodeError as exc:  # ValidationError included: it names the field
        raise UsageError(f"{path}: {exc}") from None
    if not 1 <= runs.nodes <= MAX_NODES or not 1 <= runs.ranks_per_node <= 1 << 20:
        raise UsageError(f"{path}: nodes and ranks_per_node must be positive counts")
    for name, times in runs.runs.items():
        if name not in runs.configs:
            raise UsageError(f"{path}: runs.{name}: no such entry in configs")
        if not times or any(not t.per_checkpoint_s for t in times):
            raise UsageError(f"{path}: runs.{name}: a run without checkpoint times")
        values = [s for t in times for s in t.per_checkpoint_s]
        if not all(math.isfinite(s) and s >= 0 for s in values) or not any(values):
            raise UsageError(f"{path}: runs.{name}: checkpoint times must be finite seconds, "
                             "not all 0")
    return runs


def config_of(env: dict[str, str], threads_on_idle_cores: bool = False) -> Config:
    """The study's Config for the SCR parameters of a run, SCR's own defaults (the
    catalogue's) for those it leaves out."""
    def value(name: str) -> str:
        return env.get(name, BY_NAME[name].default).upper()

    try:
        return Config(copy_type=value("SCR_COPY_TYPE"), bypass=value("SCR_CACHE_BYPASS") != "0",
                      file_buf_bytes=byte_count(value("SCR_FILE_BUF_SIZE")),
                      flush_async=value("SCR_FLUSH_ASYNC") == "1"
                      and value("SCR_FLUSH_TYPE") != "SYNC",
                      threads_on_idle_cores=threads_on_idle_cores,
                      flush_every=int(value("SCR_FLUSH")))
    except ValueError as exc:
        raise UsageError(f"a run's SCR parameters: {exc}") from None


def measured(runs: TimedRuns, profile: SystemProfile) -> list[Measured]:
    """Each configuration's blocking time per checkpoint. Transfer threads free to move only
    find idle cores when a node has more cores than ranks."""
    idle = profile.cores_per_node > runs.ranks_per_node
    return [Measured(name=name, blocking_s=statistics.median(
                         statistics.fmean(t.per_checkpoint_s) for t in times),
                     checkpoints=min(len(t.per_checkpoint_s) for t in times),
                     config=config_of(runs.configs[name].env,
                                      idle and runs.configs[name].free_threads))
            for name, times in sorted(runs.runs.items())]


Predictor = Callable[[ScrRates | None, Measured], float]


def predictor(load: WorkloadStats, profile: SystemProfile, costs: Sequence[TierCost],
              nodes: int, ranks_per_node: int,
              metadata_call_s: float | None = None) -> Predictor:
    """Blocking seconds per checkpoint of a measured configuration under given rates (None:
    the profile's tiers alone): the study's predict, on the profile with those rates in it,
    for a run of as many checkpoints as were timed."""
    def blocking_s(rates: ScrRates | None, row: Measured) -> float:
        box = machine(msgspec.structs.replace(profile, scr_rates=rates), list(costs),
                      metadata_call_s or DEFAULT_LATENCY_S)
        return predict(load, box, row.config, nodes, ranks_per_node,
                       row.checkpoints).blocking_s

    return blocking_s


def rates_of(theta: np.ndarray, nodes: int, source: str = "") -> ScrRates:
    values = dict(zip(RATE_NAMES, (float(v) for v in np.exp(theta))))
    values["busy_core_slowdown"] = max(1.0, values["busy_core_slowdown"])
    return ScrRates(source=source, nodes=nodes, **values)


def fit_rates(rows: Sequence[Measured], blocking_s: Predictor, nodes: int,
              source: str = "") -> ScrRates:
    """The rates under which the model's blocking times best match the measured ones, in
    log error with a soft-L1 loss (a stalled run pulls less)."""
    from scipy.optimize import least_squares

    if len(rows) < MIN_CONFIGS:
        raise UsageError(f"fitting {len(RATE_NAMES)} rates needs runs of at least "
                         f"{MIN_CONFIGS} configurations, got {len(rows)}")

    def residuals(theta: np.ndarray) -> np.ndarray:
        rates = rates_of(theta, nodes)
        return np.array([math.log(max(blocking_s(rates, row), 1e-9)
                                  / max(row.blocking_s, 1e-9)) for row in rows])

    found = least_squares(residuals, np.clip(_START, _LOW, _HIGH), bounds=(_LOW, _HIGH),
                          loss="soft_l1", f_scale=0.1)
    return rates_of(found.x, nodes, source)


def leave_one_out(rows: Sequence[Measured], blocking_s: Predictor, nodes: int
                  ) -> dict[str, float]:
    """Each configuration predicted by rates fitted to all the others: the honest error."""
    out = {}
    for index, row in enumerate(rows):
        rates = fit_rates([r for i, r in enumerate(rows) if i != index], blocking_s, nodes)
        out[row.name] = blocking_s(rates, row)
    return out


def spearman(left: Sequence[float], right: Sequence[float]) -> float:
    from scipy.stats import spearmanr

    return float(spearmanr(left, right)[0])
