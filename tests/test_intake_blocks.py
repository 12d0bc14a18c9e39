"""How the daemon's loop gathers event messages into blocks (scrtune/daemon/loop.py): a block
costs the loop a fixed share of Python and numpy calls, so a steady stream is parsed in blocks
of many messages, not one block per message, and without dropping what it holds."""

from __future__ import annotations

import gzip
import threading
import time

import pytest
import zmq

from scrtune.client import DaemonClient
from scrtune.daemon import loop
from scrtune.daemon.intake import Parsed
from scrtune.daemon.loop import LoopSettings, _Intake, _Stop, _turns
from scrtune.daemon.service import Service
from scrtune.engine.replay import EXAMPLE_TRACE
from scrtune.goodput.store import Store
from scrtune.intents.inputs import SystemProfile

LINES = [line for line in gzip.open(EXAMPLE_TRACE).read().split(b"\n")
         if line and b'"ph":4' not in line]
MESSAGE = b"\n".join(LINES[:100]) + b"\n"  # 100 records
RECORDS = 100


class Taken:
    """The service, with the blocks it took recorded: messages in each."""

    def __init__(self, tmp_path) -> None:
        self.service = Service(Store(str(tmp_path / "s.sqlite")), SystemProfile())
        self.blocks: list[int] = []
        take = self.service.take

        def recording(parsed: Parsed, positions=()) -> None:
            self.blocks.append(parsed.messages)
            take(parsed, positions)

        self.service.take = recording  # type: ignore[method-assign]


@pytest.fixture
def sockets(tmp_path):
    context = zmq.Context()
    pull, push = context.socket(zmq.PULL), context.socket(zmq.PUSH)
    endpoint = f"ipc://{tmp_path}/events.sock"
    pull.bind(endpoint)
    push.connect(endpoint)
    yield pull, push, endpoint
    context.destroy(linger=0)


def _received(intake: _Intake, pull: zmq.Socket, count: int) -> None:
    """Drain until `count` messages were received (queued, or handed to the parser)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        intake.drain(pull)
        if intake.received == count:
            return
        time.sleep(0.005)
    raise AssertionError(f"received {intake.received} of {count} messages")


def _processed(intake: _Intake, taken: Taken, messages: int) -> None:
    deadline = time.monotonic() + 10
    while sum(taken.blocks) < messages and time.monotonic() < deadline:
        intake.process(time.monotonic() + 1)
        time.sleep(0.005)


def test_messages_wait_for_others_then_are_parsed_as_one_block(tmp_path, sockets):
    pull, push, _ = sockets
    taken = Taken(tmp_path)
    intake = _Intake(taken.service, LoopSettings(intake_delay_s=0.5))
    try:
        for _ in range(5):
            push.send(MESSAGE)
        _received(intake, pull, 5)
        sent_s = time.monotonic()
        intake.process(sent_s + 1)
        assert not intake.ready(time.monotonic()) and taken.blocks == []  # not due yet
        assert intake.due_s() - sent_s <= 0.5
        time.sleep(max(0.0, intake.due_s() - time.monotonic()))
        assert intake.ready(time.monotonic())
        _processed(intake, taken, 5)
        assert taken.blocks == [5]
        assert taken.service.counters.records == 5 * RECORDS
        assert intake.due_s() == float("inf")  # nothing left waiting
    finally:
        intake.finish()


def test_a_block_s_worth_goes_to_the_parser_while_draining_and_nothing_is_dropped(
        tmp_path, sockets, monkeypatch):
    """With room for three messages in the queue, seven received at once are all kept: every
    two (a block's worth here) go to the parser as they come, two blocks at a time; the
    last waits for its delay, or for the daemon to stop, which processes it."""
    pull, push, _ = sockets
    monkeypatch.setattr(loop, "COALESCE_BYTES", 2 * len(MESSAGE))
    taken = Taken(tmp_path)
    intake = _Intake(taken.service, LoopSettings(intake_queue=3, intake_delay_s=60))
    for _ in range(7):
        push.send(MESSAGE)
    time.sleep(0.2)  # all seven in ZeroMQ's queue: one drain takes them
    _received(intake, pull, 7)
    assert taken.service.counters.batches_dropped == 0
    _processed(intake, taken, 6)
    assert taken.blocks[:3] == [2, 2, 2]
    intake.finish()
    assert taken.blocks == [2, 2, 2, 1]
    assert taken.service.counters.records == 7 * RECORDS
    assert taken.service.counters.batches_received == 7


def test_the_queue_is_bounded_in_bytes_and_takes_one_message_of_any_size(
        tmp_path, sockets, monkeypatch):
    """Beyond intake_queue_bytes, messages are dropped and counted, whatever their number;
    a message bigger than the bound is still taken into an empty queue."""
    pull, push, _ = sockets
    taken = Taken(tmp_path)
    settings = LoopSettings(intake_queue_bytes=3 * len(MESSAGE), intake_delay_s=60)
    intake = _Intake(taken.service, settings)
    monkeypatch.setattr(intake, "_feed", lambda now: None)  # nothing leaves for the parser
    for _ in range(5):
        push.send(MESSAGE)
    time.sleep(0.2)
    intake.drain(pull)
    assert (intake.received, taken.service.counters.batches_dropped) == (3, 2)
    (tmp_path / "big").mkdir()
    big = _Intake(Taken(tmp_path / "big").service, LoopSettings(intake_queue_bytes=10))
    monkeypatch.setattr(big, "_feed", lambda now: None)
    push.send(MESSAGE)
    push.send(MESSAGE)
    time.sleep(0.2)
    big.drain(pull)
    assert big.received == 1 and big._service.counters.batches_dropped == 1
    intake.finish()
    big.finish()


def test_a_steady_stream_is_read_once_per_tick_and_requests_are_answered(tmp_path, sockets):
    """Fifty messages, one every 10 ms: the loop reads the event socket a few times per
    0.2 s tick (not once per message), answers a request meanwhile, and takes them all."""
    pull, push, _ = sockets
    taken = Taken(tmp_path)
    settings = LoopSettings(intake_delay_s=0.05, intake_tick_s=0.2, poll_s=0.05)
    intake = _Intake(taken.service, settings)
    drains: list[float] = []
    drain = intake.drain

    def counted(sock: zmq.Socket) -> None:
        drains.append(time.monotonic())
        drain(sock)

    intake.drain = counted  # type: ignore[method-assign]
    router = pull.context.socket(zmq.ROUTER)
    router.bind(f"ipc://{tmp_path}/requests.sock")
    stop = _Stop()
    thread = threading.Thread(target=_turns, args=(stop, taken.service, settings, router,
                                                   (pull,), intake))
    thread.start()
    try:
        started = time.monotonic()
        for index in range(50):
            time.sleep(max(0.0, started + index * 0.01 - time.monotonic()))
            push.send(MESSAGE)
        hello = DaemonClient(f"ipc://{tmp_path}/requests.sock", timeout_s=5).hello()
        assert hello is not None and hello.result["pid"] > 0
        deadline = time.monotonic() + 10
        while sum(taken.blocks) < 50 and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        stop.requested = True
        thread.join()
        intake.finish()
    assert sum(taken.blocks) == 50 and taken.service.counters.records == 50 * RECORDS
    assert taken.service.counters.batches_dropped == 0
    elapsed_s = drains[-1] - drains[0]
    assert len(drains) <= elapsed_s / 0.2 + 2  # at most one read per tick (+ the first)
    assert len(taken.blocks) < 25  # blocks of several messages
