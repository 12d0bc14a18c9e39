"""The engine holds the latest checkpoint windows only: a long run's (or a hostile stream's)
memory stays flat, the listed checkpoints are the tail of what an unbounded replay lists, and
the result does not depend on how files, chunks or ranks were split."""

from __future__ import annotations

import gzip
import os
import re

import msgspec
import pytest

from scrtune.daemon.intake import parse_messages
from scrtune.engine.replay import ReplayOptions, read_file, replay
from scrtune.engine.retire import held
from scrtune.engine.stats import Stats
from scrtune.engine.summary import finish
from tests.conftest import only_file
from tests.tracing.largetrace import build

RANKS = 3


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[str]:
    """Three ranks of one run, 20 checkpoints and 20 restores each (a real trace repeated)."""
    folder = tmp_path_factory.mktemp("ranks")
    paths = []
    for rank in range(RANKS):
        path = folder / f"run-{rank}-app.pfw.gz"
        build(only_file("v2_python_api"), str(path), 18_000, pid_offset=rank)
        paths.append(str(path))
    return paths


def _summary(paths: list[str], listed: int | None, workers: int = 1) -> dict:
    summary = replay(paths, ReplayOptions(workers=workers, listed_windows=listed))
    return msgspec.to_builtins(summary)


def _without_index(checkpoints: list[dict]) -> list[dict]:  # indices start at 0 in each
    return [{k: v for k, v in c.items() if k != "index"} for c in checkpoints]


# listed // 8, how far a cut may move back to a gap, is 2 or more here (3 ranks)
@pytest.mark.parametrize("listed", [16, 30, 61])
def test_listed_checkpoints_are_the_tail_of_all(ranks, listed):
    everything = _summary(ranks, None)
    bounded = _summary(ranks, listed)
    kept = sum(c["ranks"] for c in bounded["checkpoints"] + bounded["restores"])
    assert listed <= kept <= listed + listed // 8
    assert bounded["unlisted_windows"] + kept == \
        sum(c["ranks"] for c in everything["checkpoints"] + everything["restores"])
    for kind in ("checkpoints", "restores"):
        shown = _without_index(bounded[kind])
        assert shown == _without_index(everything[kind])[-len(shown):]
        assert all(c["ranks"] == RANKS for c in bounded[kind])  # no checkpoint cut in two
    intervals = [(i["interval_us"], i["compute_us"]) for i in bounded["intervals"]]
    assert intervals == [(i["interval_us"], i["compute_us"])
                         for i in everything["intervals"][-len(intervals):]]
    for total in ("write_sizes", "write_size_histogram", "ops", "bandwidth", "records"):
        assert bounded[total] == everything[total]
    assert bounded["unlisted_until_us"] < bounded["checkpoints"][0]["start_us"]
    assert any("--listed-windows 0" in w for w in bounded["warnings"])
    assert everything["unlisted_windows"] == 0


def test_the_bound_does_not_depend_on_the_split(ranks):
    """Files in either order, small chunks, one Stats or per-file Stats merged (as MPI ranks
    are), through bytes: the same summary."""
    listed = 30
    forward = _summary(ranks, listed)
    assert _summary(list(reversed(ranks)), listed) == forward
    assert _summary(ranks, listed, workers=2) == forward
    parts = []
    for path in reversed(ranks):
        part = Stats(listed_windows=listed)
        read_file(part, path)
        parts.append(part)
    merged = Stats(listed_windows=listed)
    for part in parts:
        merged.merge_bytes(part.to_bytes())
    as_json = msgspec.to_builtins(finish(merged))
    assert {k: v for k, v in as_json.items() if k != "generations"} == \
        {k: v for k, v in forward.items() if k != "generations"}


def _regions(first_ts_us: int, count: int) -> bytes:
    """Checkpoint regions only, 10 µs apart: what a buggy or hostile sender could stream."""
    return b"\n".join(
        b'{"id":%d,"name":"save_checkpoint","cat":"checkpoint","pid":7,"tid":7,"ts":%d,'
        b'"dur":5,"ph":1,"args":{"epoch":%d}}' % (i, first_ts_us + 10 * i, i)
        for i in range(count))


def test_a_stream_of_regions_holds_a_bounded_number_of_windows():
    listed = 200
    stats = Stats(max_processes=16, listed_windows=listed)
    for block in range(20):
        for batch in parse_messages([_regions(10 ** 9 + block * 10 ** 6, 1000)]).batches:
            stats.add(batch)
        assert held(stats.timelines) <= listed + listed // 2
    assert held(stats.timelines) + stats.retired.windows == 20_000
    assert stats.retired.saves == stats.retired.windows
    copy = Stats.from_bytes(stats.to_bytes(), listed_windows=listed)  # as the daemon's recommend
    assert copy.retired == stats.retired
    summary = finish(copy)
    assert summary.unlisted_windows == 20_000 - listed


def test_cli_refuses_a_negative_bound(run_cli, ranks):
    result = run_cli("replay", ranks[0], "--listed-windows", "-1")
    assert result.returncode == 2
    assert "--listed-windows" in result.stderr
    assert "Traceback" not in result.stderr


def test_cli_says_what_it_left_out(run_cli, ranks):
    result = run_cli("replay", *ranks, "--listed-windows", "12")
    assert result.returncode == 0, result.stderr
    assert "only the latest 12 checkpoint windows" in result.stdout
    assert re.search(r"^restores: \d+ \(the latest: earlier ones are not listed\)$",
                     result.stdout, re.MULTILINE)


@pytest.fixture(scope="module")
def wide_run(tmp_path_factory) -> list[str]:
    """Forty ranks of one run saving and restoring together, 6 checkpoints and 6 restores."""
    folder = tmp_path_factory.mktemp("wide")
    paths = []
    for rank in range(40):
        path = folder / f"wide-{rank:02d}-app.pfw.gz"
        build(only_file("v2_python_api"), str(path), 2_000, pid_offset=rank, level=1)
        paths.append(str(path))
    return paths


# (ranks, listed): a checkpoint wider than the slack of the cut (listed // 4), wider than the
# bound itself, and cut between ranks by a pass while reading (3 of 5 ranks held at the end)
@pytest.mark.parametrize("ranks, listed", [(20, 24), (20, 64), (40, 24), (5, 3)])
def test_a_checkpoint_is_listed_with_all_its_ranks_or_not_at_all(wide_run, ranks, listed):
    everything = _summary(wide_run[:ranks], None)
    bounded = _summary(wide_run[:ranks], listed)
    assert all(c["ranks"] == ranks for c in everything["checkpoints"] + everything["restores"])
    for kind in ("checkpoints", "restores"):
        shown = _without_index(bounded[kind])
        assert all(c["ranks"] == ranks for c in shown)
        assert shown == _without_index(everything[kind])[len(everything[kind]) - len(shown):]
    kept = sum(c["ranks"] for c in bounded["checkpoints"] + bounded["restores"])
    assert kept <= listed + listed // 4
    for total in ("write_sizes", "write_size_histogram", "ops", "bandwidth", "records"):
        assert bounded[total] == everything[total]
    if ranks > listed + listed // 4 or ranks > listed == 3:
        assert kept == 0
        assert any(w.startswith("no checkpoint is listed") for w in bounded["warnings"])
    else:
        assert kept >= ranks
    assert _summary(list(reversed(wide_run[:ranks])), listed) == bounded


def _lines(folder: str) -> bytes:
    from scrtune.events.reader import expand_paths

    return b"".join(gzip.open(path).read() if path.endswith(".gz") else open(path, "rb").read()
                    for path in expand_paths([folder]))


def _take_settled(retired, window) -> None:
    """The reference: one window at a time, its tables settled and added."""
    from scrtune.engine.ioagg import add_pair_tables

    retired.until_us = max(retired.until_us, window.io.start_us)
    retired.reach_us = max(retired.reach_us, window.io.end_us)
    if window.kind == "save":
        retired.saves += 1
        retired.save_write_calls += window.io.write_calls
        add_pair_tables(retired.save_sizes, [window.io.write_sizes])
    else:
        retired.restores += 1
        add_pair_tables(retired.restore_sizes, [window.io.write_sizes])


def _retired_both_ways(windows_of) -> tuple[bytes, bytes]:
    """Retired built by take_all and by the reference one window at a time, from equal
    windows."""
    from scrtune.engine.retire import Retired

    together, one_by_one = Retired(), Retired()
    together.take_all(windows_of())
    for window in windows_of():
        _take_settled(one_by_one, window)
    return msgspec.msgpack.encode(together), msgspec.msgpack.encode(one_by_one)


def _held_windows(stats_of) -> list:
    stats = stats_of()
    return [w for t in stats.timelines.values() for w in t.windows]


@pytest.mark.parametrize("settle_some", [False, True])
def test_retiring_windows_together_adds_what_retiring_each_adds(ranks, settle_some):
    """Held write sizes are summed from the rows (in the order the sizes first appear),
    exactly as settling each window's tables and adding them; a window settled already
    sends the batch the per-window way."""
    from scrtune.engine import ioagg

    if ioagg.fast_agg() is None:
        pytest.skip("nothing is held without the C fold")

    def stats_of() -> Stats:
        stats = Stats(listed_windows=None)
        for path in (*ranks, os.path.dirname(only_file("dlio_train_ckpt"))):
            for batch in parse_messages([_lines(path)]).batches:
                stats.add(batch)
        return stats

    def windows_of() -> list:
        windows = _held_windows(stats_of)
        if settle_some:  # reading a table settles the window's
            settled = next(w for w in windows[len(windows) // 2:] if w.kind == "save")
            assert settled.io.write_sizes and "_held" not in settled.io.__dict__
        return windows

    held_count = sum("_held" in w.io.__dict__ for w in windows_of())
    assert held_count > 10
    together, one_by_one = _retired_both_ways(windows_of)
    assert together == one_by_one


_WRITE = (b'{"id":%d,"name":"write","cat":"POSIX","pid":1,"tid":1,"ts":%d,"dur":1,"ph":1,'
          b'"args":{"ret":%d,"fhash":"ab"}}')
_SAVE = (b'{"id":%d,"name":"checkpoint.save","cat":"CHECKPOINT","pid":1,"tid":1,"ts":%d,'
         b'"dur":50,"ph":1,"args":{}}')


def _windows_of(lines: list[bytes]) -> list:
    """The windows of a fresh, unbounded Stats fed `lines` as one message."""
    stats = Stats(listed_windows=None)
    for batch in parse_messages([b"\n".join(lines)]).batches:
        stats.add(batch)
    return [w for t in stats.timelines.values() for w in t.windows]


def test_retired_sums_past_int64_add_as_window_by_window():
    """Two writes of 2^62 bytes in two windows: their sum passes int64, and is what adding
    the windows' tables one by one gives."""
    from scrtune.engine import ioagg

    if ioagg.fast_agg() is None:
        pytest.skip("nothing is held without the C fold")

    def windows_of() -> list:
        return _windows_of([_SAVE % (1, 10), _WRITE % (2, 20, 1 << 62),
                            _WRITE % (3, 30, 1 << 62), _SAVE % (4, 100), _WRITE % (5, 110, 5)])

    windows = windows_of()
    assert len(windows) == 2 and all("_held" in w.io.__dict__ for w in windows)
    together, one_by_one = _retired_both_ways(windows_of)
    assert together == one_by_one


def test_a_settled_window_among_held_ones_keeps_the_order_sizes_first_came_in():
    """Sizes 5 (held), then 7 (a window whose tables were read, settled): retired in that
    order, as adding the tables one by one; summing held rows after settled tables would put
    7 first."""
    from scrtune.engine import ioagg

    if ioagg.fast_agg() is None:
        pytest.skip("nothing is held without the C fold")

    def windows_of() -> list:
        windows = _windows_of([_SAVE % (1, 10), _WRITE % (2, 20, 5), _SAVE % (3, 100),
                               _WRITE % (4, 110, 7)])
        assert windows[1].io.write_sizes  # read: settled
        return windows

    windows = windows_of()
    assert "_held" in windows[0].io.__dict__ and "_held" not in windows[1].io.__dict__
    together, one_by_one = _retired_both_ways(windows_of)
    assert together == one_by_one
