"""The engine's statistics as data: what one file's reading reports, the counts, and the whole
state a Stats serialises to (msgpack, never pickle) for merging across files and MPI ranks."""

from __future__ import annotations

import msgspec

from scrtune.engine.retire import Retired
from scrtune.engine.timeline import TimelineState
from scrtune.events.model import InvalidLine, ProcessFact

STATE_VERSION = 4  # 3: windows carry held sums as rows (engine/held.py); 4: windows as arrays


class SourceReport(msgspec.Struct, kw_only=True):
    """What was read from one trace file."""

    path: str
    generation: str
    records: int = 0
    invalid_lines: int = 0
    invalid_samples: list[InvalidLine] = []
    truncated: bool = False
    warnings: list[str] = []
    fork: bool = False
    commands: list[str] = []  # the command lines (argv joined by `;`) its processes ran


class Counts(msgspec.Struct, kw_only=True):
    records: int = 0
    invalid_lines: int = 0
    complete: int = 0
    counter: int = 0
    aggregated: int = 0
    metadata: int = 0
    io_calls: int = 0
    io_calls_without_args: int = 0
    regions: int = 0
    # rows of processes past Stats.max_processes: in the totals, not in any process's timeline
    untracked_rows: int = 0

    def add(self, other: Counts) -> None:
        for name in self.__struct_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class StatsState(msgspec.Struct, kw_only=True):
    version: int
    counts: Counts
    sources: list[SourceReport]
    hash_names: dict[str, str]
    host_names: dict[str, str]
    ops: dict[str, list[int]]
    file_io: dict[str, list[int]]
    call_costs: dict[str, dict[int, list[int]]]
    regions: dict[str, list[int]]
    compute: list[int]
    threads: list[tuple[str, int, int]]
    span: list[int]
    facts: list[ProcessFact]
    cpu_counters: list[str]
    fork_processes: list[tuple[str, int]]
    names: list[str]
    files: list[str]
    timelines: list[TimelineState]
    aggregated_regions: dict[str, list[int]] = {}  # see engine/aggregated.py
    retired: Retired = msgspec.field(default_factory=Retired)  # see engine/retire.py


_INT64_MAX = (1 << 63) - 1


def saturated(value: object) -> object:
    """`value` (builtins) with every int clamped to int64, as msgpack and the engine take."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return max(-_INT64_MAX - 1, min(value, _INT64_MAX))
    if isinstance(value, list):
        return [saturated(v) for v in value]
    if isinstance(value, dict):
        return {saturated(k): saturated(v) for k, v in value.items()}
    return value
