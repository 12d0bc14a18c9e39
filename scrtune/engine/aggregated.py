"""Checkpoints of aggregated traces (`DFTRACER_ENABLE_AGGREGATION=1`).

The tracer folds each region name's calls within a time window (1 s) into one `ph:3` record:
`ts` is the window's start, `dft_cnt` the calls, `dur` their time. Nesting is lost (every
region of a window starts at its `ts`), and so are steps, files and the I/O of each checkpoint.
What is left is how many saves and restores each process made per window, and how long they
took. Per (process, window, kind) the outermost region is the one that counts: a checkpoint
library's own region (category `checkpoint`) before an application function that only names
one, then the longest, since the parts of a checkpoint (`checkpoint.save.model`) take less
time than the whole (`checkpoint.save`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from scrtune.engine import classify
from scrtune.engine.classify import CheckpointPatterns, RegionKind
from scrtune.engine.ioagg import IoAgg
from scrtune.engine.timeline import Window
from scrtune.events.model import EventBatch

FOUND_BY = "aggregated"
_SEP = "\x1f"  # keys are strings so the table merges and serialises like the others


def key(host: str, pid: int, window_us: int, kind: str, by_name_only: bool, name: str) -> str:
    return _SEP.join((host, str(pid), str(window_us), kind, "1" if by_name_only else "0", name))


def add(table: dict[str, list[int]], batch: EventBatch, patterns: CheckpointPatterns,
        region_kind: Callable[[str, str], RegionKind | None], rows: np.ndarray) -> tuple[int, int]:
    """Count the batch's aggregated save and restore regions (`rows`) into `table`; returns the
    calls and time of its aggregated compute regions, which count like complete ones."""
    cols = batch.columns
    compute_calls = compute_us = 0
    for i in np.flatnonzero(rows).tolist():
        cat, name = batch.cats[cols["cat"][i]], batch.names[cols["name"][i]]
        calls, dur_us = int(cols["calls"][i]), int(cols["dur_us"][i])
        if classify.is_compute_region(name, cat):
            compute_calls, compute_us = compute_calls + calls, compute_us + dur_us
        kind = region_kind(cat, name)
        if kind not in (RegionKind.SAVE, RegionKind.RESTORE):
            continue
        host = batch.hosts[cols["host"][i]] if cols["host"][i] >= 0 else ""
        by_name_only = not classify.marked_by_category(cat, patterns)
        place = key(host, int(cols["pid"][i]), int(cols["ts_us"][i]), kind.value, by_name_only,
                    name)
        totals = table.setdefault(place, [0, 0])
        totals[0] += calls
        totals[1] += dur_us
    return compute_calls, compute_us


def windows(table: dict[str, list[int]]) -> list[tuple[tuple[str, int], Window, str]]:
    """One window per counted checkpoint, laid out in turn from the start of its aggregation
    window (saves, then restores: their order within a window is not in the trace)."""
    chosen: dict[tuple[str, int, int, str], tuple[tuple[int, int], str, int]] = {}
    for text, (calls, dur_us) in table.items():
        host, pid, window_us, kind, by_name_only, name = text.split(_SEP, 5)
        place = (host, int(pid), int(window_us), kind)
        rank = (0 if by_name_only == "1" else 1, dur_us)
        if place not in chosen or rank > chosen[place][0]:
            chosen[place] = (rank, name, calls)
    out = []
    taken_us: dict[tuple[str, int, int], int] = {}  # time laid out so far per process window
    by_kind = sorted(chosen.items(), key=lambda item: (item[0][:3], item[0][3] != "save"))
    for (host, pid, window_us, kind), ((_, dur_us), name, calls) in by_kind:
        mean_us = dur_us // max(calls, 1)
        for _ in range(calls):
            start = window_us + taken_us.get((host, pid, window_us), 0)
            taken_us[(host, pid, window_us)] = start - window_us + mean_us
            io = IoAgg(start_us=start, end_us=start + mean_us)
            out.append(((host, pid), Window(kind=kind, name=name, step=-1, epoch=-1, io=io),
                        FOUND_BY))
    return out
