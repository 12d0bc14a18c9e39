"""The daemon's one thread: it owns both sockets and runs a poll loop driven by deadlines.

Requests (ROUTER) are answered first. Event messages (PULL) are drained into a bounded queue,
parsed in blocks on a parse thread, and aggregated within a time budget per turn; when
producers outrun processing the queue overflows and batches are dropped and counted, and
producers (PUSH, non-blocking) never wait.
"""

from __future__ import annotations

import collections
import logging
import math
import os
import signal
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import msgspec
import zmq

from scrtune.daemon import curve
from scrtune.daemon.endpoints import Endpoints, remove_socket_files
from scrtune.daemon.intake import Parsed, parse_messages
from scrtune.daemon.protocol import LINES_HEADER, MAX_EVENT_MESSAGE_BYTES, decode_lines
from scrtune.daemon.service import Service
from scrtune.errors import UsageError
from scrtune.heap import hold_freed_memory

log = logging.getLogger("scrtune.daemon")


@dataclass(frozen=True)
class LoopSettings:
    snapshot_interval_s: float = 5.0  # state saved for a restarted daemon to continue
    # a snapshot re-encodes and writes the whole state (tens of MB under a dense stream:
    # 0.1-0.3 s): the next one waits until that is at most this share of the loop's time,
    # and at most snapshot_max_interval_s (or snapshot_interval_s, if longer)
    snapshot_share: float = 0.01
    snapshot_max_interval_s: float = 60.0
    # event messages waiting to be processed, at most (one message of any allowed size is
    # taken into an empty queue): 0.5 s of a 1M events/s stream rides out a snapshot or a long
    # request. Bytes, not messages: DFTracer's writer sends one message per buffer, and at 4 KiB
    # buffers a bound of 1,024 messages (4 MiB) lost a quarter of an unpaced burst
    intake_queue_bytes: int = 64 << 20
    intake_budget_s: float = 0.05  # processing per turn before requests are served again
    # how long a received message may wait for others to be parsed with it: a block costs the
    # loop a fixed share of Python and numpy calls, so blocks of one message each (what a
    # steady stream below the daemon's capacity gives) cost several times the CPU per event
    intake_delay_s: float = 0.1
    # the event sockets are read at most this often: a turn of the loop costs about 50 µs of
    # CPU, and a steady stream brings a message every 0.3 ms at 1M events/s; ZeroMQ holds
    # what arrives meanwhile (up to its receive high-water mark, 1,000 messages)
    intake_tick_s: float = 0.02
    poll_s: float = 0.2  # longest sleep: how soon SIGTERM is noticed


def serve(service: Service, endpoints: Endpoints, settings: LoopSettings | None = None) -> int:
    """Serve until SIGTERM, SIGUSR1 or SIGINT; the signal that stopped it."""
    settings = settings or LoopSettings()
    stop = _stop_on_signals()
    if not hold_freed_memory():
        log.debug("freed memory goes back to the kernel (not glibc): intake costs more CPU")
    context = zmq.Context()
    # the DFTracer endpoints take the tracer's own PUSH, which knows no CURVE: a socket of
    # their own, so that ours can require it over TCP
    router, pull, tracer = (context.socket(kind) for kind in (zmq.ROUTER, zmq.PULL, zmq.PULL))
    authenticator = _secure(context, endpoints, router, pull)
    for sock in (router, pull, tracer):
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_EVENT_MESSAGE_BYTES)  # bigger peers: disconnected
        sock.setsockopt(zmq.IPV6, 1)  # accepts IPv4 too; needed for [::1]
    main_events, *tracer_events = endpoints.events
    for sock, endpoint in ((router, endpoints.requests), (pull, main_events),
                           *((tracer, endpoint) for endpoint in tracer_events)):
        try:
            sock.bind(endpoint)
        except zmq.ZMQError as exc:  # in use, no such address, no permission
            if authenticator is not None:
                authenticator.stop()
            context.destroy(linger=0)
            raise UsageError(f"cannot listen on {endpoint}: {exc}") from None
    log.info("serving requests on %s, events on %s%s", endpoints.requests,
             ", ".join(endpoints.events), " (CURVE)" if authenticator else "")
    intake = _Intake(service, settings)
    try:
        _turns(stop, service, settings, router, (pull, tracer), intake)
        _take_the_rest((pull, tracer), intake)
    finally:
        intake.finish()  # what was accepted is processed before the state is saved
        _snapshot(service)
        for sock in (router, pull, tracer):
            sock.close()
        if authenticator is not None:
            authenticator.stop()
        context.term()
        remove_socket_files(endpoints)
        log.info("stopped")
    return stop.signum


def _turns(stop: _Stop, service: Service, settings: LoopSettings, router: zmq.Socket,
           pulls: tuple[zmq.Socket, ...], intake: _Intake) -> None:
    """The loop until stopped: requests first, then events, parses and snapshots as their
    deadlines come. After reading events the loop leaves the event sockets alone for
    intake_tick_s (it polls `quiet` then), so a steady stream wakes it a few times per
    tick, not once per message."""
    quiet = zmq.Poller()  # requests, and parses finished
    quiet.register(router, zmq.POLLIN)
    quiet.register(intake.wakeup, zmq.POLLIN)
    everything = zmq.Poller()
    for sock in (router, *pulls):
        everything.register(sock, zmq.POLLIN)
    everything.register(intake.wakeup, zmq.POLLIN)
    next_snapshot = time.monotonic() + settings.snapshot_interval_s
    next_take = 0.0  # when the event sockets are polled again
    while not stop:
        now = time.monotonic()
        taking = now >= next_take
        due = min(next_snapshot, intake.due_s(), math.inf if taking else next_take)
        wait_s = 0.0 if intake.ready(now) else min(settings.poll_s, max(0.0, due - now))
        ready = dict((everything if taking else quiet).poll(math.ceil(wait_s * 1000)))
        if router in ready:
            _answer(router, service)
        if any(sock in ready for sock in pulls):
            for sock in pulls:
                if sock in ready:  # offsets only from the daemon's own socket: see drain
                    intake.drain(sock, own=sock is pulls[0])
            next_take = time.monotonic() + settings.intake_tick_s
        if intake.wakeup in ready:
            intake.clear_wakeups()
        intake.process(time.monotonic() + settings.intake_budget_s)
        if time.monotonic() >= next_snapshot:
            began = time.monotonic()
            _snapshot(service)
            ended = time.monotonic()
            next_snapshot = ended + snapshot_wait_s(settings, ended - began)


def _take_the_rest(pulls: tuple[zmq.Socket, ...], intake: _Intake, quiet_ms: int = 50,
                   bound_s: float = 1.0) -> None:
    """At a stop, what the event sockets already hold, until they stay quiet for `quiet_ms`
    (at most `bound_s`). A relay or a tracer's PUSH counts a buffer sent once ZeroMQ queued it
    towards the daemon, and a stop came between the loop's turns, which leave the event
    sockets alone for a tick: unread, it was lost (a daemon restarted under the README's relay
    recipe lost 21 records once in about 20 CI runs). What arrives after the last poll, in the
    moment before the sockets close, still is: a forwarder resends it from its offsets."""
    poller = zmq.Poller()
    for sock in pulls:
        poller.register(sock, zmq.POLLIN)
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        ready = dict(poller.poll(quiet_ms))
        if not ready:
            return
        for sock in pulls:
            if sock in ready:
                intake.drain(sock, own=sock is pulls[0])


def snapshot_wait_s(settings: LoopSettings, took_s: float) -> float:
    """How long after a snapshot that took `took_s` the next one is due: the configured
    interval, or longer when saving is slow, so that snapshots take at most
    `snapshot_share` of the loop's time (a large state costs a crash more recent records, up
    to the ceiling, never the records a forwarder resends from the saved offsets)."""
    ceiling_s = max(settings.snapshot_max_interval_s, settings.snapshot_interval_s)
    return min(max(settings.snapshot_interval_s, took_s / settings.snapshot_share), ceiling_s)


def _secure(context: zmq.Context, endpoints: Endpoints, *socks: zmq.Socket):
    """Over TCP, our sockets are CURVE servers admitting the job's client key (curve.py);
    the authenticator to stop, or None over IPC."""
    if not curve.is_tcp(endpoints.requests):
        return None
    key_dir = curve.ensure_keys(endpoints.directory)
    keys = curve.load_keys(endpoints.directory, server=True)
    for sock in socks:
        curve.serve_securely(sock, keys)
    return curve.start_authenticator(context, key_dir)


def _snapshot(service: Service) -> None:
    """Save the state; a failure (a full disk, an export that cannot be written) is logged
    and tried again at the next snapshot, and the daemon keeps serving."""
    try:
        service.snapshot()
    except Exception:
        log.exception("could not save the state")


def _answer(router: zmq.Socket, service: Service) -> None:
    while True:
        try:
            frames = router.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        identity, payload = frames[0], frames[-1]
        router.send_multipart([identity, service.handle(payload)])


# trace-line buffers parsed and aggregated as one block. A block costs the loop thread a fixed
# share of Python and numpy calls: 16 MiB took a sixth off its CPU per event against 4 MiB. It
# holds no more messages (the queue bound does), only the block's columns (about 8 MiB). A
# block is parsed when this much is queued, or when its first message has waited
# LoopSettings.intake_delay_s.
COALESCE_BYTES = 16 << 20
PARSE_AHEAD = 2  # blocks parsing or parsed, waiting to be aggregated


class _Queued(msgspec.Struct, frozen=True, gc=False):  # a tenth of a frozen dataclass's cost
    message: zmq.Frame | bytes  # bytes: the data of a forwarded Lines message
    position: tuple[str, int] | None  # a Lines message's (source, end offset)
    arrived_s: float  # time.monotonic()


QUEUED_MESSAGE_BYTES = 1024  # a queued message's frame and entry, beside its bytes


def _kept_bytes(message) -> int:
    """What a queued message costs the queue's bound: its bytes and its keeping, so that a
    flood of empty messages is bounded too."""
    return len(message) + QUEUED_MESSAGE_BYTES


class _Intake:
    """Event messages on their way into the statistics: a bounded queue of received
    messages, blocks of them on one parse thread, and aggregation (which needs the
    statistics) on the loop thread. The parse thread touches no socket: it says it is done
    through a pipe the loop polls."""

    def __init__(self, service: Service, settings: LoopSettings) -> None:
        self._service = service
        self._limit_bytes = settings.intake_queue_bytes
        self._delay_s = settings.intake_delay_s
        self._queue: collections.deque[_Queued] = collections.deque()
        self._queued_bytes = 0
        self.received = 0  # messages accepted: queued, or handed to the parser
        # (parse, the (source, end) of its Lines messages), oldest first
        self._parsing: collections.deque[tuple[Future[Parsed], list]] = collections.deque()
        self._parser = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scrtune-parse")
        self.wakeup, self._wake = os.pipe()
        os.set_blocking(self.wakeup, False)
        os.set_blocking(self._wake, False)

    def ready(self, now: float) -> bool:
        """True when there is work the loop can do now, without waiting."""
        return bool(self._parsing and self._parsing[0][0].done() or self._block_due(now))

    def due_s(self) -> float:
        """When the queued messages are due to be parsed, if nothing else comes (inf: none
        queued)."""
        return self._queue[0].arrived_s + self._delay_s if self._queue else math.inf

    def _block_due(self, now: float) -> bool:
        return bool(self._queue) and len(self._parsing) < PARSE_AHEAD and (
            self._queued_bytes >= COALESCE_BYTES or now >= self.due_s())

    def drain(self, pull: zmq.Socket, own: bool = True) -> None:
        """Receive what `pull` holds. `own`: the daemon's events socket (in its private
        directory, or with CURVE); the DFTracer endpoints take anyone's PUSH, so a forwarded
        Lines message there is refused: its offsets would move where the daemon stands in a
        file, and the real forwarder's lines would then be refused as out of order."""
        counters = self._service.counters
        while True:
            try:
                message = pull.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if self._queue and self._queued_bytes + _kept_bytes(message) > self._limit_bytes:
                counters.batches_received += 1
                counters.batches_dropped += 1
                continue
            position = None
            view = message.buffer  # a new memoryview at every read of the attribute
            if view[:len(LINES_HEADER)] == LINES_HEADER:  # forwarded, with offsets
                lines = decode_lines(view) if own else None  # its data a view: the frame lives
                if lines is None or not self._service.offsets.accept(lines):
                    counters.batches_received += 1
                    if lines is None:
                        counters.batches_invalid += 1
                    else:  # a resend of lines taken, or past a gap: the forwarder resends
                        counters.batches_out_of_order += 1
                    continue
                message, position = lines.data, (lines.source, lines.end)
            now = time.monotonic()
            self._queue.append(_Queued(message, position, now))
            self.received += 1
            self._queued_bytes += _kept_bytes(message)
            self._feed(now)  # a block's worth goes to the parser before more are received

    def process(self, deadline: float) -> None:
        self._feed(time.monotonic())
        while self._parsing and self._parsing[0][0].done() and time.monotonic() < deadline:
            parsing, positions = self._parsing.popleft()
            self._service.take(parsing.result(), positions)
            self._feed(time.monotonic())

    def clear_wakeups(self) -> None:
        """Empty the pipe the loop was woken by (ready() then looks at the parses)."""
        try:
            os.read(self.wakeup, 4096)
        except BlockingIOError:
            pass

    def _feed(self, now: float) -> None:
        while self._block_due(now):
            messages, positions = self._block()
            parsing = self._parser.submit(parse_messages, messages)
            parsing.add_done_callback(self._woken)
            self._parsing.append((parsing, positions))

    def _woken(self, _: Future) -> None:
        try:
            os.write(self._wake, b".")
        except BlockingIOError:
            pass  # the pipe is full of wake-ups already: the loop will look

    def _block(self) -> tuple[list, list[tuple[str, int]]]:
        """Messages to parse together, and the (source, end) of those that were Lines."""
        taken, positions, size = [], [], 0
        while self._queue and size < COALESCE_BYTES:
            queued = self._queue.popleft()
            taken.append(queued.message)
            size += _kept_bytes(queued.message)
            if queued.position is not None:
                positions.append(queued.position)
        self._queued_bytes -= size
        return taken, positions

    def finish(self) -> None:
        while self._parsing:
            parsing, positions = self._parsing.popleft()
            self._service.take(parsing.result(), positions)
        while self._queue:
            messages, positions = self._block()
            self._service.take(parse_messages(messages), positions)
        self._parser.shutdown()
        os.close(self.wakeup)
        os.close(self._wake)


class _Stop:
    # slots: a caller that sets an attribute the loop does not read fails, not hangs the loop
    __slots__ = ("signum",)

    def __init__(self) -> None:
        self.signum = 0  # the first signal that asked (0: none): SIGINT makes the exit 130

    def __bool__(self) -> bool:
        return self.signum != 0

    def request(self, signum: int = signal.SIGTERM) -> None:
        """Stop at the loop's next turn; the first request's signal is the one reported."""
        self.signum = self.signum or signum


def _stop_on_signals() -> _Stop:
    stop = _Stop()

    def request(signum: int, frame: object) -> None:
        stop.request(signum)

    # SIGUSR1 as SIGTERM: a job script stops a step with `scancel --signal=USR1`, which Slurm
    # does not report as "STEP ... CANCELLED" errors in the job's output as it does for TERM
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(signum, request)
    return stop
