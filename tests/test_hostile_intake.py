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
from tests.conftest import only_file
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


def test_a_message_of_several_gzip_members_is_read_whole_and_still_bounded():
    """A message may be gzip members one after another (a tracer flushing per buffer): all of
    them are read; the size bound counts them all together."""
    lines = gzip.open(only_file("v2_python_api")).read().splitlines(keepends=True)
    members = gzip.compress(b"".join(lines[:400])) + gzip.compress(b"".join(lines[400:]))
    (whole,) = parse_messages([b"".join(lines)]).batches
    (batch,) = parse_messages([members + b"\0" * 16]).batches
    assert (batch.records, batch.lines, batch.invalid_lines) == \
        (whole.records, whole.lines, whole.invalid_lines)
    half = b"{" * (MAX_EVENT_MESSAGE_BYTES // 2 + 1)
    parsed = parse_messages([gzip.compress(half) + gzip.compress(half)])
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


def test_a_line_with_a_time_beyond_int64_or_negative_costs_that_line_only(daemon):
    """Such a time was stored as 0 (the run then began in 1970); now it is an invalid line,
    counted, and every good line of the same message is kept, on both parse paths."""
    directory, proc = daemon
    good = gzip.open(only_file("v2_python_api")).read().splitlines(keepends=True)
    bad = [b'{"id":1,"name":"write","cat":"POSIX","pid":7,"tid":7,"ts":%s,"dur":%s,"ph":%s}\n'
           % (ts, dur, ph) for ts, dur in (
               (b"99999999999999999999999", b"1"), (b"9223372036854775808", b"1"),
               (b"-5", b"1"), (b"5", b"-1"), (b"1e30", b"1"), (b'"soon"', b"1"))
           for ph in (b"1", b'"X"')]
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(default_endpoints(directory).events[0])
    push.send(b"".join(good[:300] + bad + good[300:]))
    push.close()
    counters = wait_for(directory, "batches_received", 1)
    assert proc.poll() is None
    assert counters["records"] == 888
    assert counters["invalid_lines"] == len(bad)


def _processes_lines(first: int, count: int) -> bytes:
    """One write by each of `count` processes (pids from first + 1)."""
    return b"".join(
        b'{"id":%d,"name":"write","cat":"POSIX","pid":%d,"tid":%d,"ts":%d,"dur":5,"ph":1,'
        b'"args":{"ret":4096,"fhash":"ab"}}\n' % (i, i + 1, i + 1, 1000 + i)
        for i in range(first, first + count))


def test_many_processes_and_clients_are_bounded_and_recommend_stays_fast(daemon):
    """200,000 distinct processes took `recommend` 50 s and 900 MiB; 300 clients with long
    names were all kept and listed. Past the bounds they are counted, not kept."""
    from scrtune.client.connection import DaemonClient
    from scrtune.daemon.service import MAX_CLIENTS

    directory, proc = daemon
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(default_endpoints(directory).events[0])
    for first in range(0, 50_000, 10_000):
        push.send(_processes_lines(first, 10_000))
    push.close()
    requests = default_endpoints(directory).requests
    for index in range(MAX_CLIENTS + 44):
        DaemonClient(requests, timeout_s=5, name=f"{index:04d}" + "x" * 250).hello()
    counters = wait_for(directory, "batches_received", 5)
    assert counters["batches_invalid"] == 0
    client = DaemonClient(requests, timeout_s=60, retries=0)
    assert client.recommend().ok
    status = client.status().result
    assert len(status["clients"]) == MAX_CLIENTS and status["clients_seen"] > MAX_CLIENTS + 44
    assert min(status["clients"]).startswith(f"{44:04d}")  # the stalest went first
    assert psutil.Process(proc.pid).memory_info().rss < 1 << 30


# -- found by the fuzz campaign (tests/fuzzing.py): each failed before its fix ----------------
def test_a_batch_whose_codes_point_outside_its_tables_is_a_codec_error():
    from scrtune.events.codec import encode_batch
    from scrtune.events.parse import FileContext, parse_lines

    lines = gzip.open(only_file("v2_python_api")).read().splitlines(keepends=True)[:40]
    batch, _ = parse_lines(lines, FileContext())
    for column, value in (("cat", 1 << 40), ("file", 7_000_000), ("name", -5), ("dur_us", -1)):
        hostile = batch.columns[column].copy()
        hostile[0] = value
        broken = msgspec.structs.replace(batch, columns={**batch.columns, column: hostile})
        with pytest.raises(CodecError, match=column.split("_")[0]):
            decode_batch(encode_batch(broken))


def test_sums_past_int64_and_calls_past_2_tib_do_not_poison_the_statistics():
    """A write of 2^62 bytes, twice, made every later `recommend` fail (the state could no
    longer be serialised), and a call over 2 TiB broke the cost table's packing."""
    from scrtune.engine.stats import Stats
    from scrtune.engine.summary import finish

    line = (b'{"id":1,"name":"write","cat":"POSIX","pid":1,"tid":1,"ts":5,"dur":1,"ph":1,'
            b'"args":{"ret":%d,"fhash":"ab"}}\n')
    stats = Stats()
    for size in (*[1 << 62] * 5, 3 << 41):
        for batch in parse_messages([line % size]).batches:
            stats.add(batch)
    restored = Stats.from_bytes(stats.to_bytes())
    assert restored.ops["write"][2] == (1 << 63) - 1  # saturated, not wrapped or lost
    assert finish(restored).records == 6  # and it still summarises
    snapshot = bytearray(b"what the daemon's buffer held before")  # the snapshot's path
    stats.encode_into(snapshot)
    assert snapshot == stats.to_bytes()


def test_distinct_files_and_call_names_past_the_daemon_s_bounds_are_counted_together():
    from scrtune.engine.stats import MAX_FILES_PER_PROCESS, OVERFLOW, Stats

    calls = (b"write", b"pwrite", b"read", b"pread", b"writev", b"readv")
    lines = b"".join(
        b'{"id":%d,"name":"%s","cat":"POSIX","pid":1,"tid":1,"ts":%d,"dur":5,"ph":1,'
        b'"args":{"ret":4096,"fhash":"%x"}}\n' % (i, calls[i % 6], 1000 + i, i)
        for i in range(500))
    stats = Stats(max_processes=2)
    for batch in parse_messages([lines]).batches:
        stats.add(batch)
    assert len(stats.file_io) <= 2 * MAX_FILES_PER_PROCESS + 1 and OVERFLOW in stats.file_io
    assert len(stats.ops) <= 3 and OVERFLOW in stats.ops
    assert sum(calls for calls, _, _ in stats.ops.values()) == 500  # every call counted
    unbounded = Stats()
    for batch in parse_messages([lines]).batches:
        unbounded.add(batch)
    assert len(unbounded.file_io) == 500  # replay keeps them all


NESTED_SHAPES = {
    "lists-in-args": b'"args":' + b"[" * 200_000 + b"]" * 200_000,
    "objects-in-args": b'"args":' + b'{"a":' * 1000 + b"1" + b"}" * 1000,  # issue 45
    "mixed-in-args": b'"args":' + b'{"a":[' * 800 + b"1" + b"]}" * 800,
    "objects-in-name": b'"name":' + b'{"a":' * 1000 + b"1" + b"}" * 1000,
}


@pytest.mark.parametrize("shape", sorted(NESTED_SHAPES))
def test_a_deeply_nested_line_costs_that_line_only(daemon, shape):
    """One deeply nested JSON line once discarded its whole parse block, other producers'
    good lines with it: `[` nesting first, then (issue 45) `{"a":` nesting, which msgspec
    reports as a RecursionError."""
    directory, proc = daemon
    good = gzip.open(only_file("v2_python_api")).read().splitlines(keepends=True)
    nested = (b'{"id":1,"name":"write","cat":"POSIX","pid":7,"tid":7,"ts":5,"dur":1,"ph":1,'
              + NESTED_SHAPES[shape] + b"}\n")
    push = zmq.Context.instance().socket(zmq.PUSH)
    push.setsockopt(zmq.LINGER, 5000)
    push.connect(default_endpoints(directory).events[0])
    push.send(b"".join(good[:400]))
    push.send(nested)  # another producer's, parsed in the same block
    push.send(b"".join(good[400:]))
    push.close()
    counters = wait_for(directory, "batches_received", 3)
    assert proc.poll() is None
    assert counters["records"] == 888 and counters["invalid_lines"] == 1


def test_forwarded_offsets_on_the_open_dftracer_endpoint_cannot_move_a_file(tmp_path):
    """Issue 45: `--dftracer-endpoint` takes anyone's PUSH (the tracer knows no CURVE). A
    forwarded Lines message there once moved where the daemon stood in a file, and the real
    forwarder's lines were then refused as out of order. Offsets count only on the daemon's
    own socket; the planted message is counted invalid."""
    import os
    import subprocess

    from scrtune.daemon.protocol import Lines, encode
    from tests.conftest import SCRTUNE
    from tests.test_daemon import settled, start_daemon, stop

    directory, tracer = str(tmp_path / "d"), f"ipc://{tmp_path}/tracer.sock"
    trace = tmp_path / "job.pfw"
    trace.write_bytes(gzip.open(only_file("v2_python_api")).read())
    proc = start_daemon(directory, "--dftracer-endpoint", tracer)
    try:
        source = f"{os.uname().nodename}:{trace.stat().st_ino}:{trace}"
        push = zmq.Context.instance().socket(zmq.PUSH)
        push.setsockopt(zmq.LINGER, 5000)
        push.connect(tracer)
        junk = b"[\n" * 5000
        push.send(encode(Lines(source=source, start=0, end=len(junk), data=junk)))
        push.close()
        assert wait_for(directory, "batches_invalid", 1)["batches_invalid"] == 1
        forward = subprocess.run([*SCRTUNE, "forward", "--dir", directory, "--once",
                                  "--give-up-s", "20", str(trace)],
                                 capture_output=True, text=True, timeout=120)
        assert forward.returncode == 0, forward.stderr
        counters = settled(directory)
        assert counters["records"] == 888 and counters["batches_out_of_order"] == 0, counters
    finally:
        stop(proc)
