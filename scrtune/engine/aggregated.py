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

from scrtune.engine.ioagg import IoAgg
from scrtune.engine.timeline import Window

FOUND_BY = "aggregated"
_SEP = "\x1f"  # keys are strings so the table merges and serialises like the others


def key(host: str, pid: int, window_us: int, kind: str, by_name_only: bool, name: str) -> str:
    return _SEP.join((host, str(pid), str(window_us), kind, "1" if by_name_only else "0", name))


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
