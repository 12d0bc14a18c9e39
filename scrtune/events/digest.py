"""The I/O digest of a batch: what the engine's global tables need of every row, summed.

The engine's per-call tables (calls and bytes per operation, bytes and time per file, call
costs per size, threads, the trace's span) depend on a row only through a few columns. The C
parser sums those while it scans a block, without the GIL (see `_iodigest.h`), so the thread
that aggregates visits a few hundred digest entries instead of every row. `digest_rows` builds
the same digest from columns: it is the reference, and it serves the rows the Python parser
reads and batches that arrive without a digest.
"""

from __future__ import annotations

import msgspec
import numpy as np

from scrtune.events.model import Phase

KEY_COLUMNS = ("phase", "name", "cat", "layer", "file", "host", "size_bytes")
SUMS = ("rows", "calls", "dur_us")
WIDTH = len(KEY_COLUMNS) + len(SUMS)
_SORT_ABOVE = 256  # runs past this many are sorted and summed again


class IoDigest(msgspec.Struct, frozen=True, kw_only=True):
    """`entries`: one row per key of KEY_COLUMNS with the SUMS of the batch's timed rows
    (complete or aggregated) under it; a key may repeat (its sums then add). `threads`: the
    distinct (host, pid, tid) of the complete rows; `first_ts_us`/`last_end_us` their span,
    meaningful when `complete_rows` > 0. Codes are the batch's own."""

    entries: np.ndarray  # (k, WIDTH) int64
    threads: np.ndarray  # (m, 3) int64
    first_ts_us: int
    last_end_us: int
    complete_rows: int

    @classmethod
    def from_parser(cls, raw: tuple[bytes, bytes, int, int, int]) -> IoDigest:
        entries, threads, first_ts_us, last_end_us, rows = raw
        return cls(entries=np.frombuffer(entries, dtype="<i8").reshape(-1, WIDTH),
                   threads=np.frombuffer(threads, dtype="<i8").reshape(-1, 3),
                   first_ts_us=first_ts_us, last_end_us=last_end_us, complete_rows=rows)

    def plus(self, other: IoDigest) -> IoDigest:
        """Both digests as one (for rows of one batch, in the same codes)."""
        if not other.complete_rows:
            first, last = self.first_ts_us, self.last_end_us
        elif not self.complete_rows:
            first, last = other.first_ts_us, other.last_end_us
        else:
            first = min(self.first_ts_us, other.first_ts_us)
            last = max(self.last_end_us, other.last_end_us)
        return IoDigest(entries=np.concatenate([self.entries, other.entries]),
                        threads=np.concatenate([self.threads, other.threads]),
                        first_ts_us=first, last_end_us=last,
                        complete_rows=self.complete_rows + other.complete_rows)


def digest_rows(columns: dict[str, np.ndarray], start: int = 0) -> IoDigest:
    """The digest of rows `start:` of a batch's columns, in numpy."""
    phase = columns["phase"][start:]
    timed = np.flatnonzero((phase == Phase.COMPLETE) | (phase == Phase.AGGREGATED)) + start
    keys = np.stack([columns[name][timed] for name in KEY_COLUMNS], axis=1)
    sums = np.stack([np.ones(len(timed), dtype=np.int64), columns["calls"][timed],
                     columns["dur_us"][timed]], axis=1)
    entries = _reduced(keys, sums)
    complete = np.flatnonzero(phase == Phase.COMPLETE) + start
    if not len(complete):
        return IoDigest(entries=entries, threads=np.empty((0, 3), dtype=np.int64),
                        first_ts_us=0, last_end_us=0, complete_rows=0)
    threads = np.stack([columns[name][complete] for name in ("host", "pid", "tid")], axis=1)
    ts = columns["ts_us"][complete]
    ends = ts + columns["dur_us"][complete]  # wraps at 64 bits, as the C digest's
    return IoDigest(entries=entries, threads=_runs(threads)[0],  # the engine sorts them
                    first_ts_us=int(ts.min()), last_end_us=int(ends.max()),
                    complete_rows=len(complete))


def _runs(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The rows of `keys` that start a run of equal rows, and where each run starts."""
    if not len(keys):
        return keys, np.empty(0, dtype=np.int64)
    starts = np.flatnonzero(np.concatenate(([True], (keys[1:] != keys[:-1]).any(axis=1))))
    return keys[starts], starts


def _reduced(keys: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """Rows of keys and their sums, one per run of equal keys (sorted first when runs are
    many); sums wrap at 64 bits."""
    if not len(keys):
        return np.empty((0, keys.shape[1] + sums.shape[1]), dtype=np.int64)
    firsts, starts = _runs(keys)
    if len(starts) > _SORT_ABOVE:
        return sums_by_key(keys, sums)
    return np.concatenate([firsts, np.add.reduceat(sums, starts, axis=0)], axis=1)


def sums_by_key(keys: np.ndarray, sums: np.ndarray) -> np.ndarray:
    """One row per distinct row of `keys` (2-D), in sorted order: the key, then the sums of
    `sums` (2-D, int64, wrapping) over the rows that have it. Consecutive rows mostly repeat a
    key (a file written in equal calls), so runs are summed before the sort."""
    if not len(keys):
        return np.empty((0, keys.shape[1] + sums.shape[1]), dtype=np.int64)
    keys, starts = _runs(keys)
    if len(starts) < len(sums):
        sums = np.add.reduceat(sums, starts, axis=0)
    order = np.lexsort(keys.T[::-1])
    firsts, starts = _runs(keys[order])
    return np.concatenate([firsts, np.add.reduceat(sums[order], starts, axis=0)], axis=1)
