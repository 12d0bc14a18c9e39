"""I/O rows of one process and their aggregate over a time window.

`Rows` are the POSIX/STDIO calls of one process that still wait for a checkpoint region to
claim them (columns, global string ids). `IoAgg` is what a window keeps of its calls: bytes,
calls per operation, bytes per file and the write-size histogram; two aggregates add exactly.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import msgspec
import numpy as np

from scrtune.engine.held import settle_py
from scrtune.events.digest import sums_by_key

try:
    from scrtune.engine import _fastagg
except ImportError:  # built without a C compiler: the Python fold, same results
    _fastagg = None

FAST_PATH = os.environ.get("SCRTUNE_PURE_PYTHON", "") != "1"


def fast_agg() -> ModuleType | None:
    """The C module when it is built and not switched off (SCRTUNE_PURE_PYTHON=1, tests)."""
    return _fastagg if FAST_PATH else None


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

    @classmethod
    def gather(cls, columns: dict[str, np.ndarray], at: np.ndarray, name_map: np.ndarray,
               file_map: np.ndarray) -> Rows:
        """The rows `at` of a batch's columns, their names and files mapped (a file code of
        -1, none, reads file_map's last entry): in one C pass when it is built."""
        fast = fast_agg()
        if fast is None:
            ts_us, dur_us = columns["ts_us"].take(at), columns["dur_us"].take(at)
            return cls(ts_us=ts_us, end_us=ts_us + dur_us, dur_us=dur_us,
                       name=name_map.take(columns["name"].take(at)),
                       file=file_map.take(columns["file"].take(at)),
                       size_bytes=columns["size_bytes"].take(at),
                       calls=columns["calls"].take(at))
        out = np.empty((len(ROW_FIELDS), len(at)), dtype=np.int64)
        fast.gather_rows(*(np.ascontiguousarray(c, dtype=np.int64) for c in (
            at, columns["ts_us"], columns["dur_us"], columns["name"], columns["file"],
            columns["size_bytes"], columns["calls"], name_map, file_map)), out)
        return cls(*out)

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


class _SettledTable:
    """One of IoAgg's tables, read or replaced after its held sums are settled."""

    def __init__(self, stored: str) -> None:
        self.stored = stored

    def __get__(self, agg: IoAgg | None, owner: type | None = None) -> Any:
        if agg is None:
            return self
        agg.settle()
        return getattr(agg, self.stored)

    def __set__(self, agg: IoAgg, table: dict) -> None:
        agg.settle()
        setattr(agg, self.stored, table)


class IoAgg(msgspec.Struct, kw_only=True, dict=True, array_like=True, omit_defaults=True):
    """Accumulated I/O of a window or cluster. Mutable while the engine runs.

    A window's tables (ops, bytes per file, write sizes) may be held back by the C fold as
    sorted int64 sums (`defer`): most windows are only ever summarised, which the C path
    does from those sums without building a dictionary entry per key. Reading a table
    (`ops`, `file_bytes_written`, `file_bytes_read`, `write_sizes`) first settles them, in
    the order they came, so every
    reader sees what the fold without deferral would have left. A state carries held sums as
    rows (`held_rows`, engine/held.py), unsettled."""

    start_us: int
    end_us: int
    bytes_written: int = 0
    bytes_read: int = 0
    write_calls: int = 0
    read_calls: int = 0
    io_busy_us: int = 0
    # call name -> [calls, dur_us]
    ops_table: dict[str, list[int]] = msgspec.field(default_factory=dict, name="ops")
    # file key -> bytes
    written_table: dict[str, int] = msgspec.field(default_factory=dict,
                                                  name="file_bytes_written")
    read_table: dict[str, int] = msgspec.field(default_factory=dict, name="file_bytes_read")
    # size_bytes -> [calls, bytes]
    sizes_table: dict[int, list[int]] = msgspec.field(default_factory=dict, name="write_sizes")
    # held sums as a state carries them (engine/held.py): set when encoding, taken when merged
    held_rows: list[bytes] | None = msgspec.field(default=None, name="held")

    # the tables as readers see them: held sums settled first
    ops = _SettledTable("ops_table")
    file_bytes_written = _SettledTable("written_table")
    file_bytes_read = _SettledTable("read_table")
    write_sizes = _SettledTable("sizes_table")

    def settle(self) -> None:
        """Add the sums the C fold held back into the tables (nothing when there are none)."""
        if self.__dict__:  # only the C fold holds sums back (a state may bring them)
            if _fastagg is not None:
                _fastagg.settle(self)
            else:
                settle_py(self)

    def has_calls(self) -> bool:
        """Whether any call was added (held-back sums count: every call adds to `ops`)."""
        return bool(self.write_calls or self.read_calls or self.ops_table or self.__dict__)

    def absorb(self, other: IoAgg) -> None:
        if other.start_us < self.start_us:
            self.start_us = other.start_us
        if other.end_us > self.end_us:
            self.end_us = other.end_us
        if not (other.has_calls() or other.io_busy_us or other.bytes_written
                or other.bytes_read):
            return  # a window placed before its I/O is claimed (most nested ones): no sums
        self.bytes_written += other.bytes_written
        self.bytes_read += other.bytes_read
        self.write_calls += other.write_calls
        self.read_calls += other.read_calls
        self.io_busy_us += other.io_busy_us
        if _absorb_held(self, other):
            return
        if other.ops:  # a fresh window has no I/O yet: nothing more to add
            add_pair_tables(self.ops, [other.ops])
            _add_counts(self.file_bytes_written, other.file_bytes_written)
            _add_counts(self.file_bytes_read, other.file_bytes_read)
            add_pair_tables(self.write_sizes, [other.write_sizes])


def _absorb_held(outer: IoAgg, inner: IoAgg) -> bool:
    """The inner window's held sums appended to the outer one's, unsettled, when both are
    coded under the same string tables and the inner one has no settled tables: settling
    them later adds the same sums, new keys in the same order, as settling both now and
    adding the inner tables (nested checkpoint regions end first, so an outer window absorbs
    inner ones that have claimed their I/O already: this kept it held)."""
    theirs = inner.__dict__.get("_held")
    if not theirs or inner.ops_table or inner.written_table or inner.read_table \
            or inner.sizes_table:
        return False
    mine = outer.__dict__.get("_held")
    if mine is None:
        outer.__dict__["_held"] = list(theirs)
    elif mine[0] is theirs[0] and mine[1] is theirs[1]:
        mine.extend(theirs[2:])
    else:
        return False
    return True


def add_write_sizes(into: dict[int, list[int]], aggs: list[IoAgg]) -> None:
    """Add the aggregates' write sizes into `into`: the sums add_pair_tables of their
    settled tables gives (the C path sums held ones without settling them, and adds their
    keys after the tables' own)."""
    fast = fast_agg()
    if fast is not None:
        fast.add_sizes(into, aggs)
        return
    add_pair_tables(into, [agg.write_sizes for agg in aggs])


def add_pair_tables(into: dict, tables: list[dict]) -> None:
    """Add tables of key -> [first, second] into `into`, in order (new keys get new lists)."""
    fast = fast_agg()
    if fast is not None:
        fast.add_pairs(into, tables)
        return
    for table in tables:
        _fold_pairs([into], ((0, key, a, b) for key, (a, b) in table.items()))


def _fold_pairs(tables: list[dict], sums, keys: list | None = None) -> None:
    """Add (table index, key, first, second) rows into tables of key -> [first, second];
    `keys` maps a key code to its name. One loop, no call per row: this is the hot part."""
    for index, key, first, second in sums:
        table = tables[index]
        if keys is not None:
            key = keys[key]
        slot = table.get(key)
        if slot is None:
            table[key] = [first, second]
        else:
            slot[0] += first
            slot[1] += second


def _add_counts(into: dict, other: dict) -> None:
    if not into:
        into.update(other)
        return
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


def add_grouped(aggs: list[IoAgg], group: np.ndarray, rows: Rows, table: CallTable,
                defer: bool = False) -> None:
    """Add each row to `aggs[group[row]]`; a row whose group is negative goes nowhere (so a
    caller need not copy the rows it claims). The C fold does it without a Python call per
    (window, key); add_grouped_py is the reference it must match exactly. `defer`: the C
    fold may hold the tables' sums back until they are read (IoAgg.settle)."""
    if not len(rows):
        return
    fast = fast_agg()
    if fast is None:
        add_grouped_py(aggs, group, rows, table)
        return
    fast.fold(aggs, *(np.ascontiguousarray(c, dtype=np.int64) for c in (
        group, rows.name, rows.file, rows.size_bytes, rows.calls, rows.dur_us)),
        table.is_write, table.is_read, table.names, table.files, defer)


def add_grouped_py(aggs: list[IoAgg], group: np.ndarray, rows: Rows, table: CallTable) -> None:
    """add_grouped in numpy and Python: a fixed number of numpy passes for all groups
    together, then one loop per table (_fold_pairs) over the distinct (window, key) sums."""
    if len(rows) and group.min() < 0:
        claimed = group >= 0
        group, rows = group[claimed], rows.take(claimed)
    if not len(rows):
        return
    by_group = np.argsort(group, kind="stable")
    starts = np.flatnonzero(np.concatenate(([True], group[by_group][1:] != group[by_group][:-1])))
    busy = np.add.reduceat(rows.dur_us[by_group], starts)  # int64, wrapping as the C fold
    for g, value in zip(group[by_group][starts].tolist(), busy.tolist()):
        if value:
            aggs[g].io_busy_us += value
    _fold_pairs([agg.ops for agg in aggs], pair_sums(group, rows.name, rows.calls, rows.dur_us),
                table.names)
    moved = rows.size_bytes >= 0
    for flags, writes in ((table.is_write, True), (table.is_read, False)):
        mask = flags[rows.name] & moved
        if not mask.any():
            continue
        grp, size, calls = group[mask], rows.size_bytes[mask], rows.calls[mask]
        _add_moved(aggs, pair_sums(grp, rows.file[mask], calls, size), table.files, writes)
        if writes:
            _fold_pairs([agg.write_sizes for agg in aggs], pair_sums(grp, size, calls, size))


def _add_moved(aggs: list[IoAgg], sums, files: list[str], writes: bool) -> None:
    for g, file, count, total in sums:
        agg = aggs[g]
        if writes:
            agg.bytes_written += total
            agg.write_calls += count
            per_file = agg.file_bytes_written
        else:
            agg.bytes_read += total
            agg.read_calls += count
            per_file = agg.file_bytes_read
        if file >= 0:
            key = files[file]
            per_file[key] = per_file.get(key, 0) + total


def pair_sums(group: np.ndarray, key: np.ndarray, first: np.ndarray, second: np.ndarray):
    """Sums of two columns per distinct (group, key), as [group, key, sum1, sum2] rows sorted
    by group then key; sums wrap at 64 bits."""
    return sums_by_key(np.stack([group, key], 1), np.stack([first, second], 1)).tolist()
