"""A tuning study: every configuration of a grid, at every planned node count, predicted from
the traces (the model in model.py, calibrated by calibrate.py), ranked, with the Pareto front
(blocking vs flush time) and the node count from which caching beats bypass."""

from __future__ import annotations

import itertools
import sys
from typing import Annotated, Literal

import msgspec

from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.study.calibrate import TierCost
from scrtune.study.model import DEFAULT_LATENCY_S, MIB, Config, Prediction, machine, predict
from scrtune.units import human_rate, plural

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
    crossover_nodes: int | None
    assumptions: list[str]


def default_grid(load: WorkloadStats) -> list[Config]:
    dominant = max((m.size_bytes for m in load.write_modes), default=32 * MIB)
    buffers = sorted({32 * MIB, max(MIB, -(-dominant // MIB) * MIB)})
    grid = [Config(bypass=True)]
    for copy, buf, (flush_async, idle), every in itertools.product(
            ("SINGLE", "XOR"), buffers, ((False, False), (True, False), (True, True)), (1, 4)):
        grid.append(Config(bypass=False, copy_type=copy, file_buf_bytes=buf,
                           flush_async=flush_async, threads_on_idle_cores=idle,
                           flush_every=every))
    return grid


class _Grid(msgspec.Struct, forbid_unknown_fields=True):
    """A grid file: a list of values per Config field (a field left out keeps its default)."""

    copy_type: list[Literal["SINGLE", "PARTNER", "XOR", "RS"]] = \
        msgspec.field(default_factory=lambda: [Config().copy_type])
    bypass: list[bool] = msgspec.field(default_factory=lambda: [Config().bypass])
    file_buf_bytes: list[Annotated[int, msgspec.Meta(gt=0)]] = \
        msgspec.field(default_factory=lambda: [Config().file_buf_bytes])
    flush_async: list[bool] = msgspec.field(default_factory=lambda: [Config().flush_async])
    threads_on_idle_cores: list[bool] = \
        msgspec.field(default_factory=lambda: [Config().threads_on_idle_cores])
    flush_every: list[Annotated[int, msgspec.Meta(ge=1)]] = \
        msgspec.field(default_factory=lambda: [Config().flush_every])


def grid_from_toml(path: str) -> list[Config]:
    """TOML lists per field, e.g. copy_type = ["SINGLE", "XOR"], file_buf_bytes = [33554432];
    every combination is a configuration (bypass = [true] gives the bypass one). Raises
    OSError, or ValueError naming the file and the field."""
    try:
        with open(path, "rb") as handle:
            grid = msgspec.convert(tomllib.load(handle), _Grid)
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: not UTF-8 at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML: {exc}") from None
    except msgspec.ValidationError as exc:
        raise ValueError(f"{path}: {exc}") from None
    fields = Config.__struct_fields__
    values = [getattr(grid, f) for f in fields]
    return sorted({Config(**dict(zip(fields, combo))) for combo in itertools.product(*values)},
                  key=lambda c: c.label())


def run(load: WorkloadStats, profile: SystemProfile, costs: list[TierCost], nodes: list[int],
        grid: list[Config], metadata_call_s: float | None = None) -> Study:
    box = machine(profile, costs, metadata_call_s or DEFAULT_LATENCY_S)
    per_node = profile.ranks_per_node or max(1, -(-load.ranks // max(load.hosts, 1)))
    rows = [(c, [predict(load, box, c, n, per_node) for n in nodes]) for c in grid]
    fronts = {n: _pareto([(c, p[i]) for c, p in rows]) for i, n in enumerate(nodes)}
    ranked = sorted(rows, key=lambda r: -r[1][-1].goodput)
    return Study(
        nodes=nodes, ranks_per_node=per_node, calibration=costs,
        rows=[Row(config=c, label=c.label(), predictions=p,
                  pareto_nodes=[n for n in nodes if c in fronts[n]]) for c, p in ranked],
        crossover_nodes=_crossover(load, box, grid, per_node),
        assumptions=_assumptions(profile, costs) + [
            f"SCR's metadata calls cost {box.metadata_call_s * 1e6:.1f} us each ("
            + ("the mean of the trace's open, stat, access and close calls)"
               if metadata_call_s else "assumed: the trace has none)")])


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


def _assumptions(profile: SystemProfile, costs: list[TierCost]) -> list[str]:
    fitted = ", ".join(f"{c.tier} {c.direction}: {c.latency_s * 1e6:.1f} us + size / "
                       f"{human_rate(c.bytes_per_s)} ({plural(c.sizes, 'size')})" for c in costs)
    return [
        f"system profile: {profile.source}",
        "per-call costs fitted from the trace: " + (fitted or "none (the trace touched no "
                                                   "profiled tier): profile bandwidths used"),
        "a rank's bandwidth is its share of the tier's aggregate at n nodes, scaled per doubling "
        "as the profile says, capped by one stream's rate in the trace",
        "SCR adds 6 metadata calls per file; transfer threads bound to a computing rank's core "
        "run 10x slower (the hand-made study's observation)",
        "failures are exponential with the profile's node MTBF; goodput at Daly's interval",
    ]
