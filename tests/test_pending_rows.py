"""Pending rows kept as parts claim and settle exactly what one array of them would."""

from __future__ import annotations

import random

import msgspec
import numpy as np
import pytest

from scrtune.engine import timeline
from scrtune.engine.ioagg import CallTable, IoAgg, Rows
from scrtune.engine.timeline import PendingRows, Window, _claim

TABLE = CallTable(names=["write", "read", "lseek"], files=["/ckpt/a", "/ckpt/b"],
                  is_write=np.array([True, False, False]),
                  is_read=np.array([False, True, False]))


def _rows(rng: random.Random, begin_us: int, count: int) -> Rows:
    # a part's rows overlap the next part's in time, and are not sorted within it
    ts = np.array([begin_us + rng.randint(0, 5_000) for _ in range(count)], dtype=np.int64)
    dur = np.array([rng.randint(0, 300) for _ in range(count)], dtype=np.int64)
    return Rows(ts_us=ts, end_us=ts + dur, dur_us=dur,
                name=np.array([rng.randint(0, 2) for _ in range(count)], dtype=np.int64),
                file=np.array([rng.randint(-1, 1) for _ in range(count)], dtype=np.int64),
                size_bytes=np.array([rng.choice([-1, 0, 4096, 1 << 20]) for _ in range(count)],
                                    dtype=np.int64),
                calls=np.ones(count, dtype=np.int64))


def _windows(rng: random.Random, end_us: int) -> list[Window]:
    found = []
    for _ in range(rng.randint(1, 3)):
        start = rng.randint(0, end_us)
        found.append(Window(kind="save", name="ckpt", step=-1, epoch=-1,
                            io=IoAgg(start_us=start, end_us=start + rng.randint(0, 3_000))))
    return found


def _columns(rows: Rows) -> list[list[int]]:
    return [getattr(rows, f).tolist() for f in ("ts_us", "end_us", "dur_us", "name", "file",
                                                "size_bytes", "calls")]


@pytest.mark.parametrize("part_min_rows", [1, 16, timeline.PART_MIN_ROWS])
def test_parts_claim_and_settle_like_one_array(monkeypatch, part_min_rows) -> None:
    monkeypatch.setattr(timeline, "PART_MIN_ROWS", part_min_rows)  # many parts, some, one
    for seed in range(200):
        rng = random.Random(seed)
        parts, whole = PendingRows(), Rows.empty()
        now_us = 0
        for _ in range(rng.randint(1, 12)):
            now_us += rng.randint(500, 4_000)
            incoming = _rows(rng, now_us, rng.randint(0, 40))
            parts.append(incoming)
            whole = Rows.concat([whole, incoming])
            if rng.random() < 0.6:  # new windows, each side gets its own copy
                windows = _windows(rng, now_us + 5_000)
                copies = msgspec.msgpack.decode(msgspec.msgpack.encode(windows),
                                                type=list[Window])
                parts.claim(windows, TABLE)
                whole = _claim(whole, copies, TABLE)
                assert msgspec.to_builtins(windows) == msgspec.to_builtins(copies), seed
            if rng.random() < 0.4:
                watermark = now_us - rng.randint(0, 6_000)
                settled = parts.settle(watermark)
                ended = whole.end_us < watermark
                assert _columns(settled) == _columns(whole.take(ended)), seed
                whole = whole.take(~ended)
            assert len(parts) == len(whole), seed
            assert _columns(parts.rows()) == _columns(whole), seed


def test_small_batches_join_the_last_part() -> None:
    """A daemon under light load adds a few rows per batch: they must not become a part each
    (claims and settling walk the parts at every batch)."""
    rng = random.Random(7)
    parts = PendingRows()
    for step in range(3 * timeline.PART_MIN_ROWS):
        parts.append(_rows(rng, step * 10, 1))
        parts.settle(-1)
    assert len(parts) == 3 * timeline.PART_MIN_ROWS
    assert len(parts._parts) <= 4
