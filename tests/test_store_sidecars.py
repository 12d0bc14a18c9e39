"""Large values beside the state file (goodput/sidecar.py): written before the commit that
names them, removed when replaced or left unnamed by a crash, refused when damaged."""

from __future__ import annotations

import os

import pytest

from scrtune.daemon.intake import parse_messages
from scrtune.daemon.service import Service
from scrtune.engine.replay import EXAMPLE_TRACE
from scrtune.errors import StoreError, StoreUnavailable
from scrtune.goodput import sidecar
from scrtune.goodput.store import Store
from scrtune.intents.inputs import SystemProfile
from tests.tracing.largetrace import _shifted, source_lines

LARGE = os.urandom(sidecar.LARGE_VALUE_BYTES + 17)


def _sidecar_files(tmp_path) -> list[str]:
    return sorted(n for n in os.listdir(tmp_path) if ".stats." in n)


def test_a_large_value_lives_in_one_file_beside_the_state_file(tmp_path):
    store = Store(str(tmp_path / "state.sqlite"))
    store.put_many({"stats": LARGE, "offsets": b"small"}, synced=False)
    files = _sidecar_files(tmp_path)
    assert len(files) == 1 and os.path.getsize(tmp_path / files[0]) == len(LARGE)
    assert os.stat(tmp_path / files[0]).st_mode & 0o777 == 0o600
    assert store._db.execute("SELECT COUNT(*) FROM blobs WHERE key = 'stats'").fetchone() == (0,)
    store.put_many({"stats": LARGE[::-1]})  # replaced: the old file goes after the commit
    assert len(_sidecar_files(tmp_path)) == 1 and _sidecar_files(tmp_path) != files
    store.close()
    reader = Store(str(tmp_path / "state.sqlite"), read_only=True)
    assert reader.get("stats") == LARGE[::-1] and reader.get("offsets") == b"small"
    again = Store(str(tmp_path / "state.sqlite"))
    again.put_many({"stats": b"small now"})
    assert _sidecar_files(tmp_path) == [] and again.get("stats") == b"small now"


def test_a_failed_commit_leaves_the_previous_value_and_no_new_file(tmp_path):
    store = Store(str(tmp_path / "state.sqlite"))
    store.put_many({"stats": LARGE})
    files = _sidecar_files(tmp_path)
    with pytest.raises(StoreUnavailable):
        store.put_many({"stats": LARGE[::-1], "offsets": object()})  # type: ignore[dict-item]
    assert _sidecar_files(tmp_path) == files and store.get("stats") == LARGE


def test_a_file_no_row_names_is_removed_at_the_next_opening(tmp_path):
    """A crash between writing the file and committing leaves it unnamed; files that merely
    look alike (another state file's, another name) stay."""
    store = Store(str(tmp_path / "state.sqlite"))
    store.put_many({"stats": LARGE})
    named = _sidecar_files(tmp_path)
    store.close()
    for name in ("state.sqlite.stats.0123456789ab", "other.sqlite.stats.0123456789ab",
                 "state.sqlite.x.stats.0123456789ab", "state.sqlite.stats.notes"):
        (tmp_path / name).write_bytes(b"?")
    Store(str(tmp_path / "state.sqlite"))
    assert sorted(n for n in os.listdir(tmp_path) if ".stats." in n) == sorted(
        named + ["other.sqlite.stats.0123456789ab", "state.sqlite.x.stats.0123456789ab",
                 "state.sqlite.stats.notes"])


@pytest.mark.parametrize("damage", ["cut", "changed", "gone"])
def test_a_damaged_file_is_refused_by_name(tmp_path, damage):
    store = Store(str(tmp_path / "state.sqlite"))
    store.put_many({"stats": LARGE})
    path = tmp_path / _sidecar_files(tmp_path)[0]
    if damage == "cut":
        path.write_bytes(LARGE[:-1])
    elif damage == "changed":
        path.write_bytes(LARGE[:-1] + b"\0" if LARGE[-1] else LARGE[:-1] + b"\1")
    else:
        path.unlink()
    with pytest.raises(StoreError, match=f"stats unreadable: .*{path.name}"):
        store.get("stats")


def test_a_daemon_with_a_damaged_snapshot_starts_afresh(tmp_path, caplog):
    """The statistics of a busy daemon go beside the file; damaged, the next daemon warns and
    starts afresh (its offsets too, so forwarders resend everything) rather than failing."""
    lines = [line for line in source_lines(EXAMPLE_TRACE) if b'"ph":4' not in line]
    store = Store(str(tmp_path / "state.sqlite"))
    service = Service(store, SystemProfile())
    for r in range(800):  # time moving on, as a job's trace
        service.take(parse_messages([b"\n".join(
            _shifted(line, r * 1_000_000, r * len(lines), r * 1000) for line in lines)]))
    service.snapshot()
    files = _sidecar_files(tmp_path)
    assert len(files) == 1, "statistics this size are expected beside the file"
    assert Service(store, SystemProfile()).stats.to_bytes() == service.stats.to_bytes()
    (tmp_path / files[0]).write_bytes(b"\0" * 10)
    restarted = Service(store, SystemProfile())
    assert restarted.counters.records == 0 and not restarted.stats.timelines
    assert "cannot be read" in caplog.text and files[0] in caplog.text
