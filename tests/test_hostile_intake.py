"""Hostile messages on the event socket of a real daemon subprocess: each costs itself only,
counted; the daemon keeps answering, and its memory stays bounded."""

from __future__ import annotations

import gzip
import random

import msgspec
import psutil
import pytest
import zmq

from scrtune.daemon.endpoints import default_endpoints
from scrtune.daemon.intake import parse_messages
from scrtune.daemon.protocol import MAX_EVENT_MESSAGE_BYTES
from scrtune.events.codec import CodecError, decode_batch
from tests.test_daemon import (
    client_for,
    feed,
    wait_for,
)

# a scrtune batch whose first name is not UTF-8: msgspec raises UnicodeDecodeError for it
BAD_UTF8_BATCH = msgspec.msgpack.encode(
    ["batch", 1, 0, [], ["\x00"], [], [], [], [], [], 0, 0, 0, [], "x"]).replace(
        b"\xa1\x00", b"\xa1\xff")


def test_a_batch_with_invalid_utf8_is_a_codec_error_not_an_escape():
    with pytest.raises(CodecError):
        decode_batch(BAD_UTF8_BATCH)
    rng = random.Random(1)
    for _ in range(20_000):  # random bytes: every failure is the codec's own error
        message = bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 60)))
        assert parse_messages([message]).invalid_messages <= 1


def test_a_gzip_bomb_is_refused_by_its_decompressed_size():
    bomb = gzip.compress(b"{" * (MAX_EVENT_MESSAGE_BYTES + 1), compresslevel=9)
    assert len(bomb) < MAX_EVENT_MESSAGE_BYTES // 100
    parsed = parse_messages([bomb])
    assert parsed.invalid_messages == 1 and not parsed.batches


def test_the_daemon_survives_hostile_event_messages_and_still_counts_good_ones(daemon):
    directory, proc = daemon
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(default_endpoints(directory).events[0])
    bomb = gzip.compress(b"{" * (200 << 20), compresslevel=9)  # 200 MiB once inflated
    hostile = [BAD_UTF8_BATCH, bomb, b"\x1f\x8b garbage", b"[" * 100_000]
    for message in hostile:
        push.send(message)
    push.close()
    counters = wait_for(directory, "batches_received", len(hostile))
    assert proc.poll() is None, "the daemon died"
    assert counters["batches_invalid"] >= 3  # the bracket flood may parse as bad lines
    assert psutil.Process(proc.pid).memory_info().rss < 1 << 30
    feed(directory)  # and it still takes a real trace, all of it
    assert client_for(directory).status().result["counters"]["records"] == 888
