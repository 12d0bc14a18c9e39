"""Trace lines of every DFTracer generation to `EventBatch`es.

The tracer prints JSON with `%s` and never escapes, so any line may be invalid: such lines are
counted, sampled with their line number, and skipped. Numbers may be JSON strings (DLIO
Profiler era), hashes may be hex strings or unsigned 64-bit integers (dftracer 1.0.8), and
hosts and files may be plain names (before hashing). All of that is normalised here, once.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import msgspec
import numpy as np

from scrtune.events.digest import IoDigest, digest_rows
from scrtune.events.model import (
    UNKNOWN,
    EventBatch,
    Generation,
    HashDef,
    InvalidLine,
    Phase,
    ProcessFact,
    concat_batches,
)
from scrtune.events.reader import Chunk

MAX_INVALID_SAMPLES = 20  # per chunk; the count is always exact
_Num = int | float | str | None


class _Args(msgspec.Struct, gc=False):
    hhash: str | int | None = None
    fhash: str | int | None = None
    hostname: str | None = None
    fname: str | None = None
    ret: _Num = UNKNOWN  # numeric defaults are UNKNOWN so columns convert without a fallback
    size: _Num = None
    step: _Num = UNKNOWN
    epoch: _Num = UNKNOWN
    name: Any = None
    value: Any = None
    dft_cnt: _Num = None
    dur: _Num = None
    dur_sum: _Num = None
    ret_sum: _Num = None


class _Record(msgspec.Struct, gc=False):
    ph: int | str  # every generation writes it: a JSON object without it is no trace record
    name: str = ""
    cat: str = ""
    type: int | str = 0
    pid: _Num = 0
    tid: _Num = 0
    ts: _Num = 0
    dur: _Num = 0
    args: _Args | None = None


_decode = msgspec.json.Decoder(_Record).decode
# what a broken line raises: msgspec reports bytes that are not UTF-8 as UnicodeDecodeError,
# and nesting deeper than it recurses ({"a":{"a":... 1,000 deep) as RecursionError
_UNDECODABLE = (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError, RecursionError)
_NO_ARGS = _Args()
_LETTER_PHASES = {"X": Phase.COMPLETE, "C": Phase.COUNTER, "M": Phase.METADATA}
_TIME_SCALE_TO_US = {"US": 1.0, "NS": 1e-3, "MS": 1e3, "SEC": 1e6, "S": 1e6}

# Calls whose `ret` is a byte count; `fwrite`/`fread` count items of `size` bytes instead.
DATA_WRITE_CALLS = frozenset(
    {"write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev2", "fwrite", "fwrite_unlocked"}
)
DATA_READ_CALLS = frozenset(
    {"read", "pread", "pread64", "readv", "preadv", "preadv2", "fread", "fread_unlocked"}
)
_ITEM_CALLS = frozenset({"fwrite", "fread", "fwrite_unlocked", "fread_unlocked"})


class FileContext(msgspec.Struct, frozen=True):
    """What a parser of a later chunk must know from the start of its file."""

    generation: Generation = Generation.UNKNOWN
    time_metric: str = "US"


class Decoded(msgspec.Struct, gc=False):
    records: list[_Record]
    invalid_lines: int = 0
    invalid_samples: list[InvalidLine] = []


def decode_lines(lines: list[bytes]) -> Decoded:
    """Decode one chunk of lines; invalid ones are counted and sampled, never fatal.

    The fast path decodes the whole chunk in one comprehension; a chunk holding anything else
    (framing brackets, blank or broken lines) takes the slow path, line by line.
    """
    try:
        return Decoded([_decode(line) for line in lines])
    except _UNDECODABLE:
        pass
    records: list[_Record] = []
    invalid = 0
    samples: list[InvalidLine] = []
    for offset, raw in enumerate(lines):
        line = raw.strip()
        if not line or line in (b"[", b"]"):
            continue
        if line.endswith(b","):
            line = line[:-1]
        try:
            records.append(_decode(line))
        except _UNDECODABLE as exc:
            invalid += 1
            if len(samples) < MAX_INVALID_SAMPLES:
                samples.append(InvalidLine(offset, str(exc)[:120]))
    return Decoded(records, invalid, samples)


def detect_generation(records: list[_Record]) -> Generation:
    """Decide the tracer generation from the first records that show it."""
    for record in records[:200]:
        if isinstance(record.ph, int) and record.ph:
            return Generation.DFTRACER_2
        if isinstance(record.ts, str) or isinstance(record.pid, str):
            return Generation.DLIO_PROFILER
        args = record.args
        if args is None:
            continue
        if isinstance(args.hhash, int) or isinstance(args.fhash, int):
            return Generation.DFTRACER_1_INT
        if isinstance(args.hhash, str):
            return Generation.DFTRACER_1_HEX
        if args.hostname is not None:
            return Generation.DFTRACER_1_PLAIN
    return Generation.UNKNOWN


class _Interner:
    """Strings (or hash values) to dense codes; None becomes UNKNOWN."""

    __slots__ = ("values",)

    def __init__(self) -> None:
        self.values: list[str] = []

    def codes(self, keys: list[Any]) -> np.ndarray:
        distinct = list(dict.fromkeys(keys))
        if None in distinct:
            distinct.remove(None)
        lookup: dict[Any, int] = {key: code for code, key in enumerate(distinct)}
        lookup[None] = UNKNOWN
        self.values = [str(k) for k in distinct]
        return np.fromiter(map(lookup.__getitem__, keys), dtype=np.int64, count=len(keys))


def _ints(values: list[Any], default: int = UNKNOWN) -> np.ndarray:
    """Integer column from JSON values that may be ints, floats, numeric strings or missing."""
    try:
        column = np.array(values, dtype=np.int64)
        if column.ndim == 1 and column.shape[0] == len(values):
            return column
    except (TypeError, ValueError, OverflowError):
        pass
    return np.fromiter((_to_int(v, default) for v in values), dtype=np.int64, count=len(values))


_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1


def _to_int(value: Any, default: int) -> int:
    """`default` for what is missing, not a number, or beyond int64 (a broken line's)."""
    if value is None:
        return default
    try:
        number = int(value)
    except (TypeError, ValueError):
        try:
            number = int(float(value))
        except (TypeError, ValueError, OverflowError):
            return default
    return number if _INT64_MIN <= number <= _INT64_MAX else default


def _fit(number: float, default: int) -> int:
    """`number` rounded, or `default` when it is not finite or beyond int64."""
    try:
        rounded = round(number)
    except (OverflowError, ValueError):
        return default
    return rounded if _INT64_MIN <= rounded <= _INT64_MAX else default


def _times(values: list[Any], scale: float) -> np.ndarray:
    if scale == 1.0:
        return _ints(values, 0)
    scaled = np.array([_to_float(v) for v in values], dtype=np.float64) * scale
    scaled[~(np.abs(scaled) < 2.0**63)] = 0.0  # beyond int64, inf or nan: unknown, as missing
    return np.rint(scaled).astype(np.int64)


def _to_float(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return 0.0


def _metadata(
    records: list[_Record], context: FileContext
) -> tuple[list[HashDef], list[ProcessFact], FileContext]:
    hash_defs: list[HashDef] = []
    facts: list[ProcessFact] = []
    for record in records:
        args = record.args
        if args is None or args.name is None:
            continue
        host = "" if args.hhash is None else str(args.hhash)
        if record.name in ("FH", "HH", "SH") and args.value is not None:
            hash_defs.append(HashDef(record.name, str(args.value), str(args.name)))
        elif record.name in ("PR", "CM"):
            value = (
                args.value
                if isinstance(args.value, str)
                else msgspec.json.encode(args.value).decode()
            )
            facts.append(ProcessFact(host, _to_int(record.pid, 0), str(args.name), value))
            if record.name == "CM" and args.name == "time_metric" and isinstance(value, str):
                context = FileContext(context.generation, value.upper())
    return hash_defs, facts, context


def parse_lines(
    lines: list[bytes], context: FileContext
) -> tuple[EventBatch, FileContext]:
    """Parse one chunk of one file; returns the batch and the context for the next chunk."""
    decoded = decode_lines(lines)
    records = decoded.records
    if context.generation is Generation.UNKNOWN:
        context = FileContext(detect_generation(records), context.time_metric)
    phases = [r.ph for r in records]
    if context.generation is Generation.DFTRACER_2:
        meta = [r for r, ph in zip(records, phases) if ph == 4]
        events = [r for r, ph in zip(records, phases) if ph != 4] if meta else records
        event_phases = [ph for ph in phases if ph != 4] if meta else phases
    else:
        phases = [_LETTER_PHASES.get(ph, 0) if isinstance(ph, str) else ph for ph in phases]
        meta = [r for r, ph in zip(records, phases) if ph == Phase.METADATA]
        events = [r for r, ph in zip(records, phases) if ph != Phase.METADATA]
        event_phases = [ph for ph in phases if ph != Phase.METADATA]
    hash_defs, facts, context = _metadata(meta, context)
    events, event_phases, untimed = _timed(events, event_phases)
    batch = _columns(events, event_phases, context, hash_defs)
    batch.hash_defs = hash_defs
    batch.process_facts = facts
    batch.records = len(records) - untimed
    batch.lines = len(lines)
    batch.invalid_lines = decoded.invalid_lines + untimed
    batch.invalid_samples = decoded.invalid_samples
    batch.generation = context.generation
    return batch, context


def _timed(events: list[_Record], phases: list[Any]) -> tuple[list[_Record], list[Any], int]:
    """The events whose `ts` and `dur` are times: numbers (or numeric strings, as DLIO's
    profiler writes them) from 0 to int64's limit. Any other is an invalid line, counted: a
    time read as 0 would stretch the run back to 1970."""
    try:
        if not events or min(np.array([r.ts for r in events], dtype=np.int64).min(),
                             np.array([r.dur for r in events], dtype=np.int64).min()) >= 0:
            return events, phases, 0
    except (TypeError, ValueError, OverflowError):
        pass
    keep = [_is_time(r.ts) and _is_time(r.dur) for r in events]
    kept = [r for r, ok in zip(events, keep) if ok]
    return kept, [ph for ph, ok in zip(phases, keep) if ok], len(events) - len(kept)


def _is_time(value: Any) -> bool:
    if value is None:
        return True  # missing: a record without a duration (a counter, say)
    try:
        number = float(value)
    except (TypeError, ValueError):
        return False
    return 0 <= number < 2.0**63


def _columns(
    events: list[_Record], phases: list[Any], context: FileContext, hash_defs: list[HashDef]
) -> EventBatch:
    count = len(events)
    if not count:  # a block's metadata lines only (hash definitions): no columns to build
        return EventBatch.empty()
    scale = _TIME_SCALE_TO_US.get(context.time_metric, 1.0)
    names, cats, files = _Interner(), _Interner(), _Interner()
    args = [r.args or _NO_ARGS for r in events]
    plain = context.generation in (Generation.DLIO_PROFILER, Generation.DFTRACER_1_PLAIN)
    file_keys = [a.fname for a in args] if plain else [a.fhash for a in args]
    if plain:  # plain names are their own keys: announce them like hashed generations do
        hash_defs.extend(HashDef("FH", k, k) for k in set(file_keys) if k is not None)
    host = _batch_host(args, plain)
    if host is not None and plain:
        hash_defs.append(HashDef("HH", host, host))
    columns = {
        "ts_us": _times([r.ts for r in events], scale),
        "dur_us": _times([r.dur for r in events], scale),
        "pid": _ints([r.pid for r in events], 0),
        "tid": _ints([r.tid for r in events], 0),
        "phase": _ints(phases, 0),
        "layer": _ints([r.type for r in events], 0),
        "name": names.codes([r.name for r in events]),
        "cat": cats.codes([r.cat for r in events]),
        "file": files.codes(file_keys),
        "host": np.full(count, UNKNOWN if host is None else 0, dtype=np.int64),
        "size_bytes": _ints([a.ret for a in args]),
        "calls": np.ones(count, dtype=np.int64),
        "step": np.full(count, UNKNOWN, dtype=np.int64),
        "epoch": np.full(count, UNKNOWN, dtype=np.int64),
    }
    _region_args(columns, cats.values, args)
    batch = EventBatch(
        columns=columns,
        names=names.values,
        cats=cats.values,
        files=files.values,
        hosts=[] if host is None else [host],
    )
    _byte_counts(batch, args)
    if int(Phase.AGGREGATED) in batch.columns["phase"]:
        _aggregated(batch, args, scale)
    return batch


def _batch_host(args: list[_Args], plain: bool) -> str | None:
    """A trace file, like a ZeroMQ buffer, is written by one process on one host."""
    for arg in args:
        key = arg.hostname if plain else arg.hhash
        if key is not None:
            return str(key)
    return None


def _region_args(columns: dict[str, np.ndarray], cats: list[str], args: list[_Args]) -> None:
    """`step` and `epoch` only matter on regions, which are few: read them there only."""
    io_cat = np.array([c.upper() in ("POSIX", "STDIO") for c in cats] + [False])
    regions = np.flatnonzero((columns["layer"] != 3) & ~io_cat[columns["cat"]])
    if len(regions):
        picked = [args[i] for i in regions.tolist()]
        columns["step"][regions] = _ints([a.step for a in picked])
        columns["epoch"][regions] = _ints([a.epoch for a in picked])


def _byte_counts(batch: EventBatch, args: list[_Args]) -> None:
    """`ret` is a byte count only for data calls; stdio item calls move `size * ret` bytes."""
    is_data = np.array(
        [n in DATA_WRITE_CALLS or n in DATA_READ_CALLS for n in batch.names], dtype=bool
    )
    is_item = np.array([n in _ITEM_CALLS for n in batch.names], dtype=bool)
    codes = batch.columns["name"]
    ret = batch.columns["size_bytes"]
    data_rows = is_data[codes] if len(is_data) else np.zeros(len(codes), dtype=bool)
    size = ret.copy()  # the C parser applies the same rule as it scans (moved_bytes)
    size[~data_rows] = UNKNOWN
    size[data_rows & (ret < 0) & (ret != UNKNOWN)] = 0  # a failed call moved nothing
    if len(is_item) and is_item.any():
        for i in np.flatnonzero(is_item[codes]):
            item = _to_int(args[i].size, 1)
            if size[i] > 0:
                size[i] = _fit(int(size[i]) * max(item, 1), UNKNOWN)
    batch.columns["size_bytes"] = size


def _aggregated(batch: EventBatch, args: list[_Args], scale: float) -> None:
    """`ph:3` records stand for `dft_cnt` calls; constant values are printed once, not summed."""
    cols = batch.columns
    is_data = {
        i for i, n in enumerate(batch.names) if n in DATA_WRITE_CALLS or n in DATA_READ_CALLS
    }
    for i in np.flatnonzero(cols["phase"] == Phase.AGGREGATED):
        arg = args[i]
        calls = max(_to_int(arg.dft_cnt, 1), 1)
        cols["calls"][i] = calls
        if arg.dur_sum is not None:
            cols["dur_us"][i] = _fit(_to_float(arg.dur_sum) * scale, 0)
        elif arg.dur is not None:
            cols["dur_us"][i] = _fit(_to_float(arg.dur) * scale * calls, 0)
        if int(cols["name"][i]) in is_data:
            moved = _to_int(arg.ret_sum, UNKNOWN)
            if moved == UNKNOWN and arg.ret not in (None, UNKNOWN):
                moved = _fit(_to_int(arg.ret, 0) * calls, UNKNOWN)
            cols["size_bytes"][i] = moved


try:  # the optional C fast path (see _fastparse.c); the pure-Python parser is the reference
    from scrtune.events import _fastparse

    _fastparse.set_data_calls(sorted(DATA_WRITE_CALLS | DATA_READ_CALLS))  # see _byte_counts
except ImportError:  # pragma: no cover - built wherever a C compiler was available
    _fastparse = None

# SCRTUNE_PURE_PYTHON=1 turns the C path off (to compare, or to rule it out of a problem).
FAST_PATH = _fastparse is not None and os.environ.get("SCRTUNE_PURE_PYTHON", "") != "1"


def uses_fast_path(context: FileContext, fast: bool | None = None) -> bool:
    """Whether chunks of a file with this context go through the C parser."""
    fast = FAST_PATH if fast is None else fast
    return (fast and _fastparse is not None and context.generation is Generation.DFTRACER_2
            and context.time_metric == "US")


def parse_block(data: bytes | Chunk, context: FileContext, fast: bool | None = None
                ) -> tuple[EventBatch, FileContext]:
    """Parse a block of whole lines (bytes, or a Chunk as iter_chunks yields them). Complete
    2.x events in microseconds take the C path; every other line takes the Python path."""
    return parse_buffers(data.parts() if isinstance(data, Chunk) else (data,), context, fast)


def parse_buffers(buffers: Sequence[bytes | memoryview], context: FileContext,
                  fast: bool | None = None) -> tuple[EventBatch, FileContext]:
    """The lines of each buffer in turn, as if the buffers were joined by a newline. The C
    path reads them where they are; only the Python path joins them."""
    if not uses_fast_path(context, fast):
        return parse_lines(b"\n".join(buffers).split(b"\n"), context)
    rows, lines, columns, names, cats, files, hosts, fallback, digest = \
        _fastparse.parse(*buffers)
    batch = EventBatch(
        columns={k: np.frombuffer(v, dtype=np.int64) for k, v in columns.items()},
        names=names, cats=cats, files=files, hosts=hosts, records=rows, lines=lines,
        generation=context.generation, digest=IoDigest.from_parser(digest),
    )
    if not fallback:
        return batch, context
    slow, context = parse_lines([text for _, text in fallback], context)
    slow.invalid_samples = [InvalidLine(fallback[s.line][0], s.reason)
                            for s in slow.invalid_samples]
    joined = concat_batches(batch, slow)
    joined.digest = batch.digest.plus(digest_rows(joined.columns, start=len(batch))) \
        if len(slow) else batch.digest
    return joined, context
