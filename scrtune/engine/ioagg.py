"""I/O rows of one process and their aggregate over a time window.

`Rows` are the POSIX/STDIO calls of one process that still wait for a checkpoint region to
claim them (columns, global string ids). `IoAgg` is what a window keeps of its calls: bytes,
calls per operation, bytes per file and the write-size histogram; two aggregates add exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

import msgspec
import numpy as np

ROW_FIELDS = ("ts_us", "end_us", "dur_us", "name", "file", "size_bytes", "calls")


@dataclass
class Rows:
    """Columns of I/O calls; `name` and `file` index the engine's global string tables."""

    ts_us: np.ndarray
    end_us: np.ndarray
    dur_us: np.ndarray
    name: np.ndarray
    file: np.ndarray
    size_bytes: np.ndarray
    calls: np.ndarray

    @classmethod
    def empty(cls) -> Rows:
        return cls(*(np.empty(0, dtype=np.int64) for _ in ROW_FIELDS))

    def __len__(self) -> int:
        return int(self.ts_us.shape[0])

    def take(self, selector: np.ndarray) -> Rows:
        return Rows(*(getattr(self, f)[selector] for f in ROW_FIELDS))

    @staticmethod
    def concat(parts: list[Rows]) -> Rows:
        parts = [p for p in parts if len(p)]
        if not parts:
            return Rows.empty()
        if len(parts) == 1:
            return parts[0]
        return Rows(*(np.concatenate([getattr(p, f) for p in parts]) for f in ROW_FIELDS))

    def to_wire(self) -> list[bytes]:
        return [np.ascontiguousarray(getattr(self, f), dtype="<i8").tobytes() for f in ROW_FIELDS]

    @classmethod
    def from_wire(cls, columns: list[bytes]) -> Rows:
        return cls(*(np.frombuffer(c, dtype="<i8").copy() for c in columns))


class IoAgg(msgspec.Struct, kw_only=True):
    """Accumulated I/O of a window or cluster. Mutable while the engine runs."""

    start_us: int
    end_us: int
    bytes_written: int = 0
    bytes_read: int = 0
    write_calls: int = 0
    read_calls: int = 0
    io_busy_us: int = 0
    ops: dict[str, list[int]] = {}  # call name -> [calls, dur_us]
    file_bytes_written: dict[str, int] = {}  # file key -> bytes
    file_bytes_read: dict[str, int] = {}
    write_sizes: dict[int, list[int]] = {}  # size_bytes -> [calls, bytes]

    def absorb(self, other: IoAgg) -> None:
        self.start_us = min(self.start_us, other.start_us)
        self.end_us = max(self.end_us, other.end_us)
        self.bytes_written += other.bytes_written
        self.bytes_read += other.bytes_read
        self.write_calls += other.write_calls
        self.read_calls += other.read_calls
        self.io_busy_us += other.io_busy_us
        _add_pairs(self.ops, other.ops)
        _add_counts(self.file_bytes_written, other.file_bytes_written)
        _add_counts(self.file_bytes_read, other.file_bytes_read)
        _add_pairs(self.write_sizes, other.write_sizes)


def _add_pairs(into: dict, other: dict) -> None:
    for key, (first, second) in other.items():
        _add_pair(into, key, first, second)


def _add_pair(into: dict, key, first: int, second: int) -> None:
    slot = into.get(key)
    if slot is None:
        into[key] = [first, second]
    else:
        slot[0] += first
        slot[1] += second


def _add_counts(into: dict, other: dict) -> None:
    for key, value in other.items():
        into[key] = into.get(key, 0) + value


@dataclass(frozen=True)
class CallTable:
    """Global name table seen as flags, so rows classify with one fancy-index each."""

    names: list[str]
    files: list[str]
    is_write: np.ndarray
    is_read: np.ndarray


def add_rows(agg: IoAgg, rows: Rows, table: CallTable) -> None:
    add_grouped([agg], np.zeros(len(rows), dtype=np.int64), rows, table)


def add_grouped(aggs: list[IoAgg], group: np.ndarray, rows: Rows, table: CallTable) -> None:
    """Add each row to `aggs[group[row]]`, with a fixed number of numpy passes for all groups
    together (a batch may close hundreds of windows)."""
    if not len(rows):
        return
    busy = np.bincount(group, weights=rows.dur_us, minlength=len(aggs))
    for g in np.flatnonzero(busy):
        aggs[g].io_busy_us += int(busy[g])
    for (g, name), (calls, dur) in _pair_sums(group, rows.name, rows.calls, rows.dur_us):
        _add_pair(aggs[g].ops, table.names[name], calls, dur)
    moved = rows.size_bytes >= 0
    for flags, direction in ((table.is_write, "write"), (table.is_read, "read")):
        mask = flags[rows.name] & moved
        if not mask.any():
            continue
        grp, size, calls = group[mask], rows.size_bytes[mask], rows.calls[mask]
        for (g, file), (count, total) in _pair_sums(grp, rows.file[mask], calls, size):
            agg = aggs[g]
            if direction == "write":
                agg.bytes_written += total
                agg.write_calls += count
            else:
                agg.bytes_read += total
                agg.read_calls += count
            if file >= 0:
                per_file = agg.file_bytes_written if direction == "write" else agg.file_bytes_read
                key = table.files[file]
                per_file[key] = per_file.get(key, 0) + total
        if direction == "write":
            for (g, value), (count, total) in _pair_sums(grp, size, calls, size):
                _add_pair(aggs[g].write_sizes, value, count, total)


def _pair_sums(group: np.ndarray, key: np.ndarray, first: np.ndarray, second: np.ndarray):
    """Sums of two columns per distinct (group, key), as ((group, key), (sum1, sum2)) pairs."""
    order = np.lexsort((key, group))
    g, k = group[order], key[order]
    starts = np.flatnonzero(np.r_[True, (g[1:] != g[:-1]) | (k[1:] != k[:-1])])
    sums1 = np.add.reduceat(first[order], starts)
    sums2 = np.add.reduceat(second[order], starts)
    return zip(zip(g[starts].tolist(), k[starts].tolist()), zip(sums1.tolist(), sums2.tolist()))
