"""Placing a batch's checkpoint regions among a process's windows: the C pass (new regions
kept as columns, objects made only for the ones kept) leaves exactly what the Python
reference leaves, nested regions, partial overlaps, drivers and ties included."""

from __future__ import annotations

import random

import msgspec
import numpy as np
import pytest

from scrtune.engine import ioagg
from scrtune.engine.ioagg import IoAgg
from scrtune.engine.windows import FreshWindows, Window, place, place_py

pytestmark = pytest.mark.skipif(ioagg._fastagg is None, reason="C fold not built")

MARKS = [("save", "checkpoint.save", False), ("save", "checkpoint.save.model", False),
         ("save", "DLIOBenchmark._checkpoint_write", True), ("restore", "checkpoint.load", False)]


def fresh(rng: random.Random, count: int, span_us: int) -> FreshWindows:
    def column(choices: list[int]) -> np.ndarray:
        return np.array([rng.choice(choices) for _ in range(count)], dtype=np.int64)

    start = column(list(range(span_us + 1)))
    length = column([0, 1, 5, 40, 300])
    if count > 1 and rng.random() < 0.3:  # equal times: ties keep the given order
        start[1], length[1] = start[0], length[0]
    return FreshWindows(MARKS, column(list(range(len(MARKS)))), start, start + length,
                        column([-1, -1, 3, 7]), column([-1, 0, 2]))


def held_windows(rng: random.Random, span_us: int) -> list[Window]:
    """Windows placed earlier (not nested, sorted), holding I/O."""
    kept, _ = place_py([], fresh(rng, rng.randint(0, 12), span_us).windows())
    for number, window in enumerate(kept):
        window.io = IoAgg(start_us=window.io.start_us, end_us=window.io.end_us,
                          bytes_written=number, write_calls=1,
                          ops_table={f"write{number}": [1, 2]}, sizes_table={number: [1, number]},
                          written_table={f"/ckpt/{number}": number})
    return kept


def encoded(windows: list[Window]) -> bytes:
    return msgspec.json.encode(msgspec.to_builtins(windows, str_keys=True))


def test_c_placement_leaves_what_the_reference_leaves():
    rng = random.Random(20)
    absorbed = 0
    for _ in range(1500):
        span_us = rng.choice([50, 400, 5000])
        held, new = held_windows(rng, span_us), fresh(rng, rng.randint(1, 30), span_us)
        copy = msgspec.msgpack.decode(msgspec.msgpack.encode(held), type=list[Window])
        kept, grown = place(held, new)
        kept_py, grown_py = place_py(copy, new.windows())
        assert encoded(kept) == encoded(kept_py)
        assert encoded(grown) == encoded(grown_py)
        assert all(any(g is k for k in kept) for g in grown)  # grown ones are the kept objects
        absorbed += len(held) + len(new) - len(kept)
    assert absorbed > 5000  # the cases nest


def test_times_and_steps_past_int64_take_the_reference():
    """Windows merged from another rank's state hold Python ints of any size: placed as the
    reference places them, never an OverflowError."""
    far = Window(kind="save", name="checkpoint.save", step=1 << 70, epoch=-1,
                 io=IoAgg(start_us=10, end_us=1 << 64))
    new = FreshWindows(MARKS, np.array([1]), np.array([20]), np.array([30]), np.array([4]),
                       np.array([-1]))
    kept, grown = place([far], new)
    assert kept == [far] and grown == [] and far.step == 1 << 70


def test_pure_python_path_places_alike(monkeypatch):
    rng = random.Random(21)
    for _ in range(200):
        held, new = held_windows(rng, 400), fresh(rng, rng.randint(1, 20), 400)
        copy = msgspec.msgpack.decode(msgspec.msgpack.encode(held), type=list[Window])
        kept = place(held, new)[0]
        monkeypatch.setattr(ioagg, "FAST_PATH", False)
        assert encoded(place(copy, new)[0]) == encoded(kept)
        monkeypatch.setattr(ioagg, "FAST_PATH", True)
