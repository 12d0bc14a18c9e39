"""The C fold and its Python reference leave identical window aggregates, in identical order."""

from __future__ import annotations

import random

import msgspec
import numpy as np
import pytest

from scrtune.engine import ioagg, timeline
from scrtune.engine.ioagg import CallTable, IoAgg, Rows

pytestmark = pytest.mark.skipif(ioagg._fastagg is None, reason="C fold not built")

BIG = 1 << 62  # sums of a few of these wrap at 64 bits: both paths must wrap alike


def random_case(rng: random.Random) -> tuple[list[IoAgg], np.ndarray, Rows, CallTable]:
    n_names, n_files, n_aggs = rng.randint(1, 6), rng.randint(0, 5), rng.randint(1, 8)
    table = CallTable(
        names=[f"call{i}" for i in range(n_names)],
        files=[f"/ckpt/f{i}" for i in range(n_files)],
        is_write=np.array([rng.random() < 0.5 for _ in range(n_names)]),
        is_read=np.array([rng.random() < 0.4 for _ in range(n_names)]),  # some are both
    )
    aggs = []
    for _ in range(n_aggs):
        agg = IoAgg(start_us=0, end_us=10, bytes_written=rng.choice([0, 5, BIG]))
        if rng.random() < 0.5:  # a window that already holds I/O
            agg.ops = {"call0": [1, 2]}
            agg.write_sizes = {4096: [1, 4096], -1: [2, 0]}
            agg.file_bytes_written = {"/ckpt/f0": 3}
        aggs.append(agg)
    count = rng.randint(0, 60)
    values = [0, 1, 4096, 1 << 20, BIG, (1 << 63) - 1]

    def column(low: int, high: int) -> np.ndarray:
        return np.array([rng.randint(low, high) for _ in range(count)], dtype=np.int64)

    group = column(-1, n_aggs - 1)
    if rng.random() < 0.5:
        group.sort()  # the usual order: rows in time, windows by start
    rows = Rows(
        ts_us=column(0, 100), end_us=column(0, 100),
        dur_us=np.array([rng.choice(values) for _ in range(count)], dtype=np.int64),
        name=column(0, n_names - 1), file=column(-1, n_files - 1),
        size_bytes=np.array([rng.choice([-1, *values]) for _ in range(count)], dtype=np.int64),
        calls=np.array([rng.choice([1, 1, 3, BIG]) for _ in range(count)], dtype=np.int64),
    )
    return aggs, group, rows, table


def copied(aggs: list[IoAgg]) -> list[IoAgg]:
    return msgspec.msgpack.decode(msgspec.msgpack.encode(aggs), type=list[IoAgg])


def as_text(aggs: list[IoAgg]) -> bytes:
    """Every field and the order of every table (JSON keeps insertion order)."""
    return msgspec.json.encode(msgspec.to_builtins(aggs, str_keys=True))


def test_fold_matches_the_reference_on_random_rows():
    rng = random.Random(14)
    for _ in range(600):
        aggs, group, rows, table = random_case(rng)
        fast, slow = copied(aggs), copied(aggs)
        ioagg.add_grouped(fast, group, rows, table)
        ioagg.add_grouped_py(slow, group, rows, table)
        assert as_text(fast) == as_text(slow)


def test_fold_matches_the_reference_on_runs_of_equal_rows():
    """A checkpoint writes in runs of equal calls, which the C fold sums before adding: runs
    of 1 to 5 equal rows (sums past 64 bits among them) add as the reference adds them."""
    rng = random.Random(15)
    runs = 0
    for _ in range(600):
        aggs, group, rows, table = random_case(rng)
        repeat = np.array([rng.randint(1, 5) for _ in range(len(group))], dtype=np.int64)
        runs += int((repeat > 1).sum())
        at = np.repeat(np.arange(len(group)), repeat)
        group, rows = group[at], rows.take(at)
        fast, slow = copied(aggs), copied(aggs)
        ioagg.add_grouped(fast, group, rows, table)
        ioagg.add_grouped_py(slow, group, rows, table)
        assert as_text(fast) == as_text(slow)
    assert runs > 1000  # the cases hold runs to sum


def test_rows_of_negative_groups_go_nowhere():
    table = CallTable(["write"], ["/f"], np.array([True]), np.array([False]))
    rows = Rows(*(np.array([0, 0], dtype=np.int64) for _ in range(7)))
    rows.size_bytes = np.array([10, 20], dtype=np.int64)
    rows.calls = np.array([1, 1], dtype=np.int64)
    for fold in (ioagg.add_grouped, ioagg.add_grouped_py):
        aggs = [IoAgg(start_us=0, end_us=1)]
        fold(aggs, np.array([-1, 0], dtype=np.int64), rows, table)
        got = (aggs[0].bytes_written, aggs[0].write_calls, aggs[0].ops)
        assert got == (20, 1, {"write": [1, 0]})


def test_bad_codes_raise_instead_of_reading_past_tables():
    table = CallTable(["write"], ["/f"], np.array([True]), np.array([False]))
    for bad in ({"name": 1}, {"file": 1}, {"file": -2}):
        columns = {f: np.array([0], dtype=np.int64) for f in ioagg.ROW_FIELDS}
        columns.update({k: np.array([v], dtype=np.int64) for k, v in bad.items()})
        with pytest.raises(IndexError):
            ioagg._fastagg.fold([IoAgg(start_us=0, end_us=1)], np.array([0], dtype=np.int64),
                                columns["name"], columns["file"], columns["size_bytes"],
                                columns["calls"], columns["dur_us"], table.is_write,
                                table.is_read, table.names, table.files)
    with pytest.raises(IndexError):  # a window past the list
        ioagg.add_grouped([IoAgg(start_us=0, end_us=1)], np.array([1], dtype=np.int64),
                          Rows(*(np.zeros(1, dtype=np.int64) for _ in range(7))), table)


def test_a_malformed_pair_from_the_wire_raises_on_both_paths():
    """A state decoded from another rank may hold a pair of one value: an error, no crash."""
    table = CallTable(["write"], ["/f"], np.array([True]), np.array([False]))
    rows = Rows(*(np.zeros(1, dtype=np.int64) for _ in range(7)))
    for fold in (ioagg.add_grouped, ioagg.add_grouped_py):
        with pytest.raises(IndexError):
            agg = IoAgg(start_us=0, end_us=1, ops_table={"write": [1]})
            fold([agg], np.zeros(1, dtype=np.int64), rows, table)


def test_pair_tables_add_alike_on_both_paths(monkeypatch):
    rng = random.Random(3)
    for _ in range(200):
        tables = [{rng.choice([-1, 0, 4096, BIG]): [rng.randint(0, 9), rng.choice([1, BIG])]
                   for _ in range(rng.randint(0, 5))} for _ in range(rng.randint(0, 6))]
        start = {4096: [1, 1]} if rng.random() < 0.5 else {}
        before = [{k: list(v) for k, v in t.items()} for t in tables]
        results = []
        for fast in (True, False):
            monkeypatch.setattr(ioagg, "FAST_PATH", fast)
            into = {k: list(v) for k, v in start.items()}
            ioagg.add_pair_tables(into, tables)
            results.append(list(into.items()))
            for pair in into.values():  # the sums are new lists, not the tables' own
                pair[0] += 1
            assert tables == before
        assert results[0] == results[1]


def random_sizes(rng: random.Random) -> dict[int, list[int]]:
    """Write sizes as a window holds them: many sizes, ties in bytes, zeros, and values the C
    path hands back to Python (negative, past 2^53 in total, past int64)."""
    moved = [0, 1, 4096, 1 << 20, 1 << 40, 1 << 52, -5, 1 << 64]
    weights = [4, 2, 6, 6, 3, 1, 1, 1]
    return {rng.choice([rng.randint(-3, 3), rng.randint(1, 1 << 30)]):
            [rng.randint(0, 99), rng.choices(moved, weights)[0] * rng.choice([1, 1, 3])]
            for _ in range(rng.choice([0, 1, 2, 15, 33, 80]))}


def test_dominant_write_sizes_alike_on_both_paths(monkeypatch):
    """checkpoints.modes: the C selection picks what the Python sort does, ties included
    (equal bytes: the smaller size first), and leaves to Python what it cannot compare
    exactly."""
    from scrtune.engine.checkpoints import MAX_MODES, MODE_SHARE, modes

    rng = random.Random(11)
    cases = [random_sizes(rng) for _ in range(600)]
    total = 10 << 56
    share_at = int(MODE_SHARE * total)  # past 2^53: one below it is no double
    cases += [{1: [1, share_at - 1], 2: [1, total - share_at + 1]},  # covered 1 short: 2 modes
              {(1 << 53): [1, (1 << 53) - 1], 7: [1, 1]},  # a total of exactly 2^53
              {k: [1, 7] for k in range(40, 0, -1)}]  # all tied: sizes in ascending order
    for sizes in cases:
        found = []
        for fast in (True, False):
            monkeypatch.setattr(ioagg, "FAST_PATH", fast)
            found.append(modes(sizes))
        assert found[0] == found[1], sizes
    assert [m.size_bytes for m in modes(cases[-3])] == [1, 2]
    assert [m.size_bytes for m in modes(cases[-1])] == list(range(1, MAX_MODES + 1))


def test_checkpoint_summaries_alike_on_both_paths(monkeypatch):
    """checkpoints._parts: the C counts per operation (in name order), dominant write sizes
    (the Python path's where C cannot compare exactly) and bytes per file (past int64
    included) are the Python reference's, field for field; a malformed pair raises."""
    from scrtune.engine.checkpoints import _parts

    rng = random.Random(12)
    moved = [0, 1, 4096, 1 << 40, 1 << 63, 1 << 70]
    for _ in range(600):
        agg = IoAgg(start_us=0, end_us=1)
        agg.ops = {f"call{rng.randint(0, 30)}": [rng.randint(0, 9), rng.choice(moved)]
                   for _ in range(rng.choice([0, 1, 6, 20]))}
        agg.write_sizes = random_sizes(rng)
        agg.file_bytes_written = {f"/ckpt/f{i}": rng.choice(moved) + rng.randint(0, 9)
                                  for i in range(rng.choice([0, 1, 2, 7, 40]))}
        found = []
        for fast in (True, False):
            monkeypatch.setattr(ioagg, "FAST_PATH", fast)
            found.append(msgspec.json.encode(_parts(agg, True)))
        assert found[0] == found[1]
    monkeypatch.setattr(ioagg, "FAST_PATH", True)
    agg = IoAgg(start_us=0, end_us=1, ops_table={"write": [1]})
    with pytest.raises(IndexError):
        _parts(agg, True)


def test_shares_rounded_as_python_rounds_them():
    """top_sizes rounds each share in C: the same float as round(bytes / total, 4), near
    ties included (hundreds of the cases below fall within 10^-6 of one), exact ties of the
    decimal (x.xxxx5) included, and a share of the whole."""
    from scrtune.engine.checkpoints import MAX_MODES, MODE_SHARE, SHARE_DIGITS, _top_sizes

    rng = random.Random(5)
    pairs = [(0, 1), (1, 1), (1, 3), (2, 3), (1, 20000), (3, 20000), (5, 20000),
             (1 << 52, (1 << 53) - 1), (1, (1 << 53) - 1)]
    for _ in range(4000):
        total = rng.choice([20000 * rng.randint(1, 10**9), rng.randint(1, (1 << 53) - 1),
                            rng.randint(1, 10**6)])
        part = (2 * rng.randint(0, 9999) + 1) * (total // 20000) if rng.random() < 0.3 \
            and total % 20000 == 0 else rng.randint(0, total)
        pairs.append((part, total))
    near_ties = 0
    for part, total in pairs:
        sizes = {1: [1, part], 2: [1, total - part]} if part < total else {1: [1, part]}
        got = ioagg._fastagg.top_sizes(sizes, MODE_SHARE, MAX_MODES, SHARE_DIGITS)
        assert got is not None and got == _top_sizes(sizes), (part, total)
        for _, _, moved, share in got[1]:
            assert share == round(moved / total, SHARE_DIGITS), (moved, total)
        scaled = part / total * 10**SHARE_DIGITS
        near_ties += abs(scaled - int(scaled) - 0.5) < 1e-6
    assert near_ties > 250


def test_claim_finds_the_windows_numpy_finds(monkeypatch):
    """timeline._claim_groups: the C search (the previous row's window tried first) gives each
    row the window searchsorted does, on runs in time order, rows out of order, rows before the
    first window, past every end, in gaps, and windows sharing a start or overlapping."""
    rng = random.Random(11)
    for case in range(400):
        windows = rng.randint(1, 12)
        starts = np.sort(np.array([rng.randint(0, 1000) for _ in range(windows)], dtype=np.int64))
        if case % 4 == 0:  # shared starts
            starts[1:] = np.maximum(starts[1:], starts[:-1] + rng.choice([0, 0, 5]))
        ends = starts + np.array([rng.choice([0, 3, 40, 400]) for _ in range(windows)],
                                 dtype=np.int64)
        ts = np.array([rng.randint(-50, 1500) for _ in range(rng.randint(0, 80))],
                      dtype=np.int64)
        if case % 2:  # mostly in time order, as a trace's rows come
            ts.sort()
        results = []
        for fast in (True, False):
            monkeypatch.setattr(ioagg, "FAST_PATH", fast)
            group, taken = timeline._claim_groups(ts, starts, ends)
            results.append((group.tolist(), taken))
        assert results[0] == results[1], (starts.tolist(), ends.tolist(), ts.tolist())
        assert results[1][1] == sum(g >= 0 for g in results[1][0])


def test_claim_refuses_columns_that_do_not_fit():
    one = np.zeros(1, dtype=np.int64)
    with pytest.raises(ValueError):
        ioagg._fastagg.claim(one, np.zeros(2, dtype=np.int64), one, one.copy())
    with pytest.raises(ValueError):
        ioagg._fastagg.claim(one, one, one, np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError):
        ioagg._fastagg.claim(one, one, np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int32))


def _gathered(columns, at, name_map, file_map) -> list[list[int]]:
    rows = Rows.gather(columns, at, name_map, file_map)
    return [getattr(rows, field).tolist() for field in ioagg.ROW_FIELDS]


def test_rows_gather_as_numpy_takes_them(monkeypatch):
    """Rows.gather: the C pass gives the rows, ends and mapped codes numpy's takes give, with
    rows in any order and repeated, files of code -1 (the map's last entry) and ends that
    wrap past int64."""
    rng = np.random.default_rng(5)
    for case in range(200):
        count, names, files = int(rng.integers(1, 60)), int(rng.integers(1, 9)), \
            int(rng.integers(0, 9))
        columns = {field: rng.integers(-BIG, BIG, count) for field in
                   ("ts_us", "dur_us", "size_bytes", "calls")}
        columns["name"] = rng.integers(0, names, count)
        columns["file"] = rng.integers(-1, files, count)
        at = rng.integers(0, count, int(rng.integers(0, 2 * count)))
        if case % 3 == 0:
            at.sort()
        name_map = rng.integers(0, 1000, names)
        file_map = np.append(rng.integers(0, 1000, files), -1)
        results = []
        for fast in (True, False):
            monkeypatch.setattr(ioagg, "FAST_PATH", fast)
            results.append(_gathered(columns, at, name_map, file_map))
        assert results[0] == results[1]


def test_gather_refuses_rows_and_codes_out_of_range():
    columns = {field: np.zeros(3, dtype=np.int64) for field in
               ("ts_us", "dur_us", "name", "file", "size_bytes", "calls")}
    maps = np.zeros(2, dtype=np.int64), np.zeros(2, dtype=np.int64)
    assert _gathered(columns, np.array([2, 0]), *maps)[0] == [0, 0]
    for at in ([3], [-1]):
        with pytest.raises(IndexError):
            Rows.gather(columns, np.array(at), *maps)
    for field, code in (("name", 2), ("name", -3), ("file", 2), ("file", -3)):
        bad = dict(columns, **{field: np.array([0, code, 0])})
        with pytest.raises(IndexError):
            Rows.gather(bad, np.array([0, 1]), *maps)
    with pytest.raises(ValueError):  # a column shorter than the others
        Rows.gather(dict(columns, calls=np.zeros(2, dtype=np.int64)), np.array([0]), *maps)
