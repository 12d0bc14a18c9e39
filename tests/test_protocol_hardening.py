"""Requests that are wrong, or that meet a failure inside the daemon: the reply always carries
the request's own id and a code saying what failed, so the client knows the daemon answered."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import time

import msgspec
import pytest

from scrtune.daemon import protocol
from scrtune.daemon.protocol import ErrorCode, Status
from scrtune.daemon.service import Service
from scrtune.goodput.store import Store
from scrtune.intents.inputs import SystemProfile
from tests.conftest import SCRTUNE, free_port
from tests.test_daemon import (
    client_for,
    raw_request,
    start_daemon,
    stop,
)


@pytest.fixture
def service(tmp_path):
    store = Store(str(tmp_path / "state.sqlite"))
    yield Service(store, SystemProfile())
    store.close()


def test_an_internal_failure_is_answered_with_the_request_id(service):
    def broken(request):
        raise RuntimeError("disk on fire")

    service._handlers[Status] = broken
    reply = protocol.decode_reply(service.handle(protocol.encode(Status(request_id=4242))))
    assert not reply.ok and reply.request_id == 4242
    assert reply.error.code is ErrorCode.INTERNAL and "disk on fire" in reply.error.message
    assert service.counters.request_errors == 1


def test_request_ids_outside_int64_and_requests_without_a_version_are_refused(daemon):
    directory, _ = daemon
    for request_id in (-1, 1 << 63):
        raw = msgspec.msgpack.encode({"type": "status", "version": 1,
                                      "request_id": request_id})
        reply = raw_request(directory, raw)
        assert not reply.ok and reply.error.code is ErrorCode.BAD_ARGUMENT, reply
    unversioned = raw_request(directory, msgspec.msgpack.encode(
        {"type": "status", "request_id": 7}))
    assert not unversioned.ok and unversioned.error.code is ErrorCode.BAD_VERSION
    assert unversioned.request_id == 7
    fine = raw_request(directory, protocol.encode(Status(request_id=(1 << 63) - 1)))
    assert fine.ok and fine.request_id == (1 << 63) - 1


def test_a_second_daemon_on_the_same_directory_refuses_with_the_first_ones_pid(daemon):
    directory, first = daemon
    second = subprocess.run([*SCRTUNE, "daemon", "--dir", directory, "--foreground"],
                            capture_output=True, text=True, timeout=60)
    assert second.returncode == 2 and "Traceback" not in second.stderr
    assert f"another scrtune daemon (pid {first.pid}) serves it" in second.stderr
    assert first.poll() is None
    assert client_for(directory).status().result["pid"] == first.pid  # still the first's
    stop(first)
    again = start_daemon(directory)  # the lock goes with the process
    stop(again)


def test_the_conf_file_rewrite_never_follows_a_planted_symlink(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    prefix = tmp_path / "prefix"
    prefix.mkdir()
    conf, victim = prefix / "scr.conf", tmp_path / "victim"
    victim.write_text("precious\n")
    proc = start_daemon(directory, "--scr-conf-file", str(conf))
    try:
        # the name the rewrite used to write first: the conf file's, dot scrtune-<daemon pid>
        os.symlink(victim, f"{conf}.scrtune-{proc.pid}")
        detail = '{"save_s": 1.0, "config": "x", "steps": 5}'
        assert client_for(directory).record("j", "checkpoint_save_finished", 1000.0, 1,
                                            detail=detail).ok
    finally:
        stop(proc)
    assert victim.read_text() == "precious\n"
    assert "SCR_CACHE_BYPASS" in conf.read_text() and not conf.is_symlink()
    assert oct(conf.stat().st_mode & 0o777) == "0o644"
    planted = f"scr.conf.scrtune-{proc.pid}"
    assert sorted(p.name for p in prefix.iterdir()) == ["scr.conf", planted]  # no leftovers


def test_an_explicit_directory_others_can_enter_is_refused(run_cli, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o770)  # umask 002: the group may read the store and send records
    daemon = run_cli("daemon", "--dir", str(shared), "--foreground", timeout=60)
    assert daemon.returncode == 2 and daemon.stderr.count("\n") == 1
    assert f"{shared}: mode 0770 lets others in" in daemon.stderr
    assert not list(shared.iterdir())  # no socket, no store
    status = run_cli("status", "--dir", str(shared))
    assert status.returncode == 2 and "lets others in" in status.stderr
    # the client library never raises into the training job: it finds no daemon
    from scrtune.client import DaemonClient

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SCRTUNE_DIR", str(shared))
        client = DaemonClient(timeout_s=0.1, retries=0)
        assert client.status() is None  # no daemon, no exception
    fresh = tmp_path / "fresh"
    assert run_cli("status", "--dir", str(fresh), "--timeout-s", "0.1").returncode == 2
    assert stat.S_IMODE(os.stat(fresh).st_mode) == 0o700  # created private


def test_a_request_with_invalid_utf8_is_a_bad_message_not_an_internal_error(daemon):
    """Found by the fuzz campaign: msgspec raises UnicodeDecodeError for such strings."""
    directory, _ = daemon
    payload = protocol.encode(protocol.Hello(request_id=5, client="ab")).replace(
        b"\xa2ab", b"\xa2\xff\xfe")
    reply = raw_request(directory, payload)
    assert not reply.ok and reply.error.code is ErrorCode.BAD_MESSAGE


def test_a_runtime_directory_another_user_made_first_is_avoided_by_daemon_and_clients(tmp_path):
    """Another user who creates /tmp/scrtune-<uid> first stopped the daemon (or, with a loose
    mode, could read it). Daemon, client and CLI all skip it for ~/.scrtune/run, and say so."""
    base, home = tmp_path / "tmp", tmp_path / "home"
    squatted = base / f"scrtune-{os.getuid()}"
    os.makedirs(squatted)
    os.makedirs(home)
    if os.geteuid() == 0:
        os.chown(squatted, 65534, 65534)  # nobody's
    else:
        os.chmod(squatted, 0o777)  # a directory we did not make private
    env = {k: v for k, v in os.environ.items() if k not in ("SCRTUNE_DIR", "XDG_RUNTIME_DIR")}
    env.update(TMPDIR=str(base), HOME=str(home), SLURM_JOB_ID="77")
    daemon = subprocess.Popen([*SCRTUNE, "daemon", "--foreground"], env=env,
                              stderr=subprocess.PIPE, text=True)
    try:
        status = None
        for _ in range(100):
            status = subprocess.run([*SCRTUNE, "status", "--format", "json"], env=env,
                                    capture_output=True, text=True)
            if status.returncode == 0:
                break
            time.sleep(0.2)
        assert status.returncode == 0, status.stderr
        assert f"not using {squatted}/77" in status.stderr
        assert os.path.exists(home / ".scrtune" / "run" / "77" / "requests.sock")
        assert not os.listdir(squatted)  # nothing of ours went into theirs
    finally:
        daemon.terminate()
        _, err = daemon.communicate(timeout=20)
    assert "not using" in err and "Traceback" not in err


def test_a_daemon_on_tcp_answers_only_clients_holding_the_job_s_curve_keys(tmp_path):
    """Any local user could record to, read and stop a TCP daemon. Now it is a CURVE server:
    the CLI and clients with the keys of its directory are answered, others never are."""
    import zmq
    import zmq.auth

    from scrtune.client.connection import DaemonClient

    directory = tmp_path / "d"
    port = free_port()
    daemon = subprocess.Popen([*SCRTUNE, "daemon", "--tcp", f"127.0.0.1:{port}", "--dir",
                               str(directory), "--foreground"], stderr=subprocess.PIPE, text=True)
    endpoint = f"tcp://127.0.0.1:{port}"
    try:
        status = None
        for _ in range(100):
            status = subprocess.run([*SCRTUNE, "status", "--format", "json", "--endpoint",
                                     endpoint, "--dir", str(directory)],
                                    capture_output=True, text=True)
            if status.returncode == 0:
                break
            time.sleep(0.2)
        assert status.returncode == 0, status.stderr
        secret = directory / "curve" / "client.key_secret"
        assert stat.S_IMODE(os.stat(secret).st_mode) == 0o600
        # a client with the keys records; one without them, or with keys of its own, is not
        # answered and stores nothing
        keyed = DaemonClient(endpoint, timeout_s=2, key_dir=str(directory))
        assert keyed.record("curve", "job_started", 1.7e9).ok
        stranger = zmq.Context.instance().socket(zmq.DEALER)
        stranger.setsockopt(zmq.LINGER, 0)
        stranger.connect(endpoint)
        stranger.send(protocol.encode(protocol.Record(
            request_id=1, job="intruder", kind="job_started", wall_s=1.7e9)))
        assert not stranger.poll(1500)
        stranger.close()
        forged = tmp_path / "forged"
        os.makedirs(forged / "curve")
        for name in ("server", "client"):
            zmq.auth.create_certificates(str(forged / "curve"), name)
        assert DaemonClient(endpoint, timeout_s=1, key_dir=str(forged)).status() is None
        counters = keyed.status().result
        assert counters["events_stored"] == 1
        no_keys = subprocess.run([*SCRTUNE, "status", "--endpoint", endpoint, "--dir",
                                  str(tmp_path / "empty"), "--timeout-s", "0.3"],
                                 capture_output=True, text=True)
        assert no_keys.returncode == 2 and "no CURVE keys" in no_keys.stderr
    finally:
        daemon.terminate()
        daemon.wait(20)


JOB_SCRIPT = """
scrtune daemon --foreground 2> "$1/daemon-$2.log" &
daemon=$!
# its sockets are up (a query before that would find the other job's daemon)
for _ in $(seq 200); do
  grep -q "serving requests" "$1/daemon-$2.log" 2>/dev/null && break
  sleep 0.1
done
for _ in $(seq 100); do
  mpiexec -n 1 scrtune status --format json --timeout-s 0.3 > "$1/status-$2.json" && break
  sleep 0.2
done
echo "$daemon" > "$1/daemon-$2.pid"
while [ ! -e "$1/stop" ]; do sleep 0.1; done
kill "$daemon"; wait "$daemon"
"""


@pytest.mark.mpi
def test_concurrent_plain_mpirun_jobs_each_find_their_own_daemon(tmp_path, short_tmp):
    """Issue 12: without a scheduler every job used one default directory (a second daemon
    took over the first one's sockets and state). The second daemon now serves nojob-<its job
    script's pid>, and the job script's processes (through mpiexec too) find it."""
    import json

    env = {k: v for k, v in os.environ.items() if k not in (
        "SCRTUNE_DIR", "XDG_RUNTIME_DIR", "SLURM_JOB_ID", "SLURM_JOBID", "FLUX_JOB_ID",
        "PBS_JOBID", "LSB_JOBID", "SCRTUNE_REQUESTS")}
    # the job script runs the venv's scrtune and mpiexec, found beside this python when the
    # venv is not on PATH (`/venv/bin/pytest` without activating it)
    path = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    if not shutil.which("mpiexec", path=path) or not shutil.which("scrtune", path=path):
        pytest.skip("no mpiexec or scrtune beside this python or on PATH (pip install '.[mpi]')")
    env.update(TMPDIR=short_tmp, HOME=os.path.join(short_tmp, "home"), PATH=path)
    first = subprocess.Popen(["bash", "-c", JOB_SCRIPT, "job", str(tmp_path), "1"], env=env)
    try:
        for _ in range(200):
            if (tmp_path / "daemon-1.pid").exists():
                break
            time.sleep(0.1)
        second = subprocess.Popen(["bash", "-c", JOB_SCRIPT, "job", str(tmp_path), "2"],
                                  env=env)
        for _ in range(200):
            if (tmp_path / "daemon-2.pid").exists():
                break
            time.sleep(0.1)
    finally:
        (tmp_path / "stop").touch()
    assert first.wait(30) == 0 and second.wait(30) == 0
    for job in ("1", "2"):
        daemon_pid = int((tmp_path / f"daemon-{job}.pid").read_text())
        status = json.loads((tmp_path / f"status-{job}.json").read_text())
        assert status["pid"] == daemon_pid, (job, (tmp_path / f"daemon-{job}.log").read_text())
    served = sorted(os.listdir(os.path.join(short_tmp, f"scrtune-{os.getuid()}")))
    assert served[0] == "nojob" and served[1].startswith("nojob-"), served


def test_forwarded_lines_are_read_where_they_arrived():
    """The daemon decodes a forwarder's Lines as a view into the message received (it
    copied each, up to 4 MiB, twice); the offsets must still match the data."""
    from scrtune.daemon.protocol import Lines, decode_lines, encode

    received = bytearray(encode(Lines(source="/t/a.pfw", start=0, end=5, data=b'{"a":')))
    lines = decode_lines(memoryview(received))
    assert lines is not None and bytes(lines.data) == b'{"a":'
    received[-1] = ord("!")  # the same memory: no copy was made
    assert bytes(lines.data) == b'{"a"!'
    assert decode_lines(encode(Lines(source="/t/a.pfw", start=0, end=6, data=b"{"))) is None
