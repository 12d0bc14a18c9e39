"""The model against the other measurements of the same job (issue 48): model_holdout.py
--against. One grid's runs rank its configurations only as well as their noise lets (three
runs a configuration: a model without error would rank the full-scale job's 0.87-0.93); the
same job measured on other days, each configuration's time taken relative to its grid's mean
and averaged over the grids, is a measurement of 13 times as many runs that the held-out fit
never saw. Against it, the model's held-out predictions and the grid's own runs are ranked
side by side, and each group's predictions are scored with the constant guess's. Pooled
across days the machine's own shift counts as the model's error (issue 48: two days' grids
moved as a block, SINGLE against PARTNER and XOR), so the report says how many of the other
grids were measured on another day."""

from __future__ import annotations

import contextlib
import json
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from scrtune.errors import UsageError
from scrtune.study.fit import spearman
from scrtune.study.model import Config
from scrtune.study.runs import Measured

# what makes two grids one job: real_scr_tuning.py's settings that change what is timed
JOB_FIELDS = ("nodes", "ranks_per_node", "pfs_call_us", "dirty_mb", "trim_cache_s",
              "compute_s", "app_args")
UNSET_IS_ZERO = ("dirty_mb", "trim_cache_s")


def job_of(path: str) -> dict:
    """A grid's job settings; a file that is not a grid is a UsageError naming it."""
    with _as_usage_error(path), open(path) as handle:
        grid = json.load(handle)
        # a grid that left the kernel alone recorded no dirty_mb or trim_cache_s, or 0
        return {field: grid[field] if field not in UNSET_IS_ZERO else grid.get(field) or 0
                for field in JOB_FIELDS}


@contextlib.contextmanager
def _as_usage_error(path: str) -> Iterator[None]:
    """What reading a grid file raises, as a UsageError naming it."""
    try:
        yield
    except KeyError as exc:
        raise UsageError(f"{path}: no field {exc} (not a grid of real_scr_tuning.py --json)"
                         ) from None
    except (OSError, ValueError, AttributeError, TypeError, OverflowError) as exc:
        raise UsageError(f"{path}: {getattr(exc, 'strerror', None) or exc}") from None


def check_same_job(path: str, others: Sequence[str]) -> None:
    """Every grid of `others` measured the job `path` did, else a UsageError naming the first
    grid and setting that differ (another job's configurations rank otherwise)."""
    job = job_of(path)
    for other in others:
        theirs = job_of(other)
        for field in JOB_FIELDS:
            if theirs[field] != job[field]:
                raise UsageError(f"{other}: another job than {path} ({field} "
                                 f"{theirs[field]!r}, not {job[field]!r})")


def measured_days(path: str) -> frozenset[str]:
    """The UTC dates a grid's checkpoints ended on (empty where its runs did not record
    when: grids before the field); a file that is not a grid is a UsageError naming it."""
    with _as_usage_error(path), open(path) as handle:
        runs = json.load(handle)["runs"]
        ends = [end for repeats in runs.values() for run in repeats
                for end in run.get("checkpoint_end_unix_s", ())]
        return frozenset(datetime.fromtimestamp(float(end), timezone.utc).date().isoformat()
                         for end in ends)


def grids_another_day(path: str, others: Sequence[str]) -> int | None:
    """How many of `others` were measured on none of the days `path` was; None where a grid
    did not record when."""
    days = measured_days(path)
    theirs = [measured_days(other) for other in others]
    if not days or not all(theirs):
        return None
    return sum(1 for other in theirs if not other & days)


@dataclass(frozen=True)
class GroupAgainstOthers:
    """One held-out group scored against the other measurements: median relative errors of
    the model's predictions and of the constant guess (the median of the runs fitted to)."""
    configurations: int
    median_error: float
    constant_error: float


@dataclass(frozen=True)
class AgainstOthers:
    """The held-out predictions (each copy type held out) and the grid's own runs, ranked
    against the other grids' runs of the same configurations: each configuration's median
    over its runs, taken relative to the mean of its grid's configurations in common, then
    averaged over the other grids and set at this grid's own mean (the grids' machines run
    at different speeds; the order and the relative error do not depend on it)."""
    grids: int
    runs_a_configuration: float  # the other grids' runs of one configuration, the median
    configurations: int
    model_rank: float
    own_runs_rank: float
    median_error: float
    groups: dict[str, GroupAgainstOthers]
    grids_another_day: int | None = None  # measured on none of this grid's days; None: unknown


def against_others(rows: Sequence[Measured], held: dict[str, float],
                   groups: dict[str, tuple[dict[str, float], float]],
                   others: Sequence[Sequence[Measured]], other_runs: Sequence[dict[str, int]],
                   another_day: int | None = None) -> dict | None:
    """AgainstOthers for the configurations of `held` (a row name's held-out prediction) that
    every other grid measured; `groups`: each held-out group's predictions and constant;
    `other_runs`: each other grid's run count per row name; `another_day`: how many of them
    were measured on another day (grids_another_day). None with fewer than three
    configurations in common."""
    # a name and what the model makes of it: bound and free threads are one Config where a
    # node has no idle core, and scrtune's recommendation differs from grid to grid
    mine = {_key(row): row for row in rows if row.name in held}
    measured = [{_key(row): row.blocking_s for row in grid} for grid in others]
    common = [key for key in mine if all(key in grid for grid in measured)]
    if len(common) < 3:
        return None
    truth = _pooled(common, [mine[key].blocking_s for key in common], measured)
    names = {key[0]: key for key in common}
    order = sorted(names)
    ranks = [truth[names[name]] for name in order]
    scored = {group: _group(predicted, constant, names, truth)
              for group, (predicted, constant) in groups.items()}
    counts = [sum(runs.get(name, 0) for runs in other_runs) for name in order]
    return asdict(AgainstOthers(
        grids=len(others), runs_a_configuration=statistics.median(counts),
        configurations=len(common),
        model_rank=spearman(ranks, [held[name] for name in order]),
        own_runs_rank=spearman(ranks, [mine[names[name]].blocking_s for name in order]),
        median_error=statistics.median(abs(held[name] / truth[names[name]] - 1)
                                       for name in order),
        groups={group: value for group, value in scored.items() if value is not None},
        grids_another_day=another_day))


Key = tuple[str, Config]


def _key(row: Measured) -> Key:
    return row.name, row.config


def _pooled(common: list[Key], own: list[float], measured: list[dict[Key, float]]
            ) -> dict[Key, float]:
    """Each configuration's time relative to its grid's mean over `common`, averaged over
    the other grids, at this grid's mean (`own`: this grid's times of `common`)."""
    scale = statistics.fmean(own)
    means = [statistics.fmean(grid[key] for key in common) for grid in measured]
    return {key: scale * statistics.fmean(grid[key] / mean
                                          for grid, mean in zip(measured, means))
            for key in common}


def _group(predicted: dict[str, float], constant: float, names: dict[str, Key],
           truth: dict[Key, float]) -> GroupAgainstOthers | None:
    inside = [name for name in predicted if name in names]
    if not inside:
        return None
    return GroupAgainstOthers(
        configurations=len(inside),
        median_error=statistics.median(abs(predicted[n] / truth[names[n]] - 1) for n in inside),
        constant_error=statistics.median(abs(constant / truth[names[n]] - 1) for n in inside))
