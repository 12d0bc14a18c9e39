"""EventBatch to bytes and back: msgpack with raw little-endian int64 columns. No pickle.

The same bytes travel from parse workers to the replay process and, later, from the client's
forwarder and emitter to the daemon. `WIRE_VERSION` changes whenever the layout does.
"""

from __future__ import annotations

import msgspec
import numpy as np

from scrtune.errors import ScrtuneError
from scrtune.events.model import (
    COLUMNS,
    UNKNOWN,
    EventBatch,
    Generation,
    HashDef,
    InvalidLine,
    ProcessFact,
)

WIRE_VERSION = 2
_DTYPE = np.dtype("<i8")


class WireBatch(msgspec.Struct, frozen=True, array_like=True, tag="batch"):
    version: int
    rows: int
    columns: list[bytes]
    names: list[str]
    cats: list[str]
    files: list[str]
    hosts: list[str]
    hash_defs: list[HashDef]
    process_facts: list[ProcessFact]
    records: int
    lines: int
    invalid_lines: int
    invalid_samples: list[InvalidLine]
    generation: str


class CodecError(ScrtuneError):
    """Bytes that are not an EventBatch of this wire version."""


_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(WireBatch)


def encode_batch(batch: EventBatch) -> bytes:
    cols = batch.columns
    wire = WireBatch(
        version=WIRE_VERSION,
        rows=len(batch),
        columns=[np.ascontiguousarray(cols[name], dtype=_DTYPE).tobytes() for name in COLUMNS],
        names=batch.names,
        cats=batch.cats,
        files=batch.files,
        hosts=batch.hosts,
        hash_defs=batch.hash_defs,
        process_facts=batch.process_facts,
        records=batch.records,
        lines=batch.lines,
        invalid_lines=batch.invalid_lines,
        invalid_samples=batch.invalid_samples,
        generation=batch.generation.value,
    )
    return _encoder.encode(wire)


def decode_batch(data: bytes) -> EventBatch:
    try:
        wire = _decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError) as exc:
        # msgspec raises UnicodeDecodeError itself for a str holding invalid UTF-8
        raise CodecError(f"not an event batch: {exc}") from None
    if wire.version != WIRE_VERSION:
        raise CodecError(f"event batch wire version {wire.version}, expected {WIRE_VERSION}")
    if len(wire.columns) != len(COLUMNS) or any(len(c) != wire.rows * 8 for c in wire.columns):
        raise CodecError("event batch columns do not match its row count")
    try:
        generation = Generation(wire.generation)
    except ValueError:
        generation = Generation.UNKNOWN
    columns = {n: np.frombuffer(c, dtype=_DTYPE) for n, c in zip(COLUMNS, wire.columns)}
    _check(wire, columns)
    return EventBatch(
        columns=columns,
        names=wire.names,
        cats=wire.cats,
        files=wire.files,
        hosts=wire.hosts,
        hash_defs=wire.hash_defs,
        process_facts=wire.process_facts,
        records=wire.records,
        lines=wire.lines,
        invalid_lines=wire.invalid_lines,
        invalid_samples=wire.invalid_samples,
        generation=generation,
    )


_TABLES = {"name": "names", "cat": "cats", "file": "files", "host": "hosts"}


def _check(wire: WireBatch, columns: dict[str, np.ndarray]) -> None:
    """What the engine indexes with must index: every code within its table (or UNKNOWN),
    times and counts not negative. A batch from another process is not trusted."""
    if min(wire.records, wire.lines, wire.invalid_lines) < 0 or wire.rows > wire.records:
        raise CodecError("event batch counts are negative or fewer than its rows")
    if not wire.rows:
        return
    for column, table in _TABLES.items():
        codes = columns[column]
        if codes.min() < UNKNOWN or codes.max() >= len(getattr(wire, table)):
            raise CodecError(f"event batch {column} codes outside its {table} table")
    for column in ("ts_us", "dur_us", "calls"):
        if columns[column].min() < 0:
            raise CodecError(f"event batch has a negative {column}")
