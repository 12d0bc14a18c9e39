"""`scrtune relay` (issue 47) with plain ZeroMQ producers: what it holds while the daemon is away
is bounded and counted, forwarded Lines are refused, bad arguments are one line and exit 2.
The real DFTracer writer through it: tests/test_dftracer_zmq.py."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import time

import msgspec
import zmq

from scrtune.daemon.protocol import Lines
from tests.conftest import SCRTUNE, only_file, wait_until
from tests.test_daemon import settled, start_daemon, stop


def start_relay(endpoint: str, directory: str, *extra: str) -> subprocess.Popen:
    proc = subprocess.Popen([*SCRTUNE, "relay", endpoint, "--dir", directory, "--format",
                             "json", *extra], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    wait_until(lambda: os.path.exists(endpoint.removeprefix("ipc://")), 300,
               lambda: str(proc.communicate()), possible=lambda: proc.poll() is None)
    return proc


def _push(endpoint: str, messages: list[bytes]) -> None:
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(endpoint)
    for message in messages:
        push.send(message)
    push.close()


def _ended(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> dict:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == (130 if sig == signal.SIGINT else 0), err
    return json.loads(out)


def test_what_is_held_for_an_absent_daemon_is_bounded_and_counted(tmp_path):
    directory = str(tmp_path / "d")  # no daemon there, ever
    os.makedirs(directory, mode=0o700)
    endpoint = f"ipc://{tmp_path}/dft.sock"
    relay = start_relay(endpoint, directory, "--hold", "10KiB")
    _push(endpoint, [b"{}\n" * 300] * 100)  # 900 bytes each
    time.sleep(1)
    relayed = _ended(relay, signal.SIGINT)
    assert relayed["received"] == 100
    assert relayed["sent"] == 0
    assert relayed["dropped"] == 100  # 89 beyond the bound while relaying, 11 at the end


def test_forwarded_lines_are_refused_and_trace_lines_arrive_once(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    daemon = start_daemon(directory)
    endpoint = f"ipc://{tmp_path}/dft.sock"
    relay = start_relay(endpoint, directory)
    try:
        lines = msgspec.msgpack.encode(Lines(source="/etc/x.pfw", start=0, end=3,
                                             data=b"{}\n"))
        _push(endpoint, [lines, gzip.open(only_file("v2_python_api")).read()])
        counters = settled(directory)
        relayed = _ended(relay)
    finally:
        stop(daemon)
    assert (relayed["received"], relayed["refused"], relayed["dropped"]) == (1, 1, 0)
    assert counters["records"] == 888 and counters["batches_out_of_order"] == 0


def test_an_endpoint_that_is_no_endpoint_is_one_line_and_exit_2(tmp_path):
    for endpoint in ("bogus", f"ipc://{tmp_path}/no/such/dir/x.sock"):
        done = subprocess.run([*SCRTUNE, "relay", endpoint, "--dir", str(tmp_path)],
                              capture_output=True, text=True, timeout=60)
        assert done.returncode == 2
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "Traceback" not in done.stderr
