"""The goodput calculator measures a log a chunk at a time (columns.py, runs.py, steps.py,
paint.paint_pieces): the answer may not depend on where the chunks end, nor on whether they
were held in memory or went to a file."""

from __future__ import annotations

import json
import random

import msgspec
import pytest

from scrtune.goodput import columns, paint
from scrtune.goodput.calculator import BUCKETS, compute
from scrtune.goodput.columns import EventLog, time_ordered
from scrtune.goodput.events import Event, Kind
from scrtune.goodput.readers import read_jsonl

_PHASES = [("startup_started", "startup_finished"),
           ("data_loading_started", "data_loading_finished"),
           ("custom_started", "custom_finished")]


def random_log(seed: int) -> list[dict]:
    """A job of 1-3 runs: steps (ends or starts, numbered from 0, 1 or 5), saves with and
    without a logged start, restores, startup and named phases, steps that go back, a clock
    that goes back, equal times, ends logged or not; one log in ten shuffled."""
    pick = random.Random(seed)
    wall = 1000.0 + pick.randrange(0, 5)
    lines: list[dict] = []

    def emit(kind: str, step: int = -1, name: str = "") -> None:
        lines.append({"kind": kind, "wall_s": wall, "step": step, "job": "j", "name": name})

    step, saved = pick.choice([0, 1, 5]), None
    for run in range(pick.randrange(1, 4)):
        if run or pick.random() < 0.8:
            emit("job_started")
        if pick.random() < 0.3:
            emit("startup_started")
            wall += pick.choice([0, 1, 2])
            emit("startup_finished")
        if run and saved is not None and pick.random() < 0.7:
            if pick.random() < 0.5:
                emit("checkpoint_restore_started")
            wall += pick.choice([0, 1, 3])
            emit("checkpoint_restore_finished", saved)
            step = saved
        elif run and pick.random() < 0.5:
            step = pick.choice([0, 1])
        starts_only = pick.random() < 0.2
        for _ in range(pick.randrange(0, 40)):
            wall += pick.choice([0.0, 0.5, 1.0, 1.0, 1.0, 2.0, 1.25])
            step += 1
            emit("step_started" if starts_only else "step_finished", step)
            roll = pick.random()
            if roll < 0.1:
                if pick.random() < 0.7:
                    emit("checkpoint_save_started", step)
                wall += pick.choice([0, 1, 2])
                emit("checkpoint_save_finished", step if pick.random() < 0.9 else -1)
                saved = step
            elif roll < 0.13:
                started, finished = pick.choice(_PHASES)
                emit(started, name=pick.choice(["", "x"]))
                wall += pick.choice([0, 1])
                emit(finished, name=pick.choice(["", "x"]))
            elif roll < 0.15:
                step -= pick.randrange(0, 3)
            elif roll < 0.17:
                wall -= pick.choice([0.5, 3])
        ending = pick.random()
        if ending < 0.4:
            emit("job_terminated")
        elif ending < 0.6:
            emit("job_crashed")
        wall += pick.choice([0, 2, 10])
    if pick.random() < 0.1:
        pick.shuffle(lines)
    return lines


def _events(lines: list[dict]) -> list[Event]:
    return [Event(kind=Kind(line["kind"]), wall_s=line["wall_s"], step=line["step"],
                  job=line["job"], name=line["name"]) for line in lines]


def _report(events: list[Event], ideal: float | None) -> dict | str:
    try:
        return msgspec.to_builtins(compute(events, ideal))
    except ValueError as exc:
        return str(exc)


def test_tiny_chunks_and_files_give_the_report_of_one_chunk(monkeypatch):
    logs = [_events(random_log(seed)) for seed in range(300)]
    whole = [_report(events, ideal) for events in logs for ideal in (None, 0.7)]
    monkeypatch.setattr(columns, "CHUNK_ROWS", 3)  # chunks of 3 events, each in a file
    monkeypatch.setattr(columns, "MEMORY_BYTES", 1)
    monkeypatch.setattr(paint, "PIECE_ROWS", 2)
    pieces = [_report(events, ideal) for events in logs for ideal in (None, 0.7)]
    assert pieces == whole
    measured = [report for report in whole if isinstance(report, dict)]
    assert len(measured) > 500
    for report in measured:  # every second in one bucket
        total = report["effective_s"] + sum(report["badput_s"][b] for b in BUCKETS)
        assert total == pytest.approx(report["total_s"], abs=1e-6)
    kinds = {w.split(" ")[1] for report in measured for w in report["warnings"]}
    assert {"log's", "ideal"} <= kinds  # the clock and short steps were among the cases
    assert any(report["runs"] == 3 for report in measured)
    assert any(report["errors"] for report in measured)


def test_a_log_out_of_time_order_is_sorted_and_one_in_order_streams(monkeypatch):
    monkeypatch.setattr(columns, "CHUNK_ROWS", 4)
    steps = [Event(kind=Kind.STEP_FINISHED, wall_s=float(t), step=t) for t in range(1, 40)]
    shuffled = steps[:]
    random.Random(3).shuffle(shuffled)
    for events in (steps, shuffled):
        timed, clock = time_ordered(EventLog.of(events))
        walls = [wall for chunk in timed.chunks() for wall in chunk["wall"].tolist()]
        assert walls == sorted(walls) and len(walls) == 39
        # no chunk ends inside a run of equal times: each starts after the last one's end
        chunks = list(timed.chunks())
        assert all(a["wall"][-1] < b["wall"][0] for a, b in zip(chunks, chunks[1:]))
        assert (clock.backwards > 0) is (events is shuffled)
    assert compute(shuffled).segments == compute(steps).segments


def test_a_long_log_goes_to_a_file_and_reads_back_whole(monkeypatch, tmp_path):
    """Past MEMORY_BYTES a log's columns go to a temporary file: the events read back are
    the ones written, in order, and the report is the one measured in memory."""
    log = tmp_path / "long.jsonl"
    with log.open("w") as out:
        out.write(json.dumps({"kind": "job_started", "wall_s": 0.0}) + "\n")
        for step in range(1, 5001):
            out.write(json.dumps({"kind": "step_finished", "wall_s": step * 1.0,
                                  "step": step, "job": "j"}) + "\n")
            if step % 100 == 0:
                out.write(json.dumps({"kind": "checkpoint_saved", "wall_s": step + 0.5,
                                      "step": step, "job": "j"}) + "\n")
    in_memory = read_jsonl(str(log))
    expected = compute(in_memory.log)
    monkeypatch.setattr(columns, "MEMORY_BYTES", 4096)
    monkeypatch.setattr(columns, "CHUNK_ROWS", 500)
    spilled = read_jsonl(str(log))
    assert spilled.log.raw.on_disk and not in_memory.log.raw.on_disk
    assert spilled.events == in_memory.events and len(spilled.events) == 5051
    assert compute(spilled.log) == expected
    assert expected.net_steps == 5000 and expected.badput_s["checkpoint_save"] == 25.0


def test_step_times_of_a_long_log_are_binned_and_the_median_is_exact(monkeypatch):
    """Past SERIES_POINTS intervals the series is bin means; the ideal step time stays the
    exact median of every interval."""
    from scrtune.goodput import steps as steps_module

    monkeypatch.setattr(steps_module, "SERIES_POINTS", 50)
    times = [1.0 + (i % 7) * 0.25 for i in range(400)]
    events, wall = [Event(kind=Kind.JOB_STARTED, wall_s=0.0)], 0.0
    for step, took in enumerate(times, start=1):
        wall += took
        events.append(Event(kind=Kind.STEP_FINISHED, wall_s=wall, step=step))
    report = compute(events)
    import statistics

    assert report.ideal_step_s == statistics.median(times[1:])  # the first is startup's
    assert 0 < len(report.step_times) <= 50
    assert min(t.step_s for t in report.step_times) >= 1.0
    assert max(t.step_s for t in report.step_times) <= 2.5
