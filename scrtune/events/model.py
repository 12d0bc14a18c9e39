"""The event model: one columnar batch of trace records, whatever tracer generation wrote them.

Every reader (trace files of any DFTracer generation, the live ZeroMQ intake, the client's own
emitter) produces `EventBatch`es, and the engine consumes nothing else. Columns are numpy
arrays of equal length; strings (event names, categories, file and host keys) are interned
into small per-batch tables so a batch stays compact on the wire.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING

import msgspec
import numpy as np

if TYPE_CHECKING:
    from scrtune.events.digest import IoDigest

UNKNOWN = -1  # value of an integer column the record did not carry (no size, no file, no step)


class Phase(enum.IntEnum):
    """DFTracer 2.x numbering; letter phases of older tracers are mapped onto it."""

    COMPLETE = 1
    COUNTER = 2
    AGGREGATED = 3
    METADATA = 4


class Generation(str, enum.Enum):
    """Which tracer wrote a file: decides how numbers, hashes and names are spelled."""

    DFTRACER_2 = "dftracer-2.x"
    DFTRACER_1_HEX = "dftracer-1.x (hex hashes)"
    DFTRACER_1_INT = "dftracer-1.x (integer hashes)"
    DFTRACER_1_PLAIN = "dftracer-1.x (plain names)"
    DLIO_PROFILER = "dlio-profiler"
    UNKNOWN = "unknown"


class HashDef(msgspec.Struct, frozen=True, array_like=True):
    """A name the tracer announced for a hash: kind is FH (file), HH (host) or SH (string)."""

    kind: str
    key: str
    value: str


class ProcessFact(msgspec.Struct, frozen=True, array_like=True):
    """A per-process metadata value (core affinity, process name, time metric, ...)."""

    host: str
    pid: int
    name: str
    value: str


class InvalidLine(msgspec.Struct, frozen=True, array_like=True):
    """In a batch, `line` counts from 0 within the block it was parsed from; the reader that
    knows where the block starts turns it into the file's line number (from 1)."""

    line: int
    reason: str


# Integer columns of a batch, in wire order. All int64 so a batch concatenates without casts.
COLUMNS: tuple[str, ...] = (
    "ts_us",  # start, microseconds since the epoch
    "dur_us",  # duration; for aggregated records the summed duration of `calls` events
    "pid",
    "tid",
    "phase",  # Phase value
    "layer",  # DFTracer `type` (3 = POSIX/STDIO, 6 = Python, ...); 0 when the tracer has none
    "name",  # index into EventBatch.names
    "cat",  # index into EventBatch.cats
    "file",  # index into EventBatch.files (a hash key or a plain path), UNKNOWN if none
    "host",  # index into EventBatch.hosts, UNKNOWN if none
    "size_bytes",  # bytes moved by a data call (sum for aggregated records), UNKNOWN otherwise
    "calls",  # events the record stands for (1, or dft_cnt of an aggregated record)
    "step",  # `step` argument of a region, UNKNOWN if none
    "epoch",  # `epoch` argument of a region, UNKNOWN if none
)


class EventBatch(msgspec.Struct, kw_only=True):
    """Records of one chunk of one source, as columns; metadata records as small lists."""

    columns: dict[str, np.ndarray]
    names: list[str]
    cats: list[str]
    files: list[str]
    hosts: list[str]
    hash_defs: list[HashDef] = []
    process_facts: list[ProcessFact] = []
    records: int = 0  # valid records of every phase, metadata included
    lines: int = 0  # lines of text the batch was parsed from
    invalid_lines: int = 0
    invalid_samples: list[InvalidLine] = []
    generation: Generation = Generation.UNKNOWN
    # the rows' I/O digest when the parser summed it (events/digest.py); None: from the rows
    digest: IoDigest | None = None

    def __len__(self) -> int:
        return int(self.columns["ts_us"].shape[0])

    def column(self, name: str) -> np.ndarray:
        return self.columns[name]

    @classmethod
    def empty(cls) -> EventBatch:
        return cls(
            columns={name: np.empty(0, dtype=np.int64) for name in COLUMNS},
            names=[],
            cats=[],
            files=[],
            hosts=[],
        )


def concat_batches(first: EventBatch, second: EventBatch) -> EventBatch:
    """Rows of both batches in one, string tables merged; metadata and counts added up.
    When `second` has no rows (a block's hash definitions, the usual case), `first`'s columns
    and tables are reused, not copied."""
    if not len(second):
        return _with_metadata(first, first, second)
    tables = {}
    for field in ("names", "cats", "files", "hosts"):
        merged = list(getattr(first, field))
        index = {value: code for code, value in enumerate(merged)}
        remap = []
        for value in getattr(second, field):
            if value not in index:
                index[value] = len(merged)
                merged.append(value)
            remap.append(index[value])
        tables[field] = (merged, np.array(remap + [UNKNOWN], dtype=np.int64))
    columns = {}
    for name in COLUMNS:
        other = second.columns[name]
        table_field = {"name": "names", "cat": "cats", "file": "files", "host": "hosts"}.get(name)
        if table_field is not None and len(other):
            other = tables[table_field][1][other]
        columns[name] = np.concatenate([first.columns[name], other])
    return _with_metadata(EventBatch(
        columns=columns,
        names=tables["names"][0], cats=tables["cats"][0],
        files=tables["files"][0], hosts=tables["hosts"][0],
    ), first, second)


def _with_metadata(rows: EventBatch, first: EventBatch, second: EventBatch) -> EventBatch:
    """`rows`' columns and tables with both batches' metadata and counts."""
    return EventBatch(
        columns=rows.columns,
        names=rows.names, cats=rows.cats, files=rows.files, hosts=rows.hosts,
        hash_defs=first.hash_defs + second.hash_defs,
        process_facts=first.process_facts + second.process_facts,
        records=first.records + second.records,
        lines=max(first.lines, second.lines),  # both came from the same block
        invalid_lines=first.invalid_lines + second.invalid_lines,
        invalid_samples=first.invalid_samples + second.invalid_samples,
        generation=first.generation if first.generation is not Generation.UNKNOWN
        else second.generation,
    )
