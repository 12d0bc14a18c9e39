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
    kept = len(MESSAGE) + loop.QUEUED_MESSAGE_BYTES
    monkeypatch.setattr(loop, "COALESCE_BYTES", 2 * kept)
    taken = Taken(tmp_path)
    intake = _Intake(taken.service, LoopSettings(intake_queue_bytes=3 * kept,
                                                 intake_delay_s=60))
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
    kept = len(MESSAGE) + loop.QUEUED_MESSAGE_BYTES
    settings = LoopSettings(intake_queue_bytes=3 * kept, intake_delay_s=60)
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


def _start_loop(tmp_path, pull: zmq.Socket, taken: Taken, settings: LoopSettings,
                intake: _Intake) -> tuple[_Stop, threading.Thread]:
    """The daemon's loop on a thread of its own, requests on `tmp_path`/requests.sock."""
    router = pull.context.socket(zmq.ROUTER)
    router.bind(f"ipc://{tmp_path}/requests.sock")
    stop = _Stop()
    thread = threading.Thread(target=_turns, args=(stop, taken.service, settings, router,
                                                   (pull,), intake))
    thread.start()
    return stop, thread


def test_a_steady_stream_is_read_once_per_tick_and_requests_are_answered(tmp_path, sockets):
    """Fifty messages, one every 10 ms: the loop reads the event socket a few times per
    0.2 s tick (not once per message), answers a request meanwhile, and takes them all."""
    pull, push, _ = sockets
    taken = Taken(tmp_path)
    settings = LoopSettings(intake_delay_s=0.05, intake_tick_s=0.2, poll_s=0.05)
    intake = _Intake(taken.service, settings)
    drains: list[float] = []
    drain = intake.drain

    def counted(sock: zmq.Socket, own: bool = True) -> None:
        drains.append(time.monotonic())
        drain(sock, own)

    intake.drain = counted  # type: ignore[method-assign]
    stop, thread = _start_loop(tmp_path, pull, taken, settings, intake)
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
        stop.request()
        thread.join(timeout=60)
        intake.finish()
    assert not thread.is_alive(), "the loop did not stop when asked"
    assert sum(taken.blocks) == 50 and taken.service.counters.records == 50 * RECORDS
    assert taken.service.counters.batches_dropped == 0
    # at most one read per tick: the loop leaves the event socket alone for a tick after each
    # read, counted from the read's end, so a busy machine only widens the gaps
    gaps_s = [later - earlier for earlier, later in zip(drains, drains[1:])]
    assert len(drains) >= 2 and min(gaps_s) >= 0.2
    assert len(taken.blocks) < 25  # blocks of several messages


def _snapshots_in(tmp_path, sockets, settings: LoopSettings, run_s: float,
                  snapshot_s: float) -> list[float]:
    """Run the loop for `run_s` with snapshots that take `snapshot_s` (the state is saved
    from the loop's thread, its store was opened in this one); when each snapshot began."""
    pull, _, _ = sockets
    taken = Taken(tmp_path)
    began: list[float] = []

    def slow() -> None:
        began.append(time.monotonic())
        time.sleep(snapshot_s)

    taken.service.snapshot = slow  # type: ignore[method-assign]
    intake = _Intake(taken.service, settings)
    stop, thread = _start_loop(tmp_path, pull, taken, settings, intake)
    time.sleep(run_s)
    stop.request()
    thread.join(timeout=60)
    intake.finish()
    assert not thread.is_alive(), "the loop did not stop when asked"
    return began


def test_slow_snapshots_come_less_often_down_to_their_share_of_the_loop(tmp_path, sockets):
    """Snapshots of 50 ms at most a quarter of the loop's time: one every 0.2 s or more,
    where the 10 ms interval alone would take one every 60 ms."""
    settings = LoopSettings(snapshot_interval_s=0.01, snapshot_share=0.25, poll_s=0.01)
    began = _snapshots_in(tmp_path, sockets, settings, 1.5, 0.05)
    gaps = [later - earlier for earlier, later in zip(began, began[1:])]
    assert len(began) >= 3 and min(gaps) >= 0.05 / 0.25 + 0.05 - 0.01, gaps


def test_the_snapshot_interval_stretches_no_further_than_its_ceiling(tmp_path, sockets):
    settings = LoopSettings(snapshot_interval_s=0.01, snapshot_share=0.001,
                            snapshot_max_interval_s=0.2, poll_s=0.01)
    began = _snapshots_in(tmp_path, sockets, settings, 1.5, 0.05)
    gaps = [later - earlier for earlier, later in zip(began, began[1:])]
    assert len(began) >= 4 and max(gaps) < 0.2 + 0.05 + 0.1, gaps  # not 50 s


def test_snapshot_wait_keeps_the_configured_interval_when_saving_is_quick():
    assert loop.snapshot_wait_s(LoopSettings(snapshot_interval_s=5.0), 0.01) == 5.0
    assert loop.snapshot_wait_s(LoopSettings(snapshot_interval_s=5.0, snapshot_share=0.02),
                                0.3) == 15.0
    # an interval configured beyond the ceiling is kept
    assert loop.snapshot_wait_s(LoopSettings(snapshot_interval_s=120.0), 5.0) == 120.0
