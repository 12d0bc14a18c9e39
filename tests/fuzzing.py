"""A fuzz campaign against a running daemon: random and mutated messages on both its sockets.

Seeds are real messages (every request type in msgpack; DFTracer lines of a real trace, plain
and gzipped; scrtune's own event batch); each message is random bytes or a seed mutated
(bytes flipped, inserted, cut, spliced with another seed). Used by tests/test_fuzz.py (a
bounded campaign in CI) and benchmarks/fuzz_daemon.py (a million messages per socket).
"""

from __future__ import annotations

import gzip
import random
import time
from dataclasses import dataclass

import psutil
import zmq

from scrtune.daemon import protocol
from scrtune.daemon.endpoints import default_endpoints
from scrtune.events.codec import encode_batch
from scrtune.events.parse import FileContext, parse_lines


@dataclass
class Campaign:
    request_messages: int = 0
    event_messages: int = 0
    replies: int = 0
    peak_rss_bytes: int = 0
    daemon_died: bool = False
    elapsed_s: float = 0.0


def seeds(trace_path: str) -> tuple[list[bytes], list[bytes]]:
    """(request seeds, event seeds)."""
    requests = [protocol.encode(message) for message in (
        protocol.Hello(request_id=7, client="fuzz"), protocol.Status(request_id=8),
        protocol.Recommend(request_id=9), protocol.Relaunch(request_id=10),
        protocol.Record(request_id=11, job="fuzz", kind="checkpoint_save_finished",
                        wall_s=1.7e9, step=3, detail='{"config": "abc", "save_s": 1.5}',
                        record_id="fuzz-1"),
        protocol.Offsets(request_id=12, sources=["fuzz-source"]))]
    lines = gzip.open(trace_path).read().splitlines(keepends=True)
    block = b"".join(lines[:40])
    batch, _ = parse_lines(lines[:40], FileContext())
    events = [block, gzip.compress(block), encode_batch(batch), b"".join(lines[40:60]),
              protocol.encode(protocol.Lines("fuzz-source", 0, len(block), block))]
    return requests, events


def mutate(rng: random.Random, data: bytes, others: list[bytes]) -> bytes:
    if rng.random() < 0.25:
        return rng.randbytes(rng.randint(0, 200))
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        choice = rng.random()
        at = rng.randint(0, max(len(out) - 1, 0))
        if choice < 0.4 and out:
            out[at] = rng.getrandbits(8)
        elif choice < 0.6:
            out[at:at] = rng.randbytes(rng.randint(1, 16))
        elif choice < 0.8:
            del out[at:at + rng.randint(1, 64)]
        else:
            other = rng.choice(others)
            out[at:] = other[rng.randint(0, max(len(other) - 1, 0)):]
    return bytes(out)


def run_campaign(directory: str, pid: int, per_socket: int, trace_path: str,
                 seed: int = 12) -> Campaign:
    """Send `per_socket` messages on each socket of the daemon (pid) in `directory`."""
    rng = random.Random(seed)
    request_seeds, event_seeds = seeds(trace_path)
    endpoints = default_endpoints(directory)
    context = zmq.Context.instance()
    dealer, push = context.socket(zmq.DEALER), context.socket(zmq.PUSH)
    for sock in (dealer, push):
        sock.setsockopt(zmq.LINGER, 10_000)  # what is queued at the end reaches the daemon
        sock.setsockopt(zmq.SNDHWM, 1000)
    dealer.connect(endpoints.requests)
    push.connect(endpoints.events[0])
    daemon = psutil.Process(pid)
    result = Campaign()
    started = time.monotonic()
    try:
        while result.request_messages < per_socket or result.event_messages < per_socket:
            if result.request_messages < per_socket:
                _send(dealer, mutate(rng, rng.choice(request_seeds), request_seeds))
                result.request_messages += 1
            if result.event_messages < per_socket:
                _send(push, mutate(rng, rng.choice(event_seeds), event_seeds))
                result.event_messages += 1
            result.replies += _drain(dealer)
            if result.request_messages % 2000 == 0:
                if not daemon.is_running() or daemon.status() == psutil.STATUS_ZOMBIE:
                    result.daemon_died = True
                    break
                result.peak_rss_bytes = max(result.peak_rss_bytes, daemon.memory_info().rss)
    finally:
        dealer.close()
        push.close()
    result.elapsed_s = time.monotonic() - started
    return result


def _send(sock: zmq.Socket, message: bytes) -> None:
    """Send, waiting while the daemon's queue is full: every message must reach it."""
    while True:
        try:
            sock.send(message, zmq.NOBLOCK)
            return
        except zmq.Again:
            if sock.type == zmq.DEALER:
                _drain(sock)
            time.sleep(0.0005)


def _drain(dealer: zmq.Socket) -> int:
    replies = 0
    while True:
        try:
            dealer.recv(zmq.NOBLOCK)
            replies += 1
        except zmq.Again:
            return replies
