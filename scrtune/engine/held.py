"""Held window sums in a statistics state, and their settling in Python.

The C fold keeps a window's table sums back as rows (engine/_held.h): bytes objects of
`HELD_ROW_BYTES` (kind, key, first, second as int64), one per fold, in (kind, key) order,
kept in the window's `IoAgg.__dict__["_held"]` as `[names, files, rows, rows, ...]`, where
`names` and `files` are the string tables the keys index. A state carries them as they are
(`IoAgg.held_rows`, encoded `held`) with its own `names` and `files`: settling 18,000
windows' sums into dictionaries to encode them took a daemon snapshot 0.2 s of its loop, and
a replay's merge reads them without settling most of them (the summary reads rows).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from scrtune.engine.ioagg import IoAgg

HELD_ROW_BYTES = 32
OPS, WRITE_FILE, READ_FILE, WRITE_SIZE = range(4)  # the kinds, as _fastagg.c numbers them
_STORED = ("ops_table", "written_table", "read_table", "sizes_table")  # by kind


def held_sums(agg: IoAgg, names: list[str], files: list[str]) -> list[bytes] | None:
    """The rows `agg` holds back, for a state whose string tables are `names` and `files`,
    or None. Rows held under other tables (adopted from another state, coded in its own
    order) are settled first: their codes would name the wrong strings in this state."""
    held = agg.__dict__.get("_held")
    if not held:
        return None
    if held[0] is not names or held[1] is not files:
        agg.settle()
        return None
    return held[2:]


def adopt_held(aggs: list[IoAgg], names: list[str], files: list[str]) -> None:
    """Held rows decoded with a state, whose keys index the state's `names` and `files`, made
    the aggregates' own (an aggregate holding rows already, in the same process, keeps
    them). Damaged rows raise ValueError naming the fault: nothing half-read is taken."""
    carried = [agg for agg in aggs if agg.held_rows is not None]
    decoded = [agg for agg in carried if "_held" not in agg.__dict__]
    _check([rows for agg in decoded for rows in agg.held_rows], len(names), len(files))
    for agg in decoded:
        if agg.held_rows:
            agg.__dict__["_held"] = [names, files, *agg.held_rows]
    for agg in carried:
        agg.held_rows = None


def _check(blobs: list[bytes], name_count: int, file_count: int) -> None:
    if any(len(rows) % HELD_ROW_BYTES for rows in blobs):
        raise ValueError(f"statistics state: held sums not in rows of {HELD_ROW_BYTES} bytes")
    if not blobs:
        return
    rows = np.frombuffer(b"".join(blobs), dtype=np.int64).reshape(-1, 4)
    kind, key = rows[:, 0], rows[:, 1]
    named = kind == OPS
    filed = (kind == WRITE_FILE) | (kind == READ_FILE)
    if ((kind < OPS) | (kind > WRITE_SIZE)).any():
        raise ValueError("statistics state: a held sum of no known kind")
    if ((named & ((key < 0) | (key >= name_count)))
            | (filed & ((key < 0) | (key >= file_count)))).any():
        raise ValueError("statistics state: a held sum's name or file code out of range")


def settle_py(agg: IoAgg) -> None:
    """What _fastagg.settle does, for a build without the C module: the held rows added into
    the tables in the order they came (a file's row adds its bytes; the others [calls, sum])."""
    from scrtune.engine.ioagg import _fold_pairs  # (ioagg imports this module)

    held = agg.__dict__.pop("_held", None)
    if not held:
        return
    names, files = held[0], held[1]
    for blob in held[2:]:
        rows = np.frombuffer(blob, dtype=np.int64).reshape(-1, 4).tolist()
        _fold_pairs([agg.ops_table, agg.sizes_table],
                    ((0, names[key], first, second) if kind == OPS else (1, key, first, second)
                     for kind, key, first, second in rows if kind in (OPS, WRITE_SIZE)))
        for kind, key, _, second in rows:
            if kind in (WRITE_FILE, READ_FILE):
                table = agg.written_table if kind == WRITE_FILE else agg.read_table
                table[files[key]] = table.get(files[key], 0) + second
