"""A batch's checkpoint regions: their keys counted, and a window for each save or restore."""

from __future__ import annotations

import numpy as np

from scrtune.engine.windows import FreshWindows, Window, new_window


def region_sums(pair: np.ndarray, dur_us: np.ndarray) -> tuple[np.ndarray, ...]:
    """The distinct region keys of the rows (sorted), how many rows each has and their summed
    durations (floats, added in row order). A batch's keys are small codes, mostly: they are
    counted into bins, without the sort a unique takes."""
    if pair.min() >= 0 and pair.max() < max(4 * len(pair), 1 << 16):
        counts = np.bincount(pair)
        keys = np.flatnonzero(counts)
        return keys, counts[keys], np.bincount(pair, weights=dur_us)[keys]
    keys, inverse = np.unique(pair, return_inverse=True)
    return keys, np.bincount(inverse), np.bincount(inverse, weights=dur_us)


def save_windows(cols: dict[str, np.ndarray], at: np.ndarray, pair: np.ndarray,
                 marks: dict[int, tuple[str, str, bool]]) -> FreshWindows | list[Window]:
    """A window per row of a save or restore region, grouped by region key in key order and
    in row order within a key (the order _place's stable sort keeps for equal times): as
    columns, or as Window objects when an end is past int64 (Python ints do not wrap)."""
    chosen = np.isin(pair, list(marks))
    keys = pair[chosen]
    order = np.argsort(keys, kind="stable")
    rows = at[chosen][order]
    begin, dur = cols["ts_us"][rows], cols["dur_us"][rows]
    if len(rows) and (begin.min() < 0 or dur.min() < 0 or
                      int(begin.max()) + int(dur.max()) >= 1 << 63):
        return [
            new_window(mark, step, epoch, first, first + length)
            for mark, step, epoch, first, length in zip(
                map(marks.__getitem__, keys[order].tolist()), cols["step"][rows].tolist(),
                cols["epoch"][rows].tolist(), begin.tolist(), dur.tolist())
        ]
    codes = sorted(marks)
    mark = np.searchsorted(np.array(codes, dtype=np.int64), keys[order])  # marks: key order
    return FreshWindows([marks[c] for c in codes], mark, begin, begin + dur,
                        cols["step"][rows], cols["epoch"][rows])
