"""Timed runs of a job under several SCR configurations: the runs format `calibrate` reads,
checked as hostile input, and what each configuration measured.

Runs are given as JSON (what benchmarks/real_scr_tuning.py writes):
    {"nodes": 2, "ranks_per_node": 1,
     "configs": {"name": {"env": {"SCR_COPY_TYPE": "SINGLE", ...}, "free_threads": false}},
     "runs": {"name": [{"per_checkpoint_s": [0.31, 0.29, ...], "flush_s": 5.2,
                        "flushes": 5}, ...]}}
`flush_s` and `flushes` (optional): the run's flush seconds, summed, and how many flushes (an
asynchronous flush's seconds, as SCR_DEBUG prints them, run until SCR noticed its end: a bound).
`flush_end_s` (optional): when each checkpoint's flush really ended, in seconds from the
checkpoint's end (negative: before SCR_Complete_output returned, as a synchronous flush does;
null: the checkpoint was not flushed, or its flush ended after the job), what
`real_scr_tuning.py --flush-ends` records: an asynchronous flush's duration, not a bound.
`phases_s` (optional): each checkpoint split into SCR_Start_output, the application's own
writes and SCR_Complete_output, seconds each (the slowest rank's), what `real_scr_tuning.py`
records: the first checkpoint's writes, which no flush overlaps, time the cache (or, in bypass,
the parallel file system) apart from SCR's work around them.
`env` holds the SCR parameters of the run (SCR's defaults for those left out; a name SCR does
not have, or a value it cannot read, is refused); `free_threads`, whether transfer threads
could run on any core; `transfer_threads`, the PTHREAD flush threads per rank when the run set
them (0: AXL's own count). At least 10 distinct configurations (by what SCR reads, not names).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable

import msgspec

from scrtune.errors import UsageError
from scrtune.intents.inputs import MAX_NODES, SystemProfile
from scrtune.scr_config.catalogue import BY_NAME
from scrtune.scr_config.values import byte_count, check_value
from scrtune.study.fitted_rates import RATE_NAMES
from scrtune.study.model import Config

MIN_CONFIGS = len(RATE_NAMES) + 1
MAX_RUN_S = 1e7  # a timed checkpoint or flush of more than 115 days is no measurement


class RunConfig(msgspec.Struct, frozen=True, kw_only=True):
    env: dict[str, str] = {}
    free_threads: bool = False
    transfer_threads: int = 0  # PTHREAD flush threads per rank, when the run set them (AXL)


class RunTimes(msgspec.Struct, frozen=True, kw_only=True):
    per_checkpoint_s: list[float]
    flush_s: float | None = None  # the run's flushes, summed (what SCR_DEBUG printed)
    flushes: int = 0
    # each checkpoint's flush's real end, from its end; None: not flushed, or its end not seen
    flush_end_s: list[float | None] | None = None
    # each checkpoint's (SCR_Start_output, the application's writes, SCR_Complete_output)
    phases_s: list[tuple[float, float, float]] | None = None


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
    flush_s: float | None = None  # one flush: the median over runs that timed their flushes
    flush_exact: bool = False  # flush_s is a duration (its real end), not SCR_DEBUG's bound
    # the application's writes of the first checkpoint: the median over runs that timed them
    write_s: float | None = None


def load_runs(path: str, to_fit: bool = True) -> TimedRuns:
    """Timed runs from JSON; what cannot be used is a one-line error naming the field. Runs to
    fit must hold enough distinct configurations for the rates; runs only predicted (another
    job's, with rates fitted elsewhere) need not."""
    try:
        with open(path, "rb") as handle:
            runs = msgspec.json.decode(handle.read(), type=TimedRuns)
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    except msgspec.DecodeError as exc:  # ValidationError included: it names the field
        raise UsageError(f"{path}: {exc}") from None
    if not 1 <= runs.nodes <= MAX_NODES or not 1 <= runs.ranks_per_node <= 1 << 20:
        raise UsageError(f"{path}: nodes and ranks_per_node must be positive counts")
    for name, config in runs.configs.items():
        _check_env(path, name, config)
    for name, times in runs.runs.items():
        if name not in runs.configs:
            raise UsageError(f"{path}: runs.{name}: no such entry in configs")
        if not times or any(not t.per_checkpoint_s for t in times):
            raise UsageError(f"{path}: runs.{name}: a run without checkpoint times")
        values = [s for t in times for s in t.per_checkpoint_s]
        values += [t.flush_s for t in times if t.flush_s is not None]
        values += [s for t in times for phase in t.phases_s or () for s in phase]
        ends = [abs(s) for t in times for s in t.flush_end_s or () if s is not None]
        if not all(math.isfinite(s) and s <= MAX_RUN_S for s in ends):
            raise UsageError(f"{path}: runs.{name}: flush_end_s must be seconds within "
                             f"{MAX_RUN_S:,.0f} of the checkpoint's end")
        if not all(math.isfinite(s) and 0 <= s <= MAX_RUN_S for s in values) or not any(values):
            raise UsageError(f"{path}: runs.{name}: checkpoint, flush and phase times must be "
                             f"seconds from 0 to {MAX_RUN_S:,.0f}, not all 0")
    distinct = {_identity(runs.configs[name]) for name in runs.runs}
    if to_fit and len(distinct) < MIN_CONFIGS:
        raise UsageError(f"{path}: fitting {len(RATE_NAMES)} rates needs runs of at least "
                         f"{MIN_CONFIGS} configurations, got {len(distinct)} distinct ones "
                         f"among {len(runs.runs)} names")
    return runs


def _identity(config: RunConfig) -> tuple:
    """What makes a configuration: its SCR parameters as SCR reads them (defaults filled in,
    enumerations in either case) and its threads."""
    return (config_of(config.env), config.free_threads, config.transfer_threads)


def _check_env(path: str, name: str, config: RunConfig) -> None:
    """A run's SCR parameters must be ones SCR has, with values SCR reads: a typo
    (`SCR_COPY_TYP`, `SCR_COPY_TYPE=BOGUS`) would be modelled as SCR's default."""
    for key, value in config.env.items():
        param = BY_NAME.get(key)
        if param is None:
            raise UsageError(f"{path}: configs.{name}.env.{key}: not an SCR parameter")
        problem = check_value(param.kind, value, param.values)
        if problem is not None and problem.severity == "error":
            raise UsageError(f"{path}: configs.{name}.env.{key}: {problem.message}")
    if not 0 <= config.transfer_threads <= 1024:
        raise UsageError(f"{path}: configs.{name}.transfer_threads: a count from 0 to 1024")


def config_of(env: dict[str, str], threads_on_idle_cores: bool = False,
              transfer_threads: int = 0) -> Config:
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
                      flush_every=int(value("SCR_FLUSH")), transfer_threads=transfer_threads,
                      cache_size=int(value("SCR_CACHE_SIZE")))
    except ValueError as exc:
        raise UsageError(f"a run's SCR parameters: {exc}") from None


def median_blocking_s(times: Iterable[RunTimes]) -> float:
    """A configuration's blocking time per checkpoint over some of its runs: the median of
    each run's mean."""
    return statistics.median(statistics.fmean(t.per_checkpoint_s) for t in times)


def measured(runs: TimedRuns, profile: SystemProfile) -> list[Measured]:
    """Each configuration's blocking time per checkpoint. Transfer threads free to move only
    find idle cores when a node has more cores than ranks."""
    idle = profile.cores_per_node > runs.ranks_per_node
    out = []
    for name, times in sorted(runs.runs.items()):
        config = config_of(runs.configs[name].env, idle and runs.configs[name].free_threads,
                           runs.configs[name].transfer_threads)
        real_s = _first_flush_s(times) if config.flush_async and not config.bypass else None
        out.append(Measured(name=name, config=config, blocking_s=median_blocking_s(times),
                            checkpoints=min(len(t.per_checkpoint_s) for t in times),
                            flush_s=real_s or _one_flush_s(times),
                            flush_exact=real_s is not None, write_s=_first_write_s(times)))
    return out


def _first_write_s(times: list[RunTimes]) -> float | None:
    """The application's writes of the first checkpoint, where the runs timed its phases:
    no flush runs beside them yet (later ones share the node with the flush before) and
    nothing is evicted, so they time the tier written alone."""
    firsts = [t.phases_s[0][1] for t in times if t.phases_s and t.phases_s[0][1] > 0]
    return statistics.median(firsts) if firsts else None


def _one_flush_s(times: list[RunTimes]) -> float | None:
    flushes = [t.flush_s / t.flushes for t in times
               if t.flush_s is not None and t.flushes > 0 and t.flush_s > 0]
    return statistics.median(flushes) if flushes else None


def _first_flush_s(times: list[RunTimes]) -> float | None:
    """An asynchronous flush's duration where the runs noted its real end: the first
    checkpoint's, the one flush no other precedes (later ones share the file system with the
    flushes still running before them, as the model's one flush does not)."""
    firsts = [first for t in times if t.flush_end_s
              and (first := t.flush_end_s[0]) is not None and first > 0]
    return statistics.median(firsts) if firsts else None
