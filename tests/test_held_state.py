"""A statistics state carries the C fold's held sums as rows, unsettled (engine/held.py): what
is decoded, merged and fed on sums as the settled tables would, a fold under another
state's string tables settles first, damaged rows are refused, and the Python settle of a
build without the C module reads them as the C one does."""

from __future__ import annotations

import copy
import logging
import random

import msgspec
import numpy as np
import pytest

from scrtune.daemon.offsets import SourceOffsets
from scrtune.daemon.protocol import Lines
from scrtune.daemon.service import Service
from scrtune.engine import held as held_module
from scrtune.engine import ioagg
from scrtune.engine.ioagg import IoAgg
from scrtune.engine.state import StatsState
from scrtune.engine.stats import Stats
from scrtune.engine.summary import finish
from scrtune.events.reader import expand_paths
from scrtune.goodput.store import Store
from scrtune.intents.inputs import SystemProfile
from tests.conftest import data, only_file
from tests.test_fast_fold import as_text, copied, random_case
from tests.test_held_sums import folded_twice
from tests.test_merge import as_json, batches

needs_c_fold = pytest.mark.skipif(ioagg.fast_agg() is None,
                                  reason="C fold not built or switched off")


def dlio_batches():
    return [b for p in expand_paths([data("dlio_train_ckpt")]) for b in batches(p, 16384)]


def held_windows(stats: Stats) -> int:
    return sum(1 for t in stats.timelines.values() for w in t.windows if "_held" in w.io.__dict__)


@needs_c_fold
def test_a_state_keeps_held_sums_as_rows_and_a_restored_one_feeds_on_exactly():
    """Encoding settles nothing; a daemon restored from the state under other string
    tables (it had seen another trace first) and fed the rest summarises as one that saw
    everything."""
    dlio = dlio_batches()
    other = list(batches(only_file("v2_python_api"), 16384))
    first, half = Stats(), 0
    while not held_windows(first):  # until a window holds sums (this trace's come late)
        first.add(dlio[half])
        half += 1
    assert half < len(dlio) - 1
    before = held_windows(first)
    saved = first.to_bytes()
    assert before > 0 and held_windows(first) == before  # nothing settled to encode
    encoded = msgspec.msgpack.decode(saved, type=StatsState)
    assert any(w.io.held_rows for t in encoded.timelines for w in t.windows)

    restored = Stats()
    for batch in other:  # names and files coded in another order than `first` coded them
        restored.add(batch)
    restored.merge_bytes(saved)
    assert held_windows(restored) > 0
    whole = Stats()
    for batch in other + dlio:
        whole.add(batch)
    for batch in dlio[half:]:
        restored.add(batch)
    assert as_json(finish(restored)) == as_json(finish(whole))


@needs_c_fold
def test_held_rows_adopted_from_another_state_are_encoded_under_our_codes():
    """Statistics that merged a state coded in another order and are then encoded again (an
    MPI reduction in steps, the daemon's copy for a summary) summarise as before: the rows
    held under the other state's codes are settled, not sent with codes naming our strings.
    A state merged into empty statistics (a daemon restoring its snapshot) codes as ours:
    its rows stay held through the next encoding."""
    dlio = dlio_batches()
    first, half = Stats(), 0
    while not held_windows(first):
        first.add(dlio[half])
        half += 1
    saved = first.to_bytes()
    merged = Stats()
    for batch in batches(only_file("v2_python_api"), 16384):  # other codes first
        merged.add(batch)
    merged.merge_bytes(saved)
    assert held_windows(merged) > 0
    again = Stats.from_bytes(merged.to_bytes())
    assert as_json(finish(again)) == as_json(finish(merged))

    restored = Stats.from_bytes(saved)
    held = held_windows(restored)
    assert held == held_windows(first) > 0
    restored.to_bytes()
    assert held_windows(restored) == held  # nothing settled to encode it
    for batch in dlio[half:]:
        restored.add(batch)
        first.add(batch)
    assert as_json(finish(restored)) == as_json(finish(first))


@needs_c_fold
def test_a_fold_under_other_string_tables_settles_what_is_held_first():
    """Sums held under one table of names and files, then folded under another coding the
    same strings differently (a window restored from a state, fed on): each row keeps its
    own names."""
    rng = random.Random(32)
    folded = 0
    for _ in range(300):
        aggs, group, rows, table = random_case(rng)
        other = ioagg.CallTable(table.names[::-1], table.files[::-1],
                                table.is_write[::-1].copy(), table.is_read[::-1].copy())
        recoded = ioagg.Rows(**{name: getattr(rows, name).copy() for name in ioagg.ROW_FIELDS})
        recoded.name = len(table.names) - 1 - rows.name
        recoded.file = np.where(rows.file >= 0, len(table.files) - 1 - rows.file, rows.file)
        plain, held = copied(aggs), copied(aggs)
        for into, defer in ((plain, False), (held, True)):
            ioagg.add_grouped(into, group, rows, table, defer=defer)
            ioagg.add_grouped(into, group, recoded, other, defer=defer)
        folded += sum(1 for agg in held if agg.__dict__)
        for agg in held:
            agg.settle()
        assert as_text(held) == as_text(plain)
    assert folded > 200


@needs_c_fold
def test_the_python_settle_reads_held_rows_as_the_c_one():
    rng = random.Random(31)
    compared = 0
    for _ in range(300):
        _, held = folded_twice(rng, defer=True, read_between=False)
        for agg in held:
            if "_held" not in agg.__dict__:
                continue
            twin = IoAgg(**{name: copy.deepcopy(getattr(agg, name))  # the stored tables
                            for name in agg.__struct_fields__})
            twin.__dict__["_held"] = list(agg.__dict__["_held"])
            held_module.settle_py(twin)
            agg.settle()
            assert as_text([twin]) == as_text([agg]) and not twin.__dict__
            compared += 1
    assert compared > 200


def _damaged(saved: bytes, damage) -> bytes:
    state = msgspec.msgpack.decode(saved, type=StatsState)
    window = next(w for t in state.timelines for w in t.windows if w.io.held_rows)
    window.io.held_rows[0] = damage(window.io.held_rows[0])
    return msgspec.msgpack.encode(state)


@needs_c_fold
@pytest.mark.parametrize("damage, named", [
    (lambda rows: rows[:-1], "rows of 32 bytes"),
    (lambda rows: (9).to_bytes(8, "little") + rows[8:], "no known kind"),
    (lambda rows: rows[:8] + (10**6).to_bytes(8, "little") + rows[16:], "out of range"),
])
def test_damaged_held_rows_are_refused_by_name(damage, named):
    stats = Stats()
    for batch in dlio_batches():
        stats.add(batch)
    with pytest.raises(ValueError, match=named):
        Stats.from_bytes(_damaged(stats.to_bytes(), damage))


def test_a_daemon_sets_aside_a_state_it_cannot_read(tmp_path, caplog):
    """An older version's state (or a damaged one) is not a crash: the daemon starts afresh,
    offsets too, so forwarders resend their files from the start."""
    store = Store(str(tmp_path / "s.sqlite"))
    old = msgspec.msgpack.decode(Stats().to_bytes())
    old["version"] = 2
    offsets = SourceOffsets()
    assert offsets.accept(Lines(source="/t/a.pfw", start=0, end=100, data=b""))
    store.put_many({"stats": msgspec.msgpack.encode(old),
                    "offsets": msgspec.msgpack.encode(offsets.accepted)})
    with caplog.at_level(logging.WARNING, logger="scrtune.daemon"):
        service = Service(store, SystemProfile())
    assert "cannot be read" in caplog.text and "version 2" in caplog.text
    assert service.offsets.of(["/t/a.pfw"]) == {"/t/a.pfw": 0}
    assert not service.stats.timelines and service.stats.counts.records == 0
