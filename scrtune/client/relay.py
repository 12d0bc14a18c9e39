"""Hold DFTracer's ZeroMQ endpoint for the application's whole life (issue 47).

DFTracer's ZeroMQ writer connects a PUSH socket to $DFTRACER_ZMQ_ENDPOINT and closes it at exit
with ZeroMQ's default linger, infinite: while nothing is bound there, the traced application
hangs in exit until something binds (a daemon not up yet, stopped, killed or paused). The
relay is that something: a small process with nothing else to do, bound at the writer's
endpoint from before the application starts until after it ends, that passes each buffer on
to the node's daemon. When the daemon is away (restarting, killed, paused) it holds what
arrives, up to `hold_bytes`, and sends it when the daemon is back; beyond that the oldest
buffers are dropped and counted. It never waits on the daemon, so the application never
waits on it.

What arrives is anyone's who can reach the endpoint (prefer ipc:// in a private directory):
the relay passes DFTracer's buffers only. A forwarded Lines message (with file offsets, which
move where the daemon stands in a file) is refused and counted, as the daemon's own
--dftracer-endpoint does: on the daemon's events socket it would otherwise be trusted.
"""

from __future__ import annotations

import collections
import logging
import signal
import time
from dataclasses import dataclass

import zmq

from scrtune.client.connection import key_directory
from scrtune.daemon import curve
from scrtune.daemon.protocol import LINES_HEADER, MAX_EVENT_MESSAGE_BYTES
from scrtune.errors import UsageError

log = logging.getLogger("scrtune.relay")
HOLD_BYTES = 64 << 20  # what a daemon restart of a few seconds needs at 1M events/s
DRAIN_S = 2.0  # at the end, how long what is held may take to reach the daemon


@dataclass(frozen=True)
class Relayed:
    received: int  # buffers taken from the writers
    sent: int  # passed to the daemon's connection (a daemon paused at the end may miss them)
    dropped: int  # held too long: the oldest, beyond hold_bytes, or left at the end
    refused: int  # forwarded Lines, not the writer's
    stopped_by: int | None


class Relay:
    def __init__(self, listen: str, endpoint: str, key_dir: str | None = None,
                 hold_bytes: int = HOLD_BYTES) -> None:
        self._context = zmq.Context()
        self._pull = self._context.socket(zmq.PULL)
        self._push = self._context.socket(zmq.PUSH)
        for sock in (self._pull, self._push):
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.IPV6, 1)
        self._pull.setsockopt(zmq.MAXMSGSIZE, MAX_EVENT_MESSAGE_BYTES)
        # queue only towards a daemon that is there: what is not sent stays held, counted
        self._push.setsockopt(zmq.IMMEDIATE, 1)
        self._push.setsockopt(zmq.SNDHWM, 64)
        try:
            self._pull.bind(listen)
            if curve.is_tcp(endpoint):
                curve.connect_securely(self._push, endpoint, key_dir or key_directory())
            self._push.connect(endpoint)
        except (zmq.ZMQError, UsageError) as exc:
            self._context.destroy(linger=0)
            raise UsageError(f"relay {listen} -> {endpoint}: {exc}") from None
        self.hold_bytes = hold_bytes
        self._held: collections.deque[zmq.Frame] = collections.deque()
        self._held_bytes = 0
        self.received = self.sent = self.dropped = self.refused = 0

    @property
    def held(self) -> int:
        return len(self._held)

    def pump(self, wait_ms: int) -> None:
        """Take what the writers sent (waiting up to `wait_ms` for it), then pass on what the
        daemon takes now."""
        if self._pull.poll(wait_ms if not self._held else min(wait_ms, 50)):
            self._take()
        self._send()

    def _take(self) -> None:
        while True:
            try:
                frame = self._pull.recv(zmq.NOBLOCK, copy=False)
            except zmq.Again:
                return
            if frame.buffer[:len(LINES_HEADER)] == LINES_HEADER:
                self.refused += 1
                continue
            self.received += 1
            self._held.append(frame)
            self._held_bytes += len(frame)
            while self._held_bytes > self.hold_bytes and len(self._held) > 1:
                self._held_bytes -= len(self._held.popleft())
                self.dropped += 1

    def _send(self) -> None:
        while self._held:
            try:
                self._push.send(self._held[0], zmq.NOBLOCK, copy=False)
            except zmq.Again:  # no daemon connected, or it is behind: keep holding
                return
            self._held_bytes -= len(self._held.popleft())
            self.sent += 1

    def finish(self, drain_s: float = DRAIN_S) -> None:
        """Take the last buffers and give the daemon `drain_s` to take what is held."""
        self._take()
        deadline = time.monotonic() + drain_s
        while self._held and time.monotonic() < deadline:
            self._send()
            if self._held:
                time.sleep(0.01)
        self.dropped += len(self._held)
        self._held.clear()
        # what ZeroMQ queued towards the daemon still has to get there, within the same bound
        self._push.close(linger=max(100, int((deadline - time.monotonic()) * 1000)))
        self._pull.close(linger=0)
        self._context.term()


def relay(listen: str, endpoint: str, key_dir: str | None = None,
          hold_bytes: int = HOLD_BYTES) -> Relayed:
    """Relay until SIGTERM, SIGUSR1 (Slurm's end of a step, see daemon.loop) or SIGINT."""
    stopping: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):
        signal.signal(signum, lambda number, _frame: stopping.append(number))
    relaying = Relay(listen, endpoint, key_dir, hold_bytes)
    log.info("holding %s for DFTracer's writer, passing to %s", listen, endpoint)
    said_holding = False  # said once each time the daemon falls behind
    try:
        while not stopping:
            relaying.pump(100)
            if relaying.held > 64 and not said_holding:
                log.info("the daemon at %s is not taking events: holding them (up to %d MiB)",
                         endpoint, hold_bytes >> 20)
                said_holding = True
            elif not relaying.held:
                said_holding = False
    finally:
        relaying.finish()
    log.info("relayed %d of %d buffers (%d dropped, %d refused)", relaying.sent,
             relaying.received, relaying.dropped, relaying.refused)
    return Relayed(relaying.received, relaying.sent, relaying.dropped, relaying.refused,
                   stopping[0] if stopping else None)
