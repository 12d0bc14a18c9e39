"""Issue 12: every record a training loop sends is stored exactly once, across a daemon killed,
stopped, restarted, on a full disk and on a read-only store, and the loop never waits on it.

The loop is a real process using the real client; the daemon a real subprocess; the disk is
made full with RLIMIT_FSIZE on the daemon (SQLite then fails with SQLITE_FULL, as on a full
file system) and the store read-only with the immutable attribute (root) or its mode.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from scrtune.client.connection import DaemonClient
from scrtune.daemon.endpoints import default_endpoints
from tests.test_daemon import start_daemon, stop

pytestmark = pytest.mark.alone  # it bounds a call's slowest wait (tests/alone.py)

STOP_S = float(os.environ.get("SCRTUNE_CHAOS_STOP_S", "30"))  # the SIGSTOP
CLIENT_TIMEOUT_S = 2.0  # a call that waited on the daemon would take at least this

LOOP = """
import json, os, sys, time
from scrtune.client.connection import DaemonClient
endpoint, spool, stop_file, timeout_s = sys.argv[1:5]
client = DaemonClient(endpoint, timeout_s=float(timeout_s), retries=1, spool_dir=spool)
step, slowest = 0, 0.0
while not os.path.exists(stop_file):
    started = time.perf_counter()
    client.record_later("chaos", "step_finished", time.time(), step=step)
    slowest = max(slowest, time.perf_counter() - started)
    step += 1
    time.sleep(0.02)
flushed = client.close(timeout_s=60)
print(json.dumps({"steps": step, "slowest_call_s": slowest, "flushed": flushed}))
"""


def _loop(directory: str, stop_file: str, spool: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", LOOP, default_endpoints(directory).requests, spool, stop_file,
         str(CLIENT_TIMEOUT_S)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _stored_steps(directory: str, job: str = "chaos") -> dict[int, int]:
    with sqlite3.connect(os.path.join(directory, "state.sqlite")) as db:
        rows = db.execute("SELECT step, COUNT(*) FROM events WHERE job = ? GROUP BY step",
                          (job,)).fetchall()
    return {int(step): int(count) for step, count in rows}


def _read_only(path: str, on: bool) -> None:
    if os.geteuid() == 0:  # root writes through any mode: the immutable attribute stops it
        subprocess.run(["chattr", "+i" if on else "-i", path], check=True)
    else:
        os.chmod(path, 0o444 if on else 0o644)


def _status(directory: str):
    return DaemonClient(default_endpoints(directory).requests, timeout_s=2, retries=0).status()


def test_every_record_is_stored_once_across_kill_stop_restart_full_disk_and_read_only(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    stop_file, store = str(tmp_path / "stop"), os.path.join(directory, "state.sqlite")
    daemon = start_daemon(directory)
    loop = _loop(directory, stop_file, str(tmp_path / "spool"))
    try:
        time.sleep(1)
        daemon.kill()  # SIGKILL: whatever was in flight is resent
        daemon.wait()
        time.sleep(1)
        daemon = start_daemon(directory)
        time.sleep(1)
        daemon.send_signal(signal.SIGSTOP)  # hung: requests queue up and are answered late
        time.sleep(STOP_S)
        daemon.send_signal(signal.SIGCONT)
        time.sleep(1)
        limits = resource.prlimit(daemon.pid, resource.RLIMIT_FSIZE)
        resource.prlimit(daemon.pid, resource.RLIMIT_FSIZE, (1, limits[1]))  # the disk is full
        time.sleep(2)
        resource.prlimit(daemon.pid, resource.RLIMIT_FSIZE, limits)
        time.sleep(1)
        stop(daemon)
        _read_only(store, True)
        try:
            daemon = start_daemon(directory)
            time.sleep(2)
            reply = _status(directory)  # reads keep working when writes cannot
            assert reply is not None and reply.ok, reply
            stop(daemon)
        finally:
            _read_only(store, False)
        daemon = start_daemon(directory)
        time.sleep(1)
    finally:
        open(stop_file, "w").close()
        out, err = loop.communicate(timeout=120)
    stop(daemon)
    assert loop.returncode == 0, err
    result = json.loads(out)
    print("chaos:", json.dumps({**result, "stored": sum(_stored_steps(directory).values())}))
    assert result["flushed"], err
    steps = _stored_steps(directory)
    missing = sorted(set(range(result["steps"])) - set(steps))
    twice = sorted(step for step, count in steps.items() if count > 1)
    assert not missing and not twice, (missing[:20], twice[:20], result)
    assert set(steps) == set(range(result["steps"]))
    # the loop never waited on the daemon: not even one request's timeout
    assert result["slowest_call_s"] < CLIENT_TIMEOUT_S / 2, result


def test_a_killed_client_s_spooled_records_are_sent_by_the_next_one(daemon, tmp_path):
    """The daemon is away while a job records and dies; the next job on the node sends them."""
    directory, proc = daemon
    stop(proc)
    spool = str(tmp_path / "spool")
    stop_file = str(tmp_path / "stop")
    loop = _loop(directory, stop_file, spool)
    time.sleep(1.5)
    loop.kill()
    loop.wait()
    assert [n for n in os.listdir(spool) if n.endswith(".spool")], "nothing was spooled"
    proc = start_daemon(directory)
    try:
        client = DaemonClient(default_endpoints(directory).requests, spool_dir=spool)
        client.record_later("next", "job_started", time.time())
        assert client.close(timeout_s=30)
        steps = _stored_steps(directory)
        assert steps and set(steps.values()) == {1}
        assert set(steps) == set(range(max(steps) + 1))  # a prefix: the killed loop's steps
        assert not [n for n in os.listdir(spool) if n.endswith(".spool")]
    finally:
        stop(proc)


def test_a_record_sent_twice_is_stored_once(daemon):
    directory, _ = daemon
    client = DaemonClient(default_endpoints(directory).requests, timeout_s=2)
    record = client._record("dup", "job_started", time.time(), -1, 0, "")
    first, second = client.request(record), client.request(record)
    assert first is not None and second is not None and first.ok and second.ok
    assert second.result["event_id"] == first.result["event_id"]
    assert second.result.get("duplicate") is True
    assert _stored_steps(directory, "dup") == {-1: 1}
