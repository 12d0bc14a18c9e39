"""Issue 12: a fuzz campaign on both sockets of a real daemon subprocess (CI's bounded share of
benchmarks/fuzz_daemon.py's million per socket): no death, bounded memory, right answers after."""

from __future__ import annotations

import os

from tests.conftest import only_file
from tests.fuzzing import run_campaign
from tests.test_daemon import client_for, feed, settled, wait_for

PER_SOCKET = int(os.environ.get("SCRTUNE_FUZZ_MESSAGES", "100000"))


def test_random_and_mutated_messages_on_both_sockets_never_stop_the_daemon(daemon):
    directory, proc = daemon
    campaign = run_campaign(directory, proc.pid, PER_SOCKET, only_file("v2_python_api"))
    assert not campaign.daemon_died and proc.poll() is None, campaign
    assert campaign.peak_rss_bytes < 1 << 30, campaign
    # every event message reached it and was counted (taken, invalid or dropped)
    wait_for(directory, "batches_received", PER_SOCKET, timeout_s=120)
    wait_for(directory, "requests", PER_SOCKET, timeout_s=120)
    counters = settled(directory)
    assert counters["batches_received"] >= PER_SOCKET, counters
    assert counters["requests"] >= PER_SOCKET, counters
    # and afterwards it answers right: a real trace is counted whole, a record is kept
    feed(directory, counters["records"] + 888)
    after = client_for(directory).status().result["counters"]
    assert after["records"] == counters["records"] + 888
    client = client_for(directory)
    assert client.recommend().ok
    reply = client.record("after-fuzz", "job_started", 1.7e9)
    assert reply is not None and reply.ok and not reply.result.get("duplicate")
