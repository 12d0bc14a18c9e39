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
from scrtune.goodput.events import Event, kind_of
from scrtune.goodput.store import Store


@dataclass
class Loaded:
    events: list[Event] = field(default_factory=list)
    bad_lines: list[str] = field(default_factory=list)  # "file:line: why"
    jobs: set[str] = field(default_factory=set)
    warnings: list[str] = field(default_factory=list)  # what reading had to assume


def read_jsonl(path: str, job: str | None = None) -> Loaded:
    loaded = Loaded()
    try:
        handle = open(path, encoding="utf-8", errors="replace")
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None
    local = LocalTimes()
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                event = _event(json.loads(line), local)
            except (ValueError, TypeError, KeyError, OverflowError) as exc:
                loaded.bad_lines.append(f"{path}:{number}: {exc}")
                continue
            if local.folded == 1 and local.folded_line == 0:
                local.folded_line = number
            loaded.events.append(event)
    if local.folded:
        loaded.warnings.append(
            f"{path}:{local.folded_line}: naive local times went back within a daylight-saving "
            f"fall-back hour: that line and {local.folded - 1} more in the repeated hour were "
            "read as its second pass (log times with a UTC offset to be sure)")
    return _selected(loaded, job)


class LocalTimes:
    """Naive local timestamps (the resiliency logger's), read in log order. In a
    daylight-saving fall-back the clock shows the same hour twice: once the log's times go
    back within such an hour, they are the second pass, an hour later in real time."""

    def __init__(self) -> None:
        self._last: dt.datetime | None = None
        self._second_pass = False
        self.folded = 0  # times read as the second pass
        self.folded_line = 0

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
    return Event(kind=kind, wall_s=wall, step=-1 if step in (None, "") else _whole(step, "step"),
                 job=str(record.get("job") or record.get("job_name") or ""),
                 run=_whole(record.get("run", 0) or 0, "run"),
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
        for stored in store.events():
            kind = kind_of(stored.kind)
            if kind is None:
                loaded.bad_lines.append(f"{path}: unknown event {stored.kind!r}")
                continue
            loaded.events.append(Event(kind=kind, wall_s=stored.wall_s, step=stored.step,
                                       job=stored.job, run=stored.run))
        return _selected(loaded, job)
    finally:
        store.close()


def _selected(loaded: Loaded, job: str | None) -> Loaded:
    """Concurrent runs told apart (separate_concurrent), then the events of `job` only."""
    events = separate_concurrent(loaded.events)
    loaded.jobs = {event.job for event in events}
    loaded.events = [event for event in events if job is None or event.job == job]
    return loaded


def separate_concurrent(events: list[Event]) -> list[Event]:
    """Two jobs under one name are two jobs: where runs (told apart by their run ids, see
    TunedSCR) of one job name overlap in time, each is its own job, named `NAME [run ID]`.
    Runs one after another stay one job: those are its restarts."""
    spans: dict[str, dict[int, list[float]]] = {}
    for event in events:
        span = spans.setdefault(event.job, {}).setdefault(event.run, [event.wall_s] * 2)
        span[0], span[1] = min(span[0], event.wall_s), max(span[1], event.wall_s)
    concurrent = {job for job, runs in spans.items() if _overlap(list(runs.values()))}
    return [msgspec.structs.replace(event, job=f"{event.job} [run {event.run}]")
            if event.job in concurrent else event for event in events]


def _overlap(spans: list[list[float]]) -> bool:
    spans = sorted(spans)
    return any(later[0] < earlier[1] for earlier, later in zip(spans, spans[1:]))
