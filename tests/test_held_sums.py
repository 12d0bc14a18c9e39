"""Sums the C fold holds back (`defer`) read as the fold without it leaves them: settled in
the order they came, summarised without settling (held_parts, add_sizes) as the settled
tables summarise, and encoded only once settled."""

from __future__ import annotations

import random

import msgspec
import numpy as np
import pytest

from scrtune.engine import ioagg
from scrtune.engine.checkpoints import _parts
from scrtune.engine.ioagg import IoAgg
from tests.test_fast_fold import BIG, as_text, copied, random_case

pytestmark = pytest.mark.skipif(ioagg.fast_agg() is None,
                                reason="C fold not built or switched off")


def folded_twice(rng: random.Random, defer: bool, read_between: bool):
    """A random case folded twice into the same windows (a window spanning two batches)."""
    aggs, group, rows, table = random_case(rng)
    second = rng.sample(range(len(group)), rng.randint(0, len(group)))  # some, reordered
    held = copied(aggs)
    ioagg.add_grouped(held, group, rows, table, defer=defer)
    if read_between and held:
        assert isinstance(held[0].ops, dict)  # a read settles what came so far
    ioagg.add_grouped(held, group[second], rows.take(np.array(second, dtype=np.int64)), table,
                      defer=defer)
    return aggs, held


def test_held_sums_settle_to_what_the_fold_leaves():
    """Two held folds (a read between them or not), settled, equal two plain folds, field
    by field and key order by key order; nothing is held afterwards."""
    rng = random.Random(21)
    held_windows = 0
    for case in range(600):
        state = rng.getstate()
        _, plain = folded_twice(rng, defer=False, read_between=False)
        rng.setstate(state)
        _, held = folded_twice(rng, defer=True, read_between=case % 2 == 0)
        held_windows += sum(1 for agg in held if agg.__dict__)
        for agg in held:
            agg.settle()
        assert as_text(held) == as_text(plain)
        assert not any(agg.__dict__ for agg in held)
    assert held_windows > 500  # the cases did hold sums back


def test_a_held_table_reads_settled():
    table = ioagg.CallTable(["write", "read"], ["/f"], np.array([True, False]),
                            np.array([False, True]))
    rows = ioagg.Rows(*(np.array([0, 0], dtype=np.int64) for _ in range(7)))
    rows.name = np.array([0, 1], dtype=np.int64)
    rows.size_bytes = np.array([4096, 512], dtype=np.int64)
    rows.calls = np.array([1, 1], dtype=np.int64)
    agg = IoAgg(start_us=0, end_us=1)
    ioagg.add_grouped([agg], np.zeros(2, dtype=np.int64), rows, table, defer=True)
    assert agg.has_calls() and not agg.ops_table  # held back, totals added at once
    assert (agg.bytes_written, agg.write_calls, agg.bytes_read) == (4096, 1, 512)
    assert agg.write_sizes == {4096: [1, 4096]}  # the property settles
    assert agg.ops_table == {"write": [1, 0], "read": [1, 0]}
    assert agg.file_bytes_read == {"/f": 512} and not agg.__dict__


def test_checkpoint_parts_from_held_sums_equal_the_settled_ones(monkeypatch):
    """held_parts gives _parts' answer from held sums (save and restore; sums across folds,
    past int64 included, left to the settled path), and _parts really takes it."""
    rng = random.Random(22)
    taken = 0
    calls = []
    real = ioagg._fastagg.held_parts
    monkeypatch.setattr(ioagg._fastagg, "held_parts",
                        lambda *a: calls.append(real(*a)) or calls[-1], raising=False)
    for _ in range(400):
        aggs, held = folded_twice(rng, defer=True, read_between=False)
        fresh = [i for i, agg in enumerate(aggs) if not agg.has_calls()]
        for index in fresh:
            for save in (True, False):
                settled = _settled_copy(held[index])
                calls.clear()
                from_held = msgspec.json.encode(_parts(held[index], save))
                if calls[0] is not None:  # made from the held sums, which stay held
                    taken += 1
                    assert held[index].__dict__
                assert from_held == msgspec.json.encode(_parts(settled, save))
    assert taken > 100  # windows with held sums, summarised from them


def _settled_copy(agg: IoAgg) -> IoAgg:
    """A copy of `agg`, its held sums settled (the original keeps holding them)."""
    copy = IoAgg(
        start_us=agg.start_us, end_us=agg.end_us, bytes_written=agg.bytes_written,
        bytes_read=agg.bytes_read, write_calls=agg.write_calls, read_calls=agg.read_calls,
        io_busy_us=agg.io_busy_us, ops_table={k: list(v) for k, v in agg.ops_table.items()},
        written_table=dict(agg.written_table), read_table=dict(agg.read_table),
        sizes_table={k: list(v) for k, v in agg.sizes_table.items()})
    if agg.__dict__:
        copy.__dict__["_held"] = list(agg.__dict__["_held"])
    copy.settle()
    return copy


def test_write_sizes_added_from_held_sums_as_from_settled_tables():
    """add_write_sizes sums held sizes in C (past int64 too) to what the tables give."""
    rng = random.Random(23)
    for _ in range(300):
        _, held = folded_twice(rng, defer=True, read_between=rng.random() < 0.3)
        into: dict[int, list[int]] = {7: [1, 7]}
        ioagg.add_write_sizes(into, held)
        settled = [_settled_copy(agg) for agg in held]
        expected: dict[int, list[int]] = {7: [1, 7]}
        ioagg.add_pair_tables(expected, [agg.write_sizes for agg in settled])
        assert into == expected  # the same sums (their order is not kept)


def test_sums_past_int64_across_folds_stay_exact():
    table = ioagg.CallTable(["write"], ["/f"], np.array([True]), np.array([False]))
    rows = ioagg.Rows(*(np.zeros(1, dtype=np.int64) for _ in range(7)))
    rows.size_bytes = np.array([BIG], dtype=np.int64)
    rows.calls = np.array([1], dtype=np.int64)
    agg = IoAgg(start_us=0, end_us=1)
    for _ in range(3):
        ioagg.add_grouped([agg], np.zeros(1, dtype=np.int64), rows, table, defer=True)
    assert ioagg._fastagg.held_parts(agg, True, *_types()) is None  # left to Python's ints
    assert agg.write_sizes == {BIG: [3, 3 * BIG]} and agg.file_bytes_written == {"/f": 3 * BIG}


def _types():
    from scrtune.engine import checkpoints as c

    return (c.OpCount, c.SizeMode, c.FileSizes, c.MODE_SHARE, c.MAX_MODES, c.SHARE_DIGITS)



def test_an_outer_window_absorbs_inner_held_sums_as_it_absorbs_settled_tables():
    """Nested regions end first: their windows have claimed I/O (held) when the outer one
    absorbs them. Appending their held rows to the outer window's leaves, once settled, the
    tables settling both and adding them leaves: the same sums, keys in the same order."""
    rng = random.Random(21)
    appended = 0
    for _ in range(400):
        aggs, group, rows, table = random_case(rng)
        if len(aggs) < 2:
            continue
        kept_held, settled_first = copied(aggs), copied(aggs)
        for windows in (kept_held, settled_first):
            ioagg.add_grouped(windows, group, rows, table, defer=True)
        for inner in settled_first:
            inner.settle()
        for windows in (kept_held, settled_first):
            outer = windows[0]
            for inner in windows[1:]:
                appended += "_held" in inner.__dict__ and not inner.ops_table
                outer.absorb(inner)
            outer.settle()
        assert as_text(kept_held[:1]) == as_text(settled_first[:1])
    assert appended > 100
