"""Requests to the node's daemon that can never hang or crash the training job.

Every request is bounded: one timeout per attempt, a fresh socket per retry (a DEALER whose
peer vanished is discarded, not reused), LINGER 0 so closing never waits. When the daemon is
away the answer is None: the documented fallback is "keep the current settings", logged once.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
import time

import zmq

from scrtune.daemon import protocol
from scrtune.daemon.endpoints import default_endpoints
from scrtune.daemon.protocol import Hello, Recommend, Record, Reply, Status

log = logging.getLogger("scrtune.client")
DEFAULT_TIMEOUT_S = 0.5
ENDPOINT_ENV = "SCRTUNE_REQUESTS"  # overrides where the daemon is found
DIRECTORY_ENV = "SCRTUNE_DIR"


def requests_endpoint(directory: str | None = None) -> str:
    """The daemon in `directory` when given; else $SCRTUNE_REQUESTS; else the daemon in
    $SCRTUNE_DIR or the default directory. Clients and the CLI all find it this way."""
    if not directory and os.environ.get(ENDPOINT_ENV):
        return os.environ[ENDPOINT_ENV]
    return default_endpoints(directory or os.environ.get(DIRECTORY_ENV) or None).requests


class DaemonClient:
    """Thread-safe; `request` returns the Reply, or None when the daemon did not answer."""

    def __init__(self, endpoint: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 retries: int = 1, name: str = "") -> None:
        self.endpoint = endpoint or requests_endpoint()
        self.timeout_s = timeout_s
        self.retries = retries
        self.name = name or f"pid {os.getpid()}"
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._context = zmq.Context.instance()
        self._warned = False
        self._outbox: queue.Queue[Record] = queue.Queue(maxsize=10_000)
        self._sender: threading.Thread | None = None
        self.records_dropped = 0

    def request(self, message: protocol.Request) -> Reply | None:
        with self._lock:
            for _ in range(self.retries + 1):
                reply = self._attempt(message)
                if reply is not None:
                    return reply
            if not self._warned:
                self._warned = True
                log.warning("scrtune daemon at %s did not answer within %.2f s (%d tries): "
                            "keeping the current settings", self.endpoint, self.timeout_s,
                            self.retries + 1)
            return None

    def _attempt(self, message: protocol.Request) -> Reply | None:
        sock = self._context.socket(zmq.DEALER)
        sock.setsockopt(zmq.LINGER, 0)
        try:
            sock.connect(self.endpoint)
            sock.send(protocol.encode(message), zmq.NOBLOCK)
            if not sock.poll(int(self.timeout_s * 1000), zmq.POLLIN):
                return None
            reply = protocol.decode_reply(sock.recv(zmq.NOBLOCK))
            return reply if reply.request_id == message.request_id else None
        except (zmq.ZMQError, ValueError) as exc:
            log.debug("request to %s failed: %s", self.endpoint, exc)
            return None
        finally:
            sock.close()

    def _next(self) -> int:
        return next(self._ids)

    def hello(self) -> Reply | None:
        return self.request(Hello(request_id=self._next(), client=self.name))

    def status(self) -> Reply | None:
        return self.request(Status(request_id=self._next()))

    def recommend(self) -> Reply | None:
        return self.request(Recommend(request_id=self._next()))

    def record(self, job: str, kind: str, wall_s: float, step: int = -1, run: int = 0,
               detail: str = "") -> Reply | None:
        """Record and wait until the daemon has committed it durably."""
        return self.request(Record(request_id=self._next(), job=job, run=run, kind=kind,
                                   wall_s=wall_s, step=step, detail=detail))

    def record_later(self, job: str, kind: str, wall_s: float, step: int = -1, run: int = 0,
                     detail: str = "") -> None:
        """Record without waiting: a background thread sends it and waits for the durable
        commit, so the training thread never waits on the daemon's fsync. Call flush() before
        the process ends. A full outbox drops (and counts) rather than blocks."""
        message = Record(request_id=self._next(), job=job, run=run, kind=kind, wall_s=wall_s,
                         step=step, detail=detail)
        try:
            self._outbox.put_nowait(message)
        except queue.Full:
            self.records_dropped += 1
            return
        if self._sender is None:
            self._sender = threading.Thread(target=self._send_later, name="scrtune-record",
                                            daemon=True)
            self._sender.start()

    def _send_later(self) -> None:
        while True:
            message = self._outbox.get()
            try:
                self.request(message)
            finally:
                self._outbox.task_done()

    def flush(self, timeout_s: float = 5.0) -> bool:
        """Wait, at most `timeout_s`, for records sent with record_later(); True when done."""
        deadline = time.monotonic() + timeout_s
        while self._outbox.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.005)
        return not self._outbox.unfinished_tasks
