"""The daemon's one thread: it owns both sockets and runs a poll loop driven by deadlines.

Requests (ROUTER) are answered first. Event messages (PULL) are drained into a bounded queue
and processed within a time budget per turn; when producers outrun processing the queue
overflows and batches are dropped and counted, and producers (PUSH, non-blocking) never wait.
"""

from __future__ import annotations

import collections
import logging
import signal
import time
from dataclasses import dataclass

import zmq

from scrtune.daemon.endpoints import Endpoints
from scrtune.daemon.protocol import MAX_EVENT_MESSAGE_BYTES
from scrtune.daemon.service import Service

log = logging.getLogger("scrtune.daemon")


@dataclass(frozen=True)
class LoopSettings:
    snapshot_interval_s: float = 5.0  # state saved for a restarted daemon to continue
    intake_queue: int = 256  # event messages waiting to be processed, at most
    intake_budget_s: float = 0.05  # processing per turn before requests are served again
    poll_s: float = 0.2  # longest sleep: how soon SIGTERM is noticed


def serve(service: Service, endpoints: Endpoints, settings: LoopSettings | None = None) -> None:
    settings = settings or LoopSettings()
    stop = _stop_on_signals()
    context = zmq.Context()
    router = context.socket(zmq.ROUTER)
    pull = context.socket(zmq.PULL)
    for sock in (router, pull):
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.MAXMSGSIZE, MAX_EVENT_MESSAGE_BYTES)  # bigger peers: disconnected
    router.bind(endpoints.requests)
    for endpoint in endpoints.events:
        pull.bind(endpoint)
    log.info("serving requests on %s, events on %s", endpoints.requests,
             ", ".join(endpoints.events))
    poller = zmq.Poller()
    poller.register(router, zmq.POLLIN)
    poller.register(pull, zmq.POLLIN)
    queue: collections.deque[bytes] = collections.deque()
    next_snapshot = time.monotonic() + settings.snapshot_interval_s
    try:
        while not stop:
            now = time.monotonic()
            wait_s = 0.0 if queue else min(settings.poll_s, max(0.0, next_snapshot - now))
            ready = dict(poller.poll(int(wait_s * 1000)))
            if router in ready:
                _answer(router, service)
            if pull in ready:
                _drain(pull, queue, service, settings.intake_queue)
            _process(queue, service, time.monotonic() + settings.intake_budget_s)
            if time.monotonic() >= next_snapshot:
                service.snapshot()
                next_snapshot = time.monotonic() + settings.snapshot_interval_s
    finally:
        while queue:  # what was accepted is processed before the state is saved
            service.intake(queue.popleft())
        service.snapshot()
        router.close()
        pull.close()
        context.term()
        log.info("stopped")


def _answer(router: zmq.Socket, service: Service) -> None:
    while True:
        try:
            frames = router.recv_multipart(zmq.NOBLOCK)
        except zmq.Again:
            return
        identity, payload = frames[0], frames[-1]
        router.send_multipart([identity, service.handle(payload)])


def _drain(pull: zmq.Socket, queue: collections.deque, service: Service, limit: int) -> None:
    while True:
        try:
            message = pull.recv(zmq.NOBLOCK, copy=True)
        except zmq.Again:
            return
        if len(queue) >= limit:
            service.counters.batches_received += 1
            service.counters.batches_dropped += 1
            continue
        queue.append(message)


COALESCE_BYTES = 4 << 20  # trace-line buffers joined into one parse


def _process(queue: collections.deque, service: Service, deadline: float) -> None:
    while queue and time.monotonic() < deadline:
        taken, size = [], 0
        while queue and size < COALESCE_BYTES:
            taken.append(queue.popleft())
            size += len(taken[-1])
        service.intake_many(taken)


class _Stop:
    def __init__(self) -> None:
        self.requested = False

    def __bool__(self) -> bool:
        return self.requested


def _stop_on_signals() -> _Stop:
    stop = _Stop()

    def request(signum: int, frame: object) -> None:
        stop.requested = True

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, request)
    return stop
