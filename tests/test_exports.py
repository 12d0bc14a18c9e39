"""The daemon's exports: Prometheus text over HTTP and TensorBoard scalars, for recorded jobs."""

from __future__ import annotations

import glob
import os
import struct
import time
import urllib.request

import pytest

from tests.conftest import free_port
from tests.test_daemon import client_for, start_daemon, stop
from tests.test_goodput import PRIMER


def tensorboard_scalars(directory: str) -> dict[str, float]:
    from tensorboardX.proto.event_pb2 import Event

    values: dict[str, float] = {}
    for path in glob.glob(os.path.join(directory, "events.out.tfevents.*")):
        data = open(path, "rb").read()
        offset = 0
        while offset + 12 <= len(data):  # TFRecord: length, crc, payload, crc
            (length,) = struct.unpack("<Q", data[offset:offset + 8])
            event = Event.FromString(data[offset + 12:offset + 12 + length])
            offset += 12 + length + 4
            for value in event.summary.value:
                values[value.tag] = value.simple_value
    return values


def _metrics(port: int, showing: str) -> str:
    """The daemon's metrics page once it shows `showing` (the exports lag the records)."""
    deadline = time.monotonic() + 60  # a bound on a wait, wide for a loaded machine
    text = ""
    while time.monotonic() < deadline and showing not in text:
        time.sleep(0.2)
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) \
            .read().decode()
    return text


def test_metrics_and_tensorboard(tmp_path):
    pytest.importorskip("tensorboardX")
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    port = free_port()
    board = tmp_path / "tb"
    proc = start_daemon(directory, "--metrics-port", str(port), "--tensorboard", str(board))
    try:
        client = client_for(directory)
        for event in PRIMER:
            assert client.record("primer", event.kind.value, event.wall_s, step=event.step).ok
        text = _metrics(port, 'job="primer"')
        assert 'scrtune_goodput_percent{job="primer"} 50.0000' in text
        assert 'scrtune_badput_seconds{job="primer",bucket="progress_lost"} 2400.000' in text
        assert 'scrtune_intake{counter="events_recorded"} 11' in text
    finally:
        stop(proc)
    scalars = tensorboard_scalars(str(board))
    assert scalars["primer/goodput_pct"] == pytest.approx(50.0)
    assert scalars["primer/badput_s/restart"] == pytest.approx(900.0)


def test_a_job_name_cannot_inject_metrics(tmp_path):
    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    port = free_port()
    proc = start_daemon(directory, "--metrics-port", str(port))
    evil = 'x"} 1\nscrtune_goodput_percent{job="forged'
    try:
        client = client_for(directory)
        for event in PRIMER:
            assert client.record(evil, event.kind.value, event.wall_s, step=event.step).ok
        # the exports lag the records: wait for the whole job's figure, not the first one
        text = _metrics(port, 'forged"} 50.0000')
    finally:
        stop(proc)
    goodput = [line for line in text.splitlines() if line.startswith("scrtune_goodput")]
    assert goodput == ['scrtune_goodput_percent{job="x\\"} 1\\nscrtune_goodput_percent'
                       '{job=\\"forged"} 50.0000']
