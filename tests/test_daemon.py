"""A real daemon subprocess over real ZeroMQ sockets: requests, errors, intake, durability."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import stat
import subprocess
import time

import msgspec
import pytest
import zmq

import scrtune.client
from scrtune.client import DaemonClient, Emitter
from scrtune.daemon import protocol
from scrtune.daemon.endpoints import default_endpoints, runtime_dir
from scrtune.daemon.service import Service
from scrtune.errors import StoreUnavailable
from scrtune.events.codec import encode_batch
from scrtune.events.parse import FileContext, parse_lines
from scrtune.goodput.store import Store
from scrtune.intents.inputs import SystemProfile
from tests.conftest import SCRTUNE, ChildLog, only_file


def start_daemon(directory: str, *extra: str) -> subprocess.Popen:
    # its log goes to a file: a pipe nobody reads would stop a chatty daemon when it fills
    log = ChildLog()
    proc = subprocess.Popen([*SCRTUNE, "daemon", "--dir", directory,
                             "--foreground", "--snapshot-s", "0.2", *extra],
                            stderr=log.file, text=True)
    proc.log = log  # type: ignore[attr-defined]
    client = DaemonClient(default_endpoints(directory).requests, timeout_s=0.2, retries=0)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if client.hello() is not None:
            return proc
        if proc.poll() is not None:
            raise AssertionError(f"daemon exited: {log.read()}")
    proc.kill()
    raise AssertionError("daemon did not answer within 20 s")


def stop(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    return proc.wait(timeout=20)


def feed(directory: str, records: int = 888) -> None:
    """Give a daemon the events of a real traced checkpoint workload (888 records), and wait
    until it has counted `records` in all."""
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 2000)
    push.connect(default_endpoints(directory).events[0])
    push.send(gzip.open(only_file("v2_python_api")).read())
    push.close()
    wait_for(directory, "records", records)


def client_for(directory: str) -> DaemonClient:
    return DaemonClient(default_endpoints(directory).requests, timeout_s=2.0, retries=1)


def wait_for(directory: str, counter: str, at_least: int, timeout_s: float = 60.0) -> dict:
    """The daemon's counters once `counter` has reached `at_least`; the test fails at the
    timeout, naming the counter (a bound that passed silently once hid a forwarder that sent
    nothing for an hour). The bound is wide: a daemon answers in milliseconds when it works."""
    client = client_for(directory)
    deadline = time.monotonic() + timeout_s
    while True:
        counters = client.status().result["counters"]
        if counters[counter] >= at_least:
            return counters
        if time.monotonic() > deadline:
            pytest.fail(f"the daemon's {counter} reached {counters[counter]}, not {at_least}, "
                        f"in {timeout_s} s: {counters}")
        time.sleep(0.05)


def settled(directory: str, quiet_s: float = 1.0, timeout_s: float = 300.0,
            records_at_least: int = 0) -> dict:
    """The daemon's counters once its intake stopped moving for `quiet_s` (for ten times
    that while fewer than `records_at_least` records are in: a daemon on a busy machine can
    take nothing for a second and still be catching up)."""
    client = client_for(directory)
    deadline = time.monotonic() + timeout_s
    last, quiet_since = client.status().result["counters"], time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        counters = client.status().result["counters"]
        if (counters["records"], counters["batches_received"], counters["invalid_lines"]) != \
                (last["records"], last["batches_received"], last["invalid_lines"]):
            last, quiet_since = counters, time.monotonic()
            continue
        needed_s = quiet_s if counters["records"] >= records_at_least else 10 * quiet_s
        if time.monotonic() - quiet_since >= needed_s:
            return counters
    return last


def raw_request(directory: str, payload: bytes) -> protocol.Reply:
    sock = zmq.Context.instance().socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.connect(default_endpoints(directory).requests)
    try:
        sock.send(payload)
        assert sock.poll(5000), "no reply"
        return protocol.decode_reply(sock.recv())
    finally:
        sock.close()


def test_hello_status_recommend_and_record(daemon):
    directory, _ = daemon
    client = client_for(directory)
    hello = client.hello()
    assert hello.ok and hello.result["protocol"] == protocol.PROTOCOL_VERSION
    recommendation = client.recommend().result
    assert recommendation["target_version"] == "3.1.0" and "scr" in recommendation
    recorded = client.record("job-a", "job_started", wall_s=1000.0)
    assert recorded.ok and recorded.result["event_id"] >= 1
    status = client.status().result
    assert status["events_stored"] == 1 and status["counters"]["events_recorded"] == 1
    assert status["clients"] == sorted([client.name, "job job-a"])


@pytest.mark.parametrize("payload, code", ids=["garbage", "unknown", "version", "argument",
                                               "oversized", "nan-time", "step-beyond-int64",
                                               "unknown-kind"], argvalues=[
    (b"\xc1 not msgpack", protocol.ErrorCode.BAD_MESSAGE),
    (msgspec.msgpack.encode({"type": "fly", "request_id": 7}), protocol.ErrorCode.UNKNOWN_COMMAND),
    (msgspec.msgpack.encode({"type": "hello", "version": 99, "request_id": 8}),
     protocol.ErrorCode.BAD_VERSION),
    (msgspec.msgpack.encode({"type": "record", "request_id": 9, "job": 3}),
     protocol.ErrorCode.BAD_ARGUMENT),
    (b"\x00" * (protocol.MAX_REQUEST_BYTES + 1), protocol.ErrorCode.TOO_LARGE),
    (msgspec.msgpack.encode({"type": "record", "request_id": 10, "job": "j", "kind": "job_started",
                             "wall_s": float("nan")}), protocol.ErrorCode.BAD_ARGUMENT),
    (msgspec.msgpack.encode({"type": "record", "request_id": 11, "job": "j", "kind": "job_started",
                             "wall_s": 1.0, "step": 2**64 - 1}), protocol.ErrorCode.BAD_ARGUMENT),
    (msgspec.msgpack.encode({"type": "record", "version": 1, "request_id": 12, "job": "j",
                             "kind": "lunch", "wall_s": 1.0}), protocol.ErrorCode.BAD_ARGUMENT),
])
def test_bad_requests_get_errors_and_the_daemon_keeps_serving(daemon, payload, code):
    directory, _ = daemon
    reply = raw_request(directory, payload)
    assert not reply.ok and reply.error.code == code
    if code in (protocol.ErrorCode.BAD_VERSION, protocol.ErrorCode.UNKNOWN_COMMAND):
        assert reply.request_id in (7, 8)
    if reply.request_id >= 10:  # refused before anything was stored
        assert client_for(directory).status().result["events_stored"] == 0
    assert client_for(directory).status().ok


def test_client_without_daemon_returns_none_within_its_bound(tmp_path):
    """Its bound is counted in attempts, each of timeout_s, not in the machine's seconds:
    none where no socket exists, retries + 1 where one exists and nobody answers."""
    client = DaemonClient(f"ipc://{tmp_path}/nobody.sock", timeout_s=0.2, retries=1)
    assert client.recommend() is None and client.attempts == 0
    silent = zmq.Context.instance().socket(zmq.ROUTER)
    silent.setsockopt(zmq.LINGER, 0)
    silent.bind(f"ipc://{tmp_path}/nobody.sock")
    try:
        assert client.recommend() is None and client.attempts == 2
    finally:
        silent.close()
    assert client.record("j", "job_started", 1.0) is None


def test_a_late_reply_is_never_taken_for_the_next_request(tmp_path):
    """The client keeps its socket while the daemon answers; after a timeout it starts afresh,
    so the reply that arrives late is not read as the answer to the next request."""
    import threading

    endpoint = f"ipc://{tmp_path}/slow.sock"
    router = zmq.Context.instance().socket(zmq.ROUTER)
    router.setsockopt(zmq.LINGER, 0)
    router.bind(endpoint)

    def serve() -> None:
        for delay_s in (0.5, 0.0, 0.0):
            if not router.poll(5000):
                return  # the client gave up: nothing more to answer
            peer, data = router.recv_multipart()
            time.sleep(delay_s)
            request_id = msgspec.msgpack.decode(data)["request_id"]
            router.send_multipart([peer, protocol.ok(request_id, {"answer": request_id})])

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    client = DaemonClient(endpoint, timeout_s=0.2, retries=0)
    try:
        assert client.recommend() is None  # answered after 0.5 s: too late
        time.sleep(0.5)  # the late reply has been sent by now
        for _ in range(2):
            reply = client.status()
            assert reply is not None and reply.result == {"answer": reply.request_id}
    finally:
        server.join(timeout=5)
        router.close()


def test_event_intake_lines_gzip_batches_and_garbage(daemon):
    directory, _ = daemon
    raw = gzip.open(only_file("v2_python_api")).read()
    batch, _ = parse_lines(raw.split(b"\n"), FileContext())
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 1000)
    push.connect(default_endpoints(directory).events[0])
    for message in (raw, gzip.compress(raw), encode_batch(batch), b"\x00garbage"):
        push.send(message)
    push.close()
    client = client_for(directory)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        counters = client.status().result["counters"]
        if counters["batches_received"] == 4:
            break
        time.sleep(0.05)
    assert counters["batches_received"] == 4 and counters["batches_invalid"] == 1
    assert counters["records"] == 3 * 888
    scr = client.recommend().result
    names = {i["name"] for i in scr["intents"]}
    assert "interval" in names  # the engine saw the checkpoints


def test_broken_values_in_trace_lines_leave_the_daemon_serving(daemon):
    from tests.test_robustness import BROKEN_VALUES

    directory, proc = daemon
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 1000)
    push.connect(default_endpoints(directory).events[0])
    push.send(b"\n".join(BROKEN_VALUES))
    push.close()
    counters = wait_for(directory, "batches_received", 1)
    assert counters["records"] + counters["invalid_lines"] == len(BROKEN_VALUES)
    assert counters["invalid_lines"] == 2 and proc.poll() is None  # not UTF-8; time past int64


def test_many_small_buffers_give_what_one_message_gives(tmp_path):
    """Buffers parsed in blocks on the daemon's parse thread, however they end (with or
    without newlines, compressed or not), add up to what the same lines give in one message."""
    raw = gzip.open(only_file("v2_python_api")).read()
    lines = raw.rstrip(b"\n").split(b"\n")
    buffers = []
    for index, start in enumerate(range(0, len(lines), 9)):
        text = b"\n".join(lines[start:start + 9]) + (b"", b"\n", b"\n\n")[index % 3]
        buffers.append(gzip.compress(text) if index % 4 == 0 else text)
    answers = []
    for messages in ([raw], buffers):
        directory = str(tmp_path / str(len(messages)))
        os.makedirs(directory, mode=0o700)
        proc = start_daemon(directory)
        try:
            push = zmq.Context.instance().socket(zmq.PUSH)
            push.setsockopt(zmq.LINGER, 2000)
            push.connect(default_endpoints(directory).events[0])
            for message in messages:
                push.send(message)
            push.close()
            client = client_for(directory)
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and \
                    client.status().result["counters"]["batches_received"] < len(messages):
                time.sleep(0.05)
            counters = client.status().result["counters"]
            answers.append((counters["records"], counters["invalid_lines"],
                            client.recommend().result["scr"]))
        finally:
            stop(proc)
    assert len(buffers) > 90 and answers[0][0] == 888
    assert answers[1] == answers[0]


def test_emitter_events_reach_the_daemon(daemon):
    directory, _ = daemon
    emitter = Emitter(default_endpoints(directory).events[0], batch_events=10)
    for step in range(25):
        emitter.emit("train.step", "COMPUTE", 1000.0 + step, 0.5, step=step)
    emitter.close()
    client = client_for(directory)
    wait_for(directory, "records", 25)
    assert client.status().result["counters"]["records"] == 25
    assert emitter.sent == 3 and emitter.dropped == 0


def test_emitted_numpy_values_arrive_as_numbers_and_bad_times_are_counted(daemon):
    import numpy as np

    directory, _ = daemon
    emitter = Emitter(default_endpoints(directory).events[0], batch_events=1000)
    for step in range(4):  # a step taken from a tensor or an array is a numpy scalar
        emitter.emit("train.step", "COMPUTE", 1000.0 + step, 0.5, step=np.int64(step),
                     loss=np.float32(0.25))
    emitter.emit("train.step", "COMPUTE", float("nan"), 0.5)  # once a ValueError in the job
    emitter.close()
    assert emitter.unencodable == 1 and emitter.sent == 1
    client = client_for(directory)
    wait_for(directory, "records", 4)
    counters = client.status().result["counters"]
    assert counters["records"] == 4 and counters["invalid_lines"] == 0


def test_a_forked_process_emits_through_its_own_socket(daemon):
    """A data loader's worker forked after the first emit: its events arrive too (ZeroMQ
    sockets do not survive fork), and the parent's unsent lines are sent once, by the parent."""
    directory, _ = daemon
    emitter = Emitter(default_endpoints(directory).events[0], batch_events=1000)
    for step in range(10):
        emitter.emit("train.step", "COMPUTE", 1000.0 + step, 0.5, step=step)
    child = os.fork()
    if child == 0:  # the worker
        try:
            for item in range(20):
                emitter.emit("load.item", "DATA", 2000.0 + item, 0.1)
            emitter.close()
        finally:
            os._exit(0)
    assert os.waitpid(child, 0)[1] == 0
    for step in range(10, 15):
        emitter.emit("train.step", "COMPUTE", 1000.0 + step, 0.5, step=step)
    emitter.close()
    client = client_for(directory)
    wait_for(directory, "records", 35)
    time.sleep(0.3)  # nothing more (no line sent twice)
    assert client.status().result["counters"]["records"] == 35


def test_a_client_forked_mid_request_starts_afresh_in_the_child(daemon, tmp_path):
    """Forked while its lock is held and its sender thread exists: the child neither hangs on
    the inherited lock nor waits on a thread it does not have."""
    directory, _ = daemon
    client = client_for(directory)
    assert client.hello().ok
    client.record_later("job-f", "job_started", 1.0)
    assert client.flush()
    result = tmp_path / "child.txt"
    with client._lock:  # as if another thread were mid-request at the fork
        child = os.fork()
        if child == 0:
            try:
                client.record_later("job-f", "checkpoint_save_finished", 2.0, step=1)
                answered = client.flush(timeout_s=5.0) and client.status() is not None
                result.write_text("ok" if answered else "no answer")
            finally:
                os._exit(0)
    assert os.waitpid(child, 0)[1] == 0
    assert result.read_text() == "ok"
    assert client.status().result["events_stored"] == 2


def test_module_emit_found_through_scrtune_dir_and_flushed_on_demand(daemon, monkeypatch):
    import importlib

    directory, _ = daemon
    module = importlib.import_module("scrtune.client.emit")
    monkeypatch.setattr(module, "_default", None)
    monkeypatch.setenv("SCRTUNE_DIR", directory)
    monkeypatch.delenv("SCRTUNE_EVENTS", raising=False)
    for step in range(7):
        scrtune.client.emit("train.step", "COMPUTE", dur_s=0.25, step=step)
    scrtune.client.emit_flush()  # fewer than a batch: sent now, not at exit
    client = client_for(directory)
    wait_for(directory, "records", 7)
    assert client.status().result["counters"]["records"] == 7


def test_recorded_events_survive_a_killed_daemon(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    proc = start_daemon(directory)
    client = client_for(directory)
    for step in range(5):
        assert client.record("job-b", "checkpoint_save_finished", 100.0 + step, step=step).ok
    stop(proc, signal.SIGKILL)  # no chance to clean up
    store = Store(os.path.join(directory, "state.sqlite"))
    assert [e.step for e in store.events("job-b")] == [0, 1, 2, 3, 4]
    store.close()
    proc = start_daemon(directory)
    try:
        status = client.status().result  # the same client finds the new daemon
        assert status["events_stored"] == 5
    finally:
        stop(proc)


def test_state_continues_after_a_restart(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    proc = start_daemon(directory)
    feed(directory)
    sockets = {"requests.sock", "events.sock"}
    assert sockets <= set(os.listdir(directory))
    assert stop(proc) == 0  # SIGTERM: clean shutdown, state saved
    assert not sockets & set(os.listdir(directory))  # its socket files removed, not left
    proc = start_daemon(directory)
    try:
        status = client_for(directory).status().result
        assert status["counters"]["records"] == 888
        assert any(i["name"] == "interval" and i["confidence"] > 0
                   for i in status["recommendation"]["intents"])
    finally:
        stop(proc)


def test_overload_drops_are_counted_and_producers_never_block(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    proc = start_daemon(directory, "--intake-queue", "2")
    try:
        raw = gzip.open(only_file("v2_python_api")).read()
        push = zmq.Context.instance().socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 2000)
        push.setsockopt(zmq.SNDHWM, 10_000)
        push.connect(default_endpoints(directory).events[0])
        sent = 0
        for _ in range(400):  # NOBLOCK: the producer cannot wait on the daemon
            try:
                push.send(raw, zmq.NOBLOCK)
                sent += 1
            except zmq.Again:
                pass
        push.close()
        client = client_for(directory)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            counters = client.status().result["counters"]
            if counters["batches_received"] >= sent:
                break
            time.sleep(0.1)
        assert counters["batches_received"] == sent
        assert counters["batches_dropped"] > 0
        assert counters["records"] == 888 * (sent - counters["batches_dropped"])
    finally:
        stop(proc)


def test_runtime_dir_is_private(tmp_path):
    path = runtime_dir({"SLURM_JOB_ID": "1234"}, base=str(tmp_path))
    assert path.endswith("/1234")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700


def test_query_without_daemon_uses_traces(run_cli, tmp_path):
    env = dict(os.environ, SCRTUNE_DIR=str(tmp_path))
    result = run_cli("query", "--dir", str(tmp_path / "none"), "--timeout-s", "0.2",
                     "--trace", only_file("v2_python_api"), "--format", "conf", env=env)
    assert result.returncode == 0, result.stderr
    assert "SCR_CACHE_BYPASS=1" in result.stdout
    nothing = run_cli("query", "--dir", str(tmp_path / "none"), "--timeout-s", "0.2", env=env)
    assert nothing.returncode == 2 and "no scrtune daemon answered" in nothing.stderr


def test_status_table_shows_counts_intents_recommendation_and_clients(daemon):
    directory, _ = daemon
    feed(directory)
    assert client_for(directory).record("job-t", "job_started", 1000.0).ok
    table = subprocess.run([*SCRTUNE, "status", "--dir", directory],
                           capture_output=True, text=True)
    assert table.returncode == 0, table.stderr
    assert "records: 888" in table.stdout and "job job-t" in table.stdout
    assert "recommendation: SCR_" in table.stdout
    assert "intents of the latest computation, from 888 records" in table.stdout
    assert "    interval (" in table.stdout


def test_query_waits_for_a_daemon_that_is_still_starting(tmp_path):
    """A job script runs `srun ... scrtune daemon &` and queries at once: with --wait-s the
    query waits for the daemon instead of failing."""
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    query = subprocess.Popen([*SCRTUNE, "query", "--dir", directory,
                              "--wait-s", "30", "--timeout-s", "0.3"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)  # the daemon comes up late
    assert query.poll() is None  # still waiting
    daemon = start_daemon(directory)
    try:
        out, err = query.communicate(timeout=30)
        assert query.returncode == 0, err
        assert "export SCR_CACHE_BYPASS=" in out
        # its first polls went unanswered; a job's log once read "keeping the current
        # settings" there, of a query that went on to answer
        assert "keeping" not in err and "no scrtune daemon" not in err, err
    finally:
        stop(daemon)


def test_a_query_that_no_daemon_answers_says_why_in_one_line(tmp_path):
    """The command's own error names the endpoint, why (no socket, no answer) and the wait;
    the client library's fallback warning, meant for a job's log, is not said beside it."""
    directory = tmp_path / "d"
    directory.mkdir(mode=0o700)
    absent = subprocess.run([*SCRTUNE, "status", "--dir", str(directory), "--wait-s", "0.5"],
                            capture_output=True, text=True, timeout=60)
    assert absent.returncode == 2
    assert absent.stderr.count("\n") == 1, absent.stderr
    assert "no socket there; waited 0.5 s for it to start" in absent.stderr
    endpoint = f"ipc://{tmp_path}/silent.sock"
    silent = zmq.Context.instance().socket(zmq.ROUTER)  # bound, never replying
    silent.bind(endpoint)
    try:
        mute = subprocess.run([*SCRTUNE, "query", "--endpoint", endpoint, "--timeout-s", "0.2"],
                              capture_output=True, text=True, timeout=60)
    finally:
        silent.close(0)
    assert mute.returncode == 2 and mute.stderr.count("\n") == 1, mute.stderr
    assert f"no scrtune daemon answered at {endpoint} (no answer within 0.20 s, 2 tries)" \
        in mute.stderr


def test_a_conf_file_whose_directory_comes_later_never_fails_a_record(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    conf = tmp_path / "prefix" / "scr.conf"  # SCR's prefix, made later by the job
    proc = start_daemon(directory, "--scr-conf-file", str(conf))
    try:
        client = client_for(directory)
        detail = '{"save_s": 1.0, "config": "x", "steps": 5}'
        assert client.record("j", "checkpoint_save_finished", 1000.0, 1, detail=detail).ok
        assert not conf.exists()
        conf.parent.mkdir()
        assert client.record("j", "checkpoint_save_finished", 1100.0, 2, detail=detail).ok
        assert "SCR_CACHE_BYPASS" in conf.read_text()
    finally:
        stop(proc)


def test_forward_once_says_when_nothing_was_taken_or_nothing_found(run_cli, tmp_path):
    """It once waited forever for an absent daemon (and counted messages queued for nobody
    as forwarded), and exited 0 on paths that held no trace file."""
    directory = tmp_path / "d"
    os.makedirs(directory, mode=0o700)
    traces = tmp_path / "traces"
    traces.mkdir()
    shutil.copy(only_file("v2_python_api"), traces / "app.pfw.gz")
    (traces / "notes.txt").write_text("not a trace")
    # --give-up-s 1 (it once waited for ever): run_cli's timeout is the hang detector
    absent = run_cli("forward", "--once", "--dir", str(directory), "--give-up-s", "1",
                     str(traces), timeout=300)
    assert absent.returncode == 2
    assert "0 messages sent" in absent.stderr and "Traceback" not in absent.stderr
    empty = run_cli("forward", "--once", "--dir", str(directory), str(traces / "notes.txt"),
                    str(tmp_path / "none-yet"))
    assert empty.returncode == 2 and "no .pfw or .pfw.gz file" in empty.stderr
    assert "notes.txt: not a .pfw or .pfw.gz file" in empty.stderr


def _half_written_trace(tmp_path):
    """(the lines of a real trace, half, its folder, the file holding the first half, a
    daemon directory): a job's trace while it runs."""
    lines = open(only_file("v2_preload_hybrid"), "rb").read().splitlines(keepends=True)
    half = len(lines) // 2
    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / "job-1234abcd-app.pfw"
    trace.write_bytes(b"".join(lines[:half]))
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    return lines, half, traces, trace, directory


def test_forwarder_follows_growing_files_across_a_daemon_restart(tmp_path):
    lines, half, traces, trace, directory = _half_written_trace(tmp_path)
    proc = start_daemon(directory)
    forward = subprocess.Popen([*SCRTUNE, "forward", str(traces),
                                "--dir", directory, "--interval-s", "0.1"],
                               stderr=subprocess.PIPE, text=True)
    try:
        client = client_for(directory)

        def records() -> int:
            reply = client.status()
            return reply.result["counters"]["records"] if reply is not None else -1

        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and records() < half:
            time.sleep(0.1)
        assert records() == half
        assert stop(proc) == 0
        with open(trace, "ab") as handle:  # the job goes on writing while the daemon is away
            handle.write(b"".join(lines[half:]))
        time.sleep(0.5)
        proc = start_daemon(directory)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and records() < len(lines):
            time.sleep(0.1)
        assert records() == len(lines) == 885  # nothing lost, nothing twice
    finally:
        forward.send_signal(signal.SIGTERM)
        forward.wait(timeout=20)
        if proc.poll() is None:
            stop(proc)


def test_forward_resends_what_a_killed_daemon_had_not_saved(tmp_path):
    """SIGKILL lost the records taken since the last snapshot (here: all of them) and the
    counters rolled back. Lines now go with their file offsets; the restarted daemon says where
    its saved statistics end and the forwarder resends from there: exactly the file's records,
    none twice."""
    lines, half, traces, trace, directory = _half_written_trace(tmp_path)
    proc = start_daemon(directory, "--snapshot-s", "60")
    forward = subprocess.Popen([*SCRTUNE, "forward", str(traces),
                                "--dir", directory, "--interval-s", "0.1"],
                               stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(directory, "records", half, timeout_s=20)["records"] == half
        proc.kill()  # no snapshot was taken: everything the daemon had is gone
        proc.wait()
        with open(trace, "ab") as handle:
            handle.write(b"".join(lines[half:]))
        proc = start_daemon(directory, "--snapshot-s", "60")
        counters = wait_for(directory, "records", len(lines), timeout_s=30)
        time.sleep(2.5)  # two more looks by the forwarder: nothing may arrive twice
        counters = client_for(directory).status().result["counters"]
        assert counters["records"] == len(lines) == 885, counters
    finally:
        forward.send_signal(signal.SIGTERM)
        forward.wait(timeout=20)
        if proc.poll() is None:
            stop(proc)


def test_forwarder_follows_a_growing_compressed_trace_found_through_scrtune_dir(tmp_path):
    """DFTracer compresses by default: a .pfw.gz grows by gzip members. Every line is sent once,
    and the daemon, the forwarder and `scrtune status` find each other through SCRTUNE_DIR."""
    lines = open(only_file("v2_preload_hybrid"), "rb").read().splitlines(keepends=True)
    half = len(lines) // 2
    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / "job-1234abcd-app.pfw.gz"
    trace.write_bytes(gzip.compress(b"".join(lines[:half])))
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    env = dict(os.environ, SCRTUNE_DIR=directory)
    daemon = subprocess.Popen([*SCRTUNE, "daemon", "--foreground"],
                              env=env, stderr=subprocess.PIPE, text=True)
    forward = subprocess.Popen([*SCRTUNE, "forward", str(traces),
                                "--interval-s", "0.1"], env=env, stderr=subprocess.PIPE, text=True)

    def records() -> int:
        status = subprocess.run([*SCRTUNE, "status", "--format", "json"],
                                env=env, capture_output=True, text=True)
        if status.returncode:
            return -1
        return msgspec.json.decode(status.stdout)["counters"]["records"]

    try:
        for expected in (half, len(lines)):
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline and records() < expected:
                time.sleep(0.1)
            assert records() == expected
            if expected == half:  # the job flushes its next buffer: one more gzip member
                with open(trace, "ab") as handle:
                    handle.write(gzip.compress(b"".join(lines[half:])))
        time.sleep(0.5)
        assert records() == len(lines) == 885  # nothing lost, nothing twice
    finally:
        forward.send_signal(signal.SIGTERM)
        forward.wait(timeout=20)
        stop(daemon)


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_forward_stops_promptly_on_signals_after_sending(daemon, tmp_path, sig, code) -> None:
    """It once slept out its whole --interval-s before looking at SIGTERM, so Slurm's SIGKILL
    would have taken the tail of the trace with it. The interval is an hour: a forward that
    slept it out fails the bounded wait below, which leaves ten minutes to a busy machine."""
    directory, _proc = daemon
    traces = tmp_path / "traces"
    traces.mkdir()
    trace = traces / "job-1234abcd-app.pfw"
    lines = gzip.open(only_file("v2_python_api")).read().splitlines(keepends=True)
    trace.write_bytes(b"".join(lines[:100]))
    forward = subprocess.Popen([*SCRTUNE, "forward", str(traces), "--dir", directory,
                                "--interval-s", "3600"], stderr=subprocess.PIPE, text=True)
    # the start is sent at once, though the socket is still connecting at the first send: it
    # once waited out the hour before its retry (10 s here, then sent only at the signal)
    assert wait_for(directory, "records", 100, timeout_s=120)["records"] == 100
    with open(trace, "ab") as handle:  # written during the long sleep
        handle.write(b"".join(lines[100:]))
    forward.send_signal(sig)
    assert forward.wait(timeout=600) == code  # not the hour's interval
    assert "Traceback" not in forward.stderr.read()
    assert wait_for(directory, "records", 888)["records"] == 888  # the tail was sent, as feed()


def test_the_daemon_follows_at_most_max_processes_and_counts_the_rest(tmp_path):
    from scrtune.daemon.intake import parse_messages
    from scrtune.daemon.service import MAX_PROCESSES
    from tests.test_hostile_intake import _processes_lines

    service = Service(Store(str(tmp_path / "s.sqlite")), SystemProfile())
    service.take(parse_messages([_processes_lines(0, MAX_PROCESSES + 100)]))
    assert len(service.stats.timelines) == MAX_PROCESSES
    assert service.stats.counts.untracked_rows == 100
    assert service.counters.records == MAX_PROCESSES + 100  # every row is in the totals


def test_the_served_configuration_changes_only_when_the_gain_beats_the_noise(daemon):
    """Issue 12: the recommendation changed 9 times in a 20 s run, with every move of the
    statistics. Noisy checkpoint costs now leave it alone; a tenfold cost changes the interval
    once enough outputs under the old one were measured, and status says why."""
    import random

    directory, _ = daemon
    feed(directory)
    client = client_for(directory)
    rng = random.Random(3)
    served, wall_s = [], 1.7e9

    def output(save_s: float) -> None:
        """A job that checkpoints at the served interval, 10 s a step."""
        nonlocal wall_s
        first = client.recommend().result
        interval_s = float(first["scr"]["SCR_CHECKPOINT_SECONDS"])
        wall_s += interval_s + save_s
        detail = json.dumps({"config": first["config_id"], "save_s": save_s,
                             "steps": max(1, int(interval_s / 10))})
        assert client.record("calm", "checkpoint_save_finished", wall_s, detail=detail).ok
        served.append(client.recommend().result["config_id"])

    def changes(ids: list[str]) -> int:
        return sum(a != b for a, b in zip(ids, ids[1:]))

    for _ in range(14):
        output(2.0 * rng.uniform(0.8, 1.2))  # noise: +-20%
    # at most the measured cost replacing the trace's estimate; then nothing, however the
    # noise moves the statistics
    assert changes(served) <= 1 and len(set(served[-8:])) == 1, served
    calm_interval = float(client.recommend().result["scr"]["SCR_CHECKPOINT_SECONDS"])
    for _ in range(20):  # past half of the 32 outputs the cost is the median of
        output(20.0 * rng.uniform(0.95, 1.05))
    assert changes(served[14:]) == 1, served  # once, and kept
    costly_interval = float(client.recommend().result["scr"]["SCR_CHECKPOINT_SECONDS"])
    assert costly_interval > 2 * calm_interval
    status = client.status().result
    assert status["recommendation"]["config_id"] == served[-1] and status["why_served"]


def test_a_crash_before_a_relaunch_that_terminated_is_counted(tmp_path):
    """Issue 13: once the relaunch terminated, the crash before it was no longer counted (job
    MTBF 323 s instead of 162 s)."""
    from scrtune.goodput.store import StoredEvent

    store = Store(str(tmp_path / "s.sqlite"))
    for kind, wall_s in (("job_started", 0.0), ("job_started", 100.0),
                         ("job_terminated", 200.0)):
        store.record(StoredEvent(job="j", run=1, kind=kind, wall_s=wall_s, step=-1,
                                 detail=""), wall_s)
    profile = SystemProfile(node_mtbf_s=1e6, nodes=1)
    service = Service(store, profile, prior_weight_s=600.0)
    # 1 crash over 200 s, the prior worth 600 s of running: (W + T) / (W / M + n)
    assert service._failures()["crashes"] == 1
    assert service._tuned_profile().node_mtbf_s == pytest.approx((600 + 200) / (600 / 1e6 + 1))
    store.record(StoredEvent(job="j", run=1, kind="job_started", wall_s=300.0, step=-1,
                             detail=""), 300.0)  # a third run, still going: no new crash
    assert service._failures()["crashes"] == 1
    assert service._tuned_profile().node_mtbf_s == pytest.approx((600 + 300) / (600 / 1e6 + 1))


def test_a_snapshot_encodes_the_statistics_only_when_intake_moved_them(tmp_path):
    """An idle daemon's snapshots save its counters, not its statistics again; what a later
    daemon continues from is the same either way."""
    from scrtune.daemon.intake import parse_messages

    store = Store(str(tmp_path / "s.sqlite"))
    service = Service(store, SystemProfile())
    encoded = []
    encode_into = service.stats.encode_into
    service.stats.encode_into = lambda buffer: encoded.append(1) or encode_into(buffer)  # type: ignore
    lines = gzip.open(only_file("v2_python_api")).read()
    service.take(parse_messages([lines]))
    service.snapshot()
    saved = store.get("stats")
    service.counters.requests += 5
    service.snapshot()
    service.snapshot()
    assert len(encoded) == 1 and store.get("stats") == saved
    assert msgspec.msgpack.decode(store.get("counters"))["requests"] == 5
    service.take(parse_messages([lines]))
    service.snapshot()
    assert len(encoded) == 2 and store.get("stats") != saved
    again = Service(store, SystemProfile())
    assert again.counters.records == service.counters.records == 2 * 888
    assert again.stats.to_bytes() == service.stats.to_bytes()


def test_a_snapshot_does_not_wait_for_the_disk_but_recorded_events_do(tmp_path):
    """The snapshot's transaction is committed without syncing (the next synced commit
    carries it); the store is back to syncing every commit afterwards, even after a failed
    one."""
    store = Store(str(tmp_path / "s.sqlite"))
    seen = []
    store._db.set_trace_callback(seen.append)
    store.put_many({"stats": b"1", "offsets": b"2"}, synced=False)
    assert seen.index("PRAGMA synchronous=NORMAL") < seen.index("COMMIT") \
        < seen.index("PRAGMA synchronous=FULL")
    assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL
    with pytest.raises(StoreUnavailable):  # the second part cannot be stored: neither is
        store.put_many({"stats": b"3", "offsets": object()}, synced=False)  # type: ignore
    assert store._db.execute("PRAGMA synchronous").fetchone() == (2,)
    assert store.get("stats") == b"1"
    assert Store(str(tmp_path / "s.sqlite")).get("offsets") == b"2"
