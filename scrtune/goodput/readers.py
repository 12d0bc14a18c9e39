"""Goodput events from where jobs record them.

- scrtune's own JSON lines: `{"kind": "step_finished", "wall_s": 1732200000.5, "step": 10,
  "job": "llama", "run": 0, "name": ""}` (`kind` as in goodput.events.Kind; `wall_s` epoch
  seconds, or `time` as an ISO 8601 string);
- the resiliency library's JSON lines (`timestamp`, `job_name`, `event_type` job_started |
  job_terminated | checkpoint_loaded | checkpoint_saved, `step`), as in its goodput primer;
- the daemon's SQLite store (what TunedSCR and clients recorded).
Bad lines are counted and named, never fatal.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field

import msgspec

from scrtune.errors import UsageError
from scrtune.goodput.columns import EventLog
from scrtune.goodput.events import KINDS, Event, kind_of
from scrtune.goodput.store import Store


@dataclass
class Loaded:
    log: EventLog = field(default_factory=EventLog)  # columns, flat in memory: see columns.py
    bad_lines: list[str] = field(default_factory=list)  # "file:line: why"
    warnings: list[str] = field(default_factory=list)  # what reading had to assume

    @property
    def jobs(self) -> set[str]:
        """The jobs read, concurrent runs of one name told apart (EventLog.labels)."""
        return set(self.log.labels())

    @property
    def events(self) -> list[Event]:
        """The selected job's events as objects (for small logs: a long one is measured from
        `log` directly)."""
        return self.log.events()


class _Line(msgspec.Struct):
    """The usual shape of a line, decoded in batches; anything else (a null, a number as a
    string, an unknown shape) fails the batch and is read line by line as before."""

    kind: str = ""
    event_type: str = ""
    wall_s: float | msgspec.UnsetType = msgspec.UNSET
    time: str = ""
    timestamp: str = ""
    step: int = -1
    job: str = ""
    job_name: str = ""
    run: int = 0
    name: str = ""


_BATCH = msgspec.json.Decoder(list[_Line])
_LINE = msgspec.json.Decoder(_Line)
CHUNK_BYTES = 1 << 22
MAX_STEP = 1 << 53  # steps are counted in floating point beyond this
MAX_RUN = (1 << 63) - 1  # run ids are 64-bit, as in the store


def read_jsonl(path: str, job: str | None = None) -> Loaded:
    """Events from JSON lines, in chunks of about 4 MiB: memory holds one chunk's text."""
    loaded = Loaded()
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    local = LocalTimes()
    number = 0
    with handle:
        while chunk := handle.readlines(CHUNK_BYTES):
            loaded.log.add(_read_chunk(chunk, number, path, local, loaded))
            number += len(chunk)
    loaded.warnings += local.warnings(path)
    return _selected(loaded, job)


def _read_chunk(chunk: list[bytes], before: int, path: str, local: LocalTimes,
                loaded: Loaded) -> list[Event]:
    numbered = [(before + index, line) for index, line in enumerate(chunk, start=1)
                if line.strip()]
    try:  # one decode for the whole chunk: the usual case
        lines = _BATCH.decode(b"[" + b",".join(line for _, line in numbered) + b"]")
    except (msgspec.DecodeError, UnicodeDecodeError):
        lines = None
    events: list[Event] = []
    for index, (number, text) in enumerate(numbered):
        try:
            line = lines[index] if lines is not None else _one(text)
            event = _fast(line, local) if line is not None else None
            if event is None:  # what the fast path does not take, the slow path judges
                event = _event(json.loads(text.decode("utf-8", "replace")), local)
        except (ValueError, TypeError, KeyError, OverflowError) as exc:
            loaded.bad_lines.append(f"{path}:{number}: {exc}")
            continue
        if local.folded and not local.folded_line:
            local.folded_line = number
        events.append(event)
    return events


def _one(text: bytes) -> _Line | None:
    try:
        return _LINE.decode(text)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return None


def _fast(line: _Line, local: LocalTimes) -> Event | None:
    """The event of a well-typed line, or None to judge it on the slow path (and name why)."""
    kind = KINDS.get(line.kind or line.event_type)
    if kind is None:
        return None
    if line.wall_s is not msgspec.UNSET:
        wall = line.wall_s
        if not (0 <= wall < math.inf):
            return None
    elif line.time or line.timestamp:
        wall = _seconds(line.time or line.timestamp, local)
        if wall < 0:
            return None
    else:
        return None
    if abs(line.step) > MAX_STEP or abs(line.run) > MAX_RUN:
        return None
    return Event(kind=kind, wall_s=float(wall), step=line.step, job=line.job or line.job_name,
                 run=line.run, name=line.name)


class LocalTimes:
    """Naive local timestamps (the resiliency logger's), read in log order. In a
    daylight-saving fall-back the clock shows the same hour twice: once the log's times go
    back within such an hour, they are the second pass, an hour later in real time."""

    def __init__(self) -> None:
        self._last: dt.datetime | None = None
        self._second_pass = False
        self.folded = 0  # times read as the second pass
        self.folded_line = 0

    def warnings(self, path: str) -> list[str]:
        if not self.folded:
            return []
        return [f"{path}:{self.folded_line}: naive local times went back within a "
                f"daylight-saving fall-back hour: that line and {self.folded - 1} more in the "
                "repeated hour were read as its second pass (log times with a UTC offset to be "
                "sure)"]

    def seconds(self, moment: dt.datetime) -> float:
        first = moment.replace(fold=0).astimezone().timestamp()
        second = moment.replace(fold=1).astimezone().timestamp()
        if first == second:  # not in a repeated hour
            self._second_pass = False
        elif self._last is not None and moment < self._last:
            self._second_pass = True
        self._last = moment
        if first != second and self._second_pass:
            self.folded += 1
            return second
        return first


def _event(record: dict, local: LocalTimes | None = None) -> Event:
    if not isinstance(record, dict):
        raise TypeError("not a JSON object")
    text = record.get("kind") or record.get("event_type")
    kind = kind_of(str(text)) if text is not None else None
    if kind is None:
        raise ValueError(f"unknown event {text!r}")
    if "wall_s" in record:
        wall = _number(record["wall_s"], "wall_s")
    elif "time" in record or "timestamp" in record:
        wall = _seconds(str(record.get("time") or record.get("timestamp")), local)
    else:
        raise KeyError("no wall_s, time or timestamp")
    if wall < 0:
        raise ValueError("a time before 1970")
    step = record.get("step")
    step = -1 if step in (None, "") else _whole(step, "step")
    if abs(step) > MAX_STEP:
        raise ValueError(f"step {step} is beyond {MAX_STEP:,}")
    run = _whole(record.get("run", 0) or 0, "run")
    if abs(run) > MAX_RUN:
        raise ValueError(f"run {run} is not a 64-bit id")
    return Event(kind=kind, wall_s=wall, step=step,
                 job=str(record.get("job") or record.get("job_name") or ""),
                 run=run,
                 name=str(record.get("name", "") or ""))


def _number(value: object, name: str) -> float:
    """A finite number (JSON numbers, or numeric strings); json.loads also reads NaN and
    Infinity, which no clock shows."""
    if type(value) is float and math.isfinite(value) or type(value) is int:  # the usual
        return float(value)
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{name} is not a number: {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} is not a finite number: {value!r}")
    return number


def _whole(value: object, name: str) -> int:
    if type(value) is int:  # the usual
        return value
    number = _number(value, name)
    if number != int(number):
        raise ValueError(f"{name} is not a whole number: {value!r}")
    return int(number)


def _seconds(text: str, local: LocalTimes | None = None) -> float:
    moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:  # the resiliency logger writes naive local times
        return (local or LocalTimes()).seconds(moment)
    return moment.timestamp()


def read_store(path: str, job: str | None = None) -> Loaded:
    store = Store(path, read_only=True)
    try:
        loaded = Loaded()
        for batch in store.event_batches():
            events = []
            for stored in batch:
                kind = kind_of(stored.kind)
                if kind is None or abs(stored.step) > MAX_STEP or abs(stored.run) > MAX_RUN:
                    loaded.bad_lines.append(f"{path}: unknown event {stored.kind!r}"
                                            if kind is None else f"{path}: step {stored.step} "
                                            f"or run {stored.run} out of range")
                    continue
                events.append(Event(kind=kind, wall_s=stored.wall_s, step=stored.step,
                                    job=stored.job, run=stored.run))
            loaded.log.add(events)
        return _selected(loaded, job)
    finally:
        store.close()


def _selected(loaded: Loaded, job: str | None) -> Loaded:
    """The events of `job` only (concurrent runs of one name are jobs of their own)."""
    loaded.log.select(job)
    return loaded
