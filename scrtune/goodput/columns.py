"""A goodput log as columns, in chunks that go to a temporary file once they outgrow memory, so
that a log of any length is read and measured in memory flat in its events.

`EventLog` holds what was read, in log order (`RAW` records, with string tables for job and
name); `time_ordered` streams one job's events in time order (`TIMED` records), a chunk never
ending inside a run of equal times, which is what lets the calculator take chunk by chunk.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from scrtune.goodput.events import ORDER, Event, Kind

KIND_LIST = list(Kind)
CODE = {kind: code for code, kind in enumerate(KIND_LIST)}
RANK = np.array([ORDER[kind] for kind in KIND_LIST], dtype=np.int8)  # time-order ties
STEP_STARTED_CODE, STEP_FINISHED_CODE = (KIND_LIST.index(Kind.STEP_STARTED),
                                         KIND_LIST.index(Kind.STEP_FINISHED))
RAW = np.dtype([("wall", "f8"), ("step", "i8"), ("run", "i8"), ("kind", "i1"), ("job", "i4"),
                ("name", "i4")])
TIMED = np.dtype([("wall", "f8"), ("step", "i8"), ("kind", "i1"), ("name", "i4")])
MEMORY_BYTES = 16 << 20  # a Spill's records stay in memory up to this, then go to a file
CHUNK_ROWS = 1 << 18


class Spill:
    """Record chunks, appended and read back in order: in memory while small, then in an
    anonymous temporary file (deleted when closed or collected)."""

    def __init__(self, dtype: np.dtype, memory_bytes: int | None = None) -> None:
        self.dtype = dtype
        self.rows = 0
        self._memory_bytes = MEMORY_BYTES if memory_bytes is None else memory_bytes
        self._chunks: list[np.ndarray] = []
        self._sizes: list[int] = []  # each chunk's rows, once in the file
        self._file = None

    def append(self, records: np.ndarray) -> None:
        if not len(records):
            return
        self.rows += len(records)
        if self._file is None:
            self._chunks.append(records)
            if self.rows * self.dtype.itemsize > self._memory_bytes:
                self._file = tempfile.TemporaryFile(prefix="scrtune-goodput-")
                for chunk in self._chunks:
                    self._write(chunk)
                self._chunks = []
        else:
            self._write(records)

    def _write(self, records: np.ndarray) -> None:
        self._file.write(np.ascontiguousarray(records, dtype=self.dtype).tobytes())
        self._sizes.append(len(records))

    def chunks(self) -> Iterator[np.ndarray]:
        """The chunks as appended (their boundaries kept: `time_ordered` relies on them)."""
        if self._file is None:
            yield from self._chunks
            return
        self._file.flush()
        self._file.seek(0)
        for size in self._sizes:
            yield np.fromfile(self._file, dtype=self.dtype, count=size)

    @property
    def on_disk(self) -> bool:
        return self._file is not None

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
        self._chunks = []


@dataclass
class Strings:
    """A string table: each distinct string once, records hold its index."""

    values: list[str] = field(default_factory=list)
    codes: dict[str, int] = field(default_factory=dict)

    def code(self, text: str) -> int:
        found = self.codes.get(text)
        if found is None:
            found = self.codes[text] = len(self.values)
            self.values.append(text)
        return found


@dataclass
class _Span:
    first_s: float
    last_s: float
    events: int


class EventLog:
    """Events in log order, as columns; which job's are measured is `select`ed."""

    def __init__(self) -> None:
        self.raw = Spill(RAW)
        self.jobs = Strings()
        self.names = Strings()
        self.spans: dict[tuple[int, int], _Span] = {}  # (job code, run) -> its times
        self._labels: dict[str, tuple[int, int | None]] | None = None
        self.selected: tuple[int, int | None] | None = None  # (job code, run or all)

    @classmethod
    def of(cls, events: list[Event]) -> EventLog:
        log = cls()
        log.add(events)
        return log

    def add(self, events: list[Event]) -> None:
        if not events:
            return
        records = np.empty(len(events), dtype=RAW)
        records["wall"] = [event.wall_s for event in events]
        records["step"] = [event.step for event in events]
        records["run"] = [event.run for event in events]
        records["kind"] = [CODE[event.kind] for event in events]
        code = self.jobs.code
        records["job"] = [code(event.job) for event in events]
        code = self.names.code
        records["name"] = [code(event.name) for event in events]
        self._spans(records)
        self.raw.append(records)
        self._labels = None

    def _spans(self, records: np.ndarray) -> None:
        pairs = np.column_stack([records["job"].astype(np.int64), records["run"]])
        keys, inverse = np.unique(pairs, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        firsts = np.full(len(keys), np.inf)
        lasts = np.full(len(keys), -np.inf)
        np.minimum.at(firsts, inverse, records["wall"])
        np.maximum.at(lasts, inverse, records["wall"])
        counts = np.bincount(inverse, minlength=len(keys))
        for (job, run), first, last, count in zip(keys.tolist(), firsts.tolist(),
                                                  lasts.tolist(), counts.tolist()):
            span = self.spans.get((job, run))
            if span is None:
                self.spans[(job, run)] = _Span(first, last, count)
            else:
                span.first_s, span.last_s = min(span.first_s, first), max(span.last_s, last)
                span.events += count

    def labels(self) -> dict[str, tuple[int, int | None]]:
        """Each job's name -> (job code, run or None for all its runs). Two jobs under one name
        are two jobs: where runs of one job name overlap in time, each is its own job, named
        `NAME [run ID]`; runs one after another stay one job: those are its restarts."""
        if self._labels is None:
            runs: dict[int, list[tuple[float, float, int]]] = {}
            for (job, run), span in self.spans.items():
                runs.setdefault(job, []).append((span.first_s, span.last_s, run))
            self._labels = {}
            for job, spans in runs.items():
                spans.sort()
                name = self.jobs.values[job]
                if any(b[0] < a[1] for a, b in zip(spans, spans[1:])):
                    self._labels.update({f"{name} [run {run}]": (job, run)
                                         for _, _, run in spans})
                else:
                    self._labels[name] = (job, None)
        return self._labels

    def select(self, label: str | None) -> None:
        """Measure the job of this name (None: every event, as one job)."""
        self.selected = None if label is None else self.labels().get(label, (-1, None))

    def selected_events(self) -> int:
        return sum(span.events for key, span in self.spans.items() if self._chosen(*key))

    def _chosen(self, job: int, run: int) -> bool:
        if self.selected is None:
            return True
        return job == self.selected[0] and self.selected[1] in (None, run)

    def mask(self, records: np.ndarray) -> np.ndarray | None:
        """Which of these records the selection takes (None: all)."""
        if self.selected is None:
            return None
        job, run = self.selected
        taken = records["job"] == job
        return taken if run is None else taken & (records["run"] == run)

    def events(self) -> list[Event]:
        """The selected events as objects, in log order (for small logs and tests)."""
        renamed = {key: label for label, key in self.labels().items()}
        out = []
        for records in self.raw.chunks():
            taken = self.mask(records)
            if taken is not None:
                records = records[taken]
            for wall, step, run, kind, job, name in records.tolist():
                label = renamed[(job, run)] if (job, run) in renamed else renamed[(job, None)]
                out.append(Event(kind=KIND_LIST[kind], wall_s=wall, step=step, job=label,
                                 run=run, name=self.names.values[name]))
        return out

    def close(self) -> None:
        self.raw.close()


@dataclass
class Clock:
    """What the selected events' own clock said, in log order."""

    backwards: int = 0
    first_back: tuple[float, float] | None = None
    last_s: float = -np.inf


def time_ordered(log: EventLog, rows: int | None = None) -> tuple[Spill, Clock]:
    """The selected events by time, an end before a start at equal times (events.ORDER), the
    log's own order kept among equals, as TIMED chunks none of which ends inside a run of equal
    times. A log in time order (as logs mostly are) streams through; one that is not is sorted
    in memory (its columns, not objects)."""
    out, clock = Spill(TIMED), Clock()
    rows = rows or CHUNK_ROWS
    carry = np.empty(0, dtype=TIMED)  # the records at the latest time, until a later one
    emitted_s = -np.inf
    previous_s, in_order = None, True
    for records in _rows(log, rows):
        walls = records["wall"]
        previous_s = _clock(walls, previous_s, clock)
        in_order = in_order and walls.min() > emitted_s
        if not in_order:  # the clock is still read to the end; then all is sorted
            continue
        merged = np.concatenate([carry, _timed(records)])
        merged = merged[_time_order(merged)]
        cut = int(np.searchsorted(merged["wall"], merged["wall"][-1], side="left"))
        if cut:
            out.append(merged[:cut])
            emitted_s = float(merged["wall"][cut - 1])
        carry = merged[cut:]
    if not in_order:
        out.close()
        return _sorted(log, rows), clock
    out.append(carry)
    return out, clock


def _time_order(records: np.ndarray) -> np.ndarray:
    """Indices by time, then events.ORDER, then (for steps) progress: at one time a step's
    finish comes before the next step's start (the usual way a loop logs them), a step's
    start before its own finish (a step of no length); the log's order kept among equals."""
    kinds, steps = records["kind"], records["step"].astype(np.int64)
    started = kinds == STEP_STARTED_CODE
    rank = np.where(started, RANK[STEP_FINISHED_CODE], RANK[kinds])
    progress = np.where(started | (kinds == STEP_FINISHED_CODE), 2 * steps - started, 0)
    return np.lexsort((progress, rank, records["wall"]))  # stable


def _rows(log: EventLog, rows: int) -> Iterator[np.ndarray]:
    for records in log.raw.chunks():
        taken = log.mask(records)
        if taken is not None:
            records = records[taken]
        for at in range(0, len(records), rows):
            yield records[at:at + rows]


def _timed(records: np.ndarray) -> np.ndarray:
    out = np.empty(len(records), dtype=TIMED)
    for name in TIMED.names:
        out[name] = records[name]
    return out


def _clock(walls: np.ndarray, previous_s: float | None, clock: Clock) -> float:
    joined = walls if previous_s is None else np.concatenate([[previous_s], walls])
    back = np.flatnonzero(joined[1:] < joined[:-1] - 1e-6)
    if len(back) and clock.first_back is None:
        clock.first_back = (float(joined[back[0]]), float(joined[back[0] + 1]))
    clock.backwards += len(back)
    clock.last_s = max(clock.last_s, float(walls.max()))
    return float(walls[-1])


def _sorted(log: EventLog, rows: int) -> Spill:
    records = np.concatenate([_timed(chunk) for chunk in _rows(log, rows)])
    records = records[_time_order(records)]
    out = Spill(TIMED)
    walls = records["wall"]
    at = 0
    while at < len(records):  # chunks of about `rows`, each ending where the time changes
        end = min(at + rows, len(records))
        if end < len(records):
            end = int(np.searchsorted(walls, walls[end - 1], side="right"))
        out.append(records[at:end])
        at = end
    return out
