"""A tuning study: every configuration of a grid, at every planned node count, predicted from
the traces (the model in model.py, calibrated by calibrate.py), ranked, with the Pareto front
(blocking vs flush time) and the node count from which caching blocks less than bypass."""

from __future__ import annotations

import itertools
import sys
from typing import Annotated, Literal

import msgspec

from scrtune.intents.inputs import HELD, ScrRates, SystemProfile, WorkloadStats
from scrtune.intents.model import MAX_FLUSH_EVERY
from scrtune.intents.write_sizes import DEFAULT_FILE_BUF, REUSED_BUF_MAX, SHARED_CORE_BUF
from scrtune.study.calibrate import TierCost
from scrtune.study.model import DEFAULT_LATENCY_S, MIB, Config, Prediction, machine, predict
from scrtune.units import human_rate, human_seconds, plural

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


class Row(msgspec.Struct, frozen=True, kw_only=True):
    config: Config
    label: str
    predictions: list[Prediction]
    pareto_nodes: list[int]  # node counts at which this configuration is on the front


class Study(msgspec.Struct, frozen=True, kw_only=True):
    nodes: list[int]
    ranks_per_node: int
    calibration: list[TierCost]
    rows: list[Row]
    crossover_nodes: int | None  # from which caching blocks less than bypass (not goodput)
    assumptions: list[str]


def default_axes(load: WorkloadStats) -> dict[str, list]:
    """The values studied per Config field when a grid file does not name them."""
    dominant = max((m.size_bytes for m in load.write_modes), default=DEFAULT_FILE_BUF)
    return {"copy_type": ["SINGLE", "XOR"], "bypass": [True, False],
            # what recommend sets (by the flush's kind), SCR's default and the dominant write
            "file_buf_bytes": sorted({SHARED_CORE_BUF, REUSED_BUF_MAX, DEFAULT_FILE_BUF,
                                      max(MIB, -(-dominant // MIB) * MIB)}),
            "flush_async": [False, True], "threads_on_idle_cores": [False, True],
            # every checkpoint, every 4th, and SCR's default (recommend's for a redundant copy)
            "flush_every": [1, 4, MAX_FLUSH_EVERY], "transfer_threads": [0],
            "cache_size": [Config().cache_size]}


def canonical(config: Config) -> Config:
    """One representative of the configurations SCR cannot tell apart: with bypass nothing
    is cached, so copy type, buffer and flush settings do nothing; without a flush, no flush
    setting does; a synchronous flush has no transfer threads to place or count."""
    if config.bypass:
        return Config(bypass=True)
    if config.flush_every == 0:
        return Config(bypass=False, copy_type=config.copy_type,
                      file_buf_bytes=config.file_buf_bytes, flush_every=0)
    if not config.flush_async:
        return msgspec.structs.replace(config, threads_on_idle_cores=False, transfer_threads=0)
    return config


def expand(axes: dict[str, list]) -> list[Config]:
    """Every combination of the axes, configurations that cannot differ merged."""
    fields = Config.__struct_fields__
    combos = itertools.product(*(axes[f] for f in fields))
    return sorted({canonical(Config(**dict(zip(fields, combo)))) for combo in combos},
                  key=lambda c: c.label())


def default_grid(load: WorkloadStats) -> list[Config]:
    return expand(default_axes(load))


class _Grid(msgspec.Struct, forbid_unknown_fields=True):
    """A grid file: a list of values per Config field; a field left out keeps the default
    grid's values (default_axes), not a single value."""

    copy_type: list[Literal["SINGLE", "PARTNER", "XOR", "RS"]] | None = None
    bypass: list[bool] | None = None
    file_buf_bytes: list[Annotated[int, msgspec.Meta(gt=0)]] | None = None
    flush_async: list[bool] | None = None
    threads_on_idle_cores: list[bool] | None = None
    flush_every: list[Annotated[int, msgspec.Meta(ge=0)]] | None = None  # 0: no flush
    transfer_threads: list[Annotated[int, msgspec.Meta(ge=0, le=1024)]] | None = None
    cache_size: list[Annotated[int, msgspec.Meta(ge=1, le=64)]] | None = None


def grid_from_toml(path: str, load: WorkloadStats | None = None) -> list[Config]:
    """TOML lists per field, e.g. copy_type = ["SINGLE", "XOR"], file_buf_bytes = [33554432];
    every combination is a configuration, fields left out take the default grid's values.
    Raises OSError, or ValueError naming the file and the field."""
    try:
        with open(path, "rb") as handle:
            grid = msgspec.convert(tomllib.load(handle), _Grid)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: not UTF-8 at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    except msgspec.ValidationError as exc:
        raise ValueError(f"{path}: {exc}") from None
    for field in Config.__struct_fields__:
        if getattr(grid, field) == []:
            raise ValueError(f"{path}: {field} is empty: give at least one value, or leave "
                             "it out for the default ones")
    axes = default_axes(load or WorkloadStats())
    axes.update({f: getattr(grid, f) for f in Config.__struct_fields__
                 if getattr(grid, f) is not None})
    return expand(axes)


def run(load: WorkloadStats, profile: SystemProfile, costs: list[TierCost], nodes: list[int],
        grid: list[Config], metadata_call_s: float | None = None) -> Study:
    box = machine(profile, costs, metadata_call_s or DEFAULT_LATENCY_S, traced=load)
    per_node = profile.ranks_per_node or max(1, -(-load.ranks // max(load.hosts, 1)))
    grid, placed = _realizable(grid, profile.cores_per_node, per_node)
    rows = [(c, [predict(load, box, c, n, per_node) for n in nodes]) for c in grid]
    fronts = {n: _pareto([(c, p[i]) for c, p in rows]) for i, n in enumerate(nodes)}
    ranked = sorted(rows, key=lambda r: -r[1][-1].goodput)
    return Study(
        nodes=nodes, ranks_per_node=per_node, calibration=costs,
        rows=[Row(config=c, label=c.label(), predictions=p,
                  pareto_nodes=[n for n in nodes if c in fronts[n]]) for c, p in ranked],
        crossover_nodes=_crossover(load, box, grid, per_node),
        assumptions=_assumptions(profile, costs, load) + placed + [
            f"SCR's metadata calls cost {box.metadata_call_s * 1e6:.1f} us each ("
            + ("the mean of the trace's open, stat, access and close calls)"
               if metadata_call_s else "assumed: the trace has none)")])


def _realizable(grid: list[Config], cores_per_node: int, ranks_per_node: int
                ) -> tuple[list[Config], list[str]]:
    """The grid without transfer threads on idle cores where a node has none (its ranks keep
    every core busy): such a configuration is the bound one, and the study ranked it first
    where `recommend` could not choose it (issue 48)."""
    if cores_per_node > ranks_per_node or not any(c.threads_on_idle_cores for c in grid):
        return grid, []
    bound = {canonical(msgspec.structs.replace(c, threads_on_idle_cores=False)) for c in grid}
    return sorted(bound, key=lambda c: c.label()), [
        f"no idle core ({plural(cores_per_node, 'core')} and {plural(ranks_per_node, 'rank')} "
        "a node): transfer threads share the ranks' cores, so configurations with them on idle "
        "cores are studied as bound"]


def _pareto(points: list[tuple[Config, Prediction]]) -> set[Config]:
    front = set()
    for config, p in points:
        dominated = any(q.blocking_s <= p.blocking_s and q.flush_s <= p.flush_s
                        and (q.blocking_s < p.blocking_s or q.flush_s < p.flush_s)
                        for _, q in points)
        if not dominated:
            front.add(config)
    return front


def _crossover(load: WorkloadStats, box, grid: list[Config], per_node: int) -> int | None:
    cached = [c for c in grid if not c.bypass]
    bypass = Config(bypass=True)
    nodes = 1
    while cached and nodes <= 1 << 16:
        best = min(predict(load, box, c, nodes, per_node).blocking_s for c in cached)
        if best < predict(load, box, bypass, nodes, per_node).blocking_s:
            return nodes
        nodes *= 2
    return None


def _assumptions(profile: SystemProfile, costs: list[TierCost], load: WorkloadStats
                 ) -> list[str]:
    fitted = ", ".join(f"{c.tier} {c.direction}: {c.latency_s * 1e6:.1f} us + size / "
                       f"{human_rate(c.bytes_per_s)} ({plural(c.sizes, 'size')})" for c in costs)
    return [
        f"system profile: {profile.source}",
        "per-call costs fitted from the trace: " + (fitted or "none (the trace touched no "
                                                   "profiled tier): profile bandwidths used"),
        "a rank's bandwidth is its share of the tier's aggregate at n nodes, scaled per doubling "
        "as the profile says, capped by one stream's rate in the trace",
        "SCR adds 6 metadata calls per file; transfer threads bound to a computing rank's core "
        f"run {profile.flush_slowdown():.3g}x slower (the profile's "
        + (f"scr_rates{'; ' + HELD if profile.scr_rates.held('busy_core_slowdown') else ''})"
           if profile.scr_rates else "busy_core_slowdown)"),
        *(_rates_said(profile.scr_rates) if profile.scr_rates else ()),
        _unslowed_said(profile),
        "failures are exponential with the profile's node MTBF; goodput at "
        + (f"the job's own cadence, a checkpoint every {human_seconds(load.job_interval_s)} "
           "(--job-interval-s)" if load.job_interval_s > 0 else "Daly's interval"),
    ]


def _unslowed_said(profile: SystemProfile) -> str:
    """What an asynchronous flush costs the checkpoints beside it, and whether it is known
    (issue 48: without it the model charges a flush that ends within the compute nothing, and
    ranks flushing every checkpoint first; on the real SCR here every checkpoint's flush ran a
    job 13-22% slower than every 10th's, benchmarks/HISTORY.md)."""
    if "PTHREAD" not in profile.flush_types:
        return "no asynchronous flush: this SCR/AXL build has no PTHREAD transfer"
    rates = profile.scr_rates
    if rates is None:
        return ("a checkpoint beside an asynchronous flush is not slowed (the profile has no "
                "scr_rates.flush_overlap_slowdown; `scrtune calibrate` measures it): a flush "
                "that ends within the compute costs nothing here, so frequent asynchronous "
                "flushes rank above what they run at")
    return (f"a checkpoint beside an asynchronous flush goes "
            f"{1 + rates.flush_overlap_slowdown:.3g}x slower ("
            + (f"{HELD}: frequent asynchronous flushes may rank above what they run at)"
               if rates.held("flush_overlap_slowdown") else "measured through SCR)"))


def _rates_said(rates: ScrRates) -> tuple[str, ...]:
    def rate(name: str, text: str) -> str:
        return text + (f" ({HELD})" if rates.held(name) else "")

    return (f"SCR's own rates ({rates.source or 'scr_rates'}), per node at {rates.nodes} nodes: "
            + rate("flush_bytes_per_s", f"flush {human_rate(rates.flush_bytes_per_s)}")
            + rate("flush_call_s", f" + {rates.flush_call_s * 1e3:.3g} ms per buffer call")
            + rate("encode_bytes_per_s", f", encode {human_rate(rates.encode_bytes_per_s)}")
            + rate("cache_write_bytes_per_s",
                   f", cache writes {human_rate(rates.cache_write_bytes_per_s)}")
            + rate("checkpoint_overhead_s",
                   f" + {rates.checkpoint_overhead_s:.3g} s per checkpoint")
            + rate("app_pfs_write_bytes_per_s",
                   f", bypass writes {human_rate(rates.app_pfs_write_bytes_per_s)}")
            + rate("flush_interference", f", a background flush slows a checkpoint "
                   f"{rates.flush_interference:.0%} a busy transfer thread")
            + rate("flush_overlap_slowdown",
                   f" and {rates.flush_overlap_slowdown:.0%} whatever its threads do")
            + "; they replace the tiers' rates",)
