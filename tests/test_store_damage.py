"""Issue 45: a daemon's state file that is damaged, empty, deleted, or beside a file it cannot
remove. A real daemon subprocess each time: it says what is wrong, keeps serving, and loses
no recorded event it can still read."""

from __future__ import annotations

import os
import random
import time

from scrtune.goodput import salvage
from scrtune.goodput.store import Store, StoredEvent
from tests.test_daemon import client_for, start_daemon, stop


def _event(step: int) -> StoredEvent:
    return StoredEvent(job="job", run=1, kind="step_finished", wall_s=1.7e9 + step, step=step,
                       detail="x" * 200, record_id=f"r-{step}")


def _stored(path: str) -> int:
    store = Store(path, read_only=True)
    try:
        return store.event_count()
    finally:
        store.close()


def _log(proc) -> str:
    return proc.log.read()


def _serves(directory: str, step: int) -> None:
    """`status` answers, and a new record is stored."""
    client = client_for(directory)
    status = client.status()
    assert status is not None and status.ok, status
    reply = client.record("job", "step_finished", time.time(), step=step)
    assert reply is not None and reply.ok, reply


def test_a_state_file_with_garbage_in_its_middle_is_moved_aside_and_its_events_kept(tmp_path):
    """It once started, then failed every `status` and refused every record for good."""
    directory = tmp_path / "d"
    directory.mkdir(mode=0o700)
    path = str(directory / "state.sqlite")
    store = Store(path)
    for step in range(3000):
        store.record(_event(step), 0.0)
    store.close()
    size = os.path.getsize(path)
    with open(path, "r+b") as handle:  # a page in the middle of the events' table
        handle.seek(size // 2 // 4096 * 4096)
        handle.write(random.Random(45).randbytes(4096))
    proc = start_daemon(str(directory))
    try:
        _serves(str(directory), 5000)
        log = _log(proc)
    finally:
        stop(proc)
    assert "is damaged" in log and "moved to" in log, log
    [aside] = [n for n in os.listdir(directory) if ".damaged-" in n and not n.endswith(
        ("-wal", "-shm"))]
    assert os.path.getsize(directory / aside) == size  # kept, never deleted
    recovered = _stored(path) - 1  # the record above
    assert 2500 <= recovered < 3000, recovered  # a damaged page costs its own rows


def test_an_empty_or_missing_state_file_is_said(tmp_path):
    directory = tmp_path / "d"
    directory.mkdir(mode=0o700)
    (directory / "state.sqlite").write_bytes(b"")
    proc = start_daemon(str(directory))
    try:
        _serves(str(directory), 1)
    finally:
        stop(proc)
    assert "was empty (0 bytes)" in _log(proc)
    os.unlink(directory / "state.sqlite")
    (directory / "state.sqlite.stats.0123456789ab").write_bytes(b"left")  # an earlier one's
    proc = start_daemon(str(directory))
    stop(proc)
    assert "state.sqlite is missing" in _log(proc)


def test_a_state_file_deleted_under_the_daemon_is_written_again_with_every_event(tmp_path):
    """Its writes once went to the unlinked file, lost at the next start."""
    directory = tmp_path / "d"
    directory.mkdir(mode=0o700)
    path = str(directory / "state.sqlite")
    proc = start_daemon(str(directory))  # snapshots every 0.2 s
    try:
        for step in range(3):
            _serves(str(directory), step)
        os.unlink(path)
        deadline = time.monotonic() + 60
        while not os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        for step in range(3, 5):
            _serves(str(directory), step)
    finally:
        stop(proc)
    assert "deleted under the daemon: written again" in _log(proc)
    assert _stored(path) == 5


def test_a_leftover_snapshot_file_that_cannot_be_removed_does_not_stop_the_daemon(tmp_path):
    """It once exited 1 with a raw traceback, and stayed down. (A directory stands in for the
    file: unlink fails on it as on a read-only file system, for root too.)"""
    directory = tmp_path / "d"
    directory.mkdir(mode=0o700)
    path = str(directory / "state.sqlite")
    store = Store(path)
    store.record(_event(1), 0.0)
    store.close()
    stuck = directory / "state.sqlite.stats.0123456789ab"
    stuck.mkdir()
    (stuck / "inside").write_text("x")
    proc = start_daemon(str(directory))
    try:
        _serves(str(directory), 2)
    finally:
        assert stop(proc) == 0
    assert _stored(path) == 2 and stuck.exists()


def test_a_damaged_files_events_are_copied_a_thousand_rows_a_transaction(tmp_path):
    """They were copied a row a transaction: a sync each, and on a busy machine a scheduling
    wait each (a 3000-event file took 25 s to open, past the daemon's start-up wait)."""
    source = tmp_path / "damaged.sqlite"
    store = Store(str(source))
    for step in range(3000):
        store.record(_event(step), 0.0)
    store.close()
    target = Store(str(tmp_path / "fresh.sqlite"))
    statements: list[str] = []
    target._db.set_trace_callback(statements.append)
    copied, claimed = salvage.copy_events(str(source), target._db)
    target.close()
    assert copied == claimed == 3000
    inserts = [s for s in statements if s.lstrip().upper().startswith("INSERT")]
    begins = [s for s in statements if s.strip().upper() == "BEGIN"]
    assert len(inserts) == 3000 and len(begins) == 3, statements[:5]
    assert _stored(str(tmp_path / "fresh.sqlite")) == 3000
