"""Requests to the node's daemon that can never hang or crash the training job.

Every request is bounded: one timeout per attempt, a fresh socket per retry (a DEALER whose
peer vanished is discarded, not reused), LINGER 0 so closing never waits. Requests that the
caller need not wait for (records, a recommendation asked ahead) go, in order, through one
background thread. When the daemon is
away the answer is None: the documented fallback is "keep the current settings", logged once.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import zmq

from scrtune.daemon import protocol
from scrtune.daemon.endpoints import default_endpoints
from scrtune.daemon.protocol import Hello, Recommend, Record, Relaunch, Reply, Status
from scrtune.errors import UsageError

log = logging.getLogger("scrtune.client")
DEFAULT_TIMEOUT_S = 0.5
MAX_TIMEOUT_S = 3600.0  # ZeroMQ takes milliseconds as a C int; no job should wait longer
ENDPOINT_ENV = "SCRTUNE_REQUESTS"  # overrides where the daemon is found
DIRECTORY_ENV = "SCRTUNE_DIR"


def requests_endpoint(directory: str | None = None) -> str:
    """The daemon in `directory` when given; else $SCRTUNE_REQUESTS; else the daemon in
    $SCRTUNE_DIR or the default directory. Clients and the CLI all find it this way."""
    if not directory and os.environ.get(ENDPOINT_ENV):
        return os.environ[ENDPOINT_ENV]
    return default_endpoints(directory or os.environ.get(DIRECTORY_ENV) or None).requests


def bounded_timeout(timeout_s: float) -> float:
    """A usable per-attempt timeout: NaN means the default, the rest is clamped."""
    if math.isnan(timeout_s):
        return DEFAULT_TIMEOUT_S
    return min(max(float(timeout_s), 0.001), MAX_TIMEOUT_S)


class DaemonClient:
    """Thread-safe; `request` returns the Reply, or None when the daemon did not answer.

    One socket is kept while the daemon answers (making and connecting a socket per request
    cost more than the request); an attempt that fails discards it, and the retry uses a fresh
    one, so a reply that arrives late can never be taken for the next request's."""

    def __init__(self, endpoint: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S,
                 retries: int = 1, name: str = "") -> None:
        self.endpoint = endpoint or endpoint_or_blank(requests_endpoint)
        self.timeout_s = bounded_timeout(timeout_s)
        self.retries = retries
        self.name = name or f"pid {os.getpid()}"
        self._ids = itertools.count(1)
        self._warned = False
        self.answering = True  # False while the last request went unanswered
        self.records_dropped = 0
        self._start()

    def _start(self) -> None:
        """Sockets, locks and the sender thread of this process. A forked child starts
        afresh: it has none of its parent's threads, a lock may have been held at the fork,
        and ZeroMQ sockets do not survive fork."""
        self._pid = os.getpid()
        self._lock = threading.Lock()  # one request at a time on the socket
        self._start_lock = threading.Lock()
        self._context = zmq.Context.instance()  # a new one in a forked child
        self._socket: zmq.Socket | None = None
        self._outbox: queue.Queue[_Later] = queue.Queue(maxsize=10_000)
        self._sender: threading.Thread | None = None

    @property
    def wait_s(self) -> float:
        """The longest one request can take: every attempt timing out."""
        return self.timeout_s * (self.retries + 1)

    def request(self, message: protocol.Request) -> Reply | None:
        """Send one request and wait, at most `wait_s` in all; the Reply, or None when the
        daemon did not answer (the caller keeps its current settings)."""
        if os.getpid() != self._pid:
            self._start()
        if not self.endpoint:  # no daemon to ask (warned once, when it was looked for)
            self.answering = False
            return None
        with self._lock:
            for _ in range(self.retries + 1):
                reply = self._attempt(message)
                if reply is not None:
                    self.answering = True
                    return reply
            self.answering = False
            if not self._warned:
                self._warned = True
                log.warning("scrtune daemon at %s did not answer within %.2f s (%d tries): "
                            "keeping the current settings", self.endpoint, self.timeout_s,
                            self.retries + 1)
            return None

    def _attempt(self, message: protocol.Request) -> Reply | None:
        reply = None
        try:
            if self._socket is None:
                self._socket = self._context.socket(zmq.DEALER)
                self._socket.setsockopt(zmq.LINGER, 0)
                self._socket.setsockopt(zmq.IPV6, 1)
                self._socket.connect(self.endpoint)  # a malformed endpoint raises here
            sock = self._socket
            sock.send(protocol.encode(message), zmq.NOBLOCK)
            if sock.poll(int(self.timeout_s * 1000), zmq.POLLIN):
                reply = protocol.decode_reply(sock.recv(zmq.NOBLOCK))
        except (zmq.ZMQError, ValueError) as exc:
            log.debug("request to %s failed: %s", self.endpoint, exc)
        if reply is None or reply.request_id != message.request_id:
            self._discard()
            return None
        return reply

    def _discard(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def _next(self) -> int:
        return next(self._ids)

    def hello(self) -> Reply | None:
        """Announce this client; the daemon's Reply, or None."""
        return self.request(Hello(request_id=self._next(), client=self.name))

    def status(self) -> Reply | None:
        """The daemon's counters, clients and recommendation; or None."""
        return self.request(Status(request_id=self._next()))

    def recommend(self) -> Reply | None:
        """The recommendation now (SCR parameters, intents, runtime actions); or None."""
        return self.request(Recommend(request_id=self._next()))

    def relaunch(self) -> Reply | None:
        """After a run: whether the daemon halted it to relaunch with new settings (the halt
        is then cleared, so scr_run launches again); or None."""
        return self.request(Relaunch(request_id=self._next()))

    def record(self, job: str, kind: str, wall_s: float, step: int = -1, run: int = 0,
               detail: str = "") -> Reply | None:
        """Record and wait until the daemon has committed it durably."""
        return self.request(Record(request_id=self._next(), job=job, run=run, kind=kind,
                                   wall_s=wall_s, step=step, detail=detail))

    # -- off the caller's thread -----------------------------------------------------------
    def record_later(self, job: str, kind: str, wall_s: float, step: int = -1, run: int = 0,
                     detail: str = "") -> None:
        """Record without waiting: a background thread sends it and waits for the durable
        commit, so the training thread never waits on the daemon's fsync. Call flush() before
        the process ends. A full outbox drops (and counts) rather than blocks."""
        message = Record(request_id=self._next(), job=job, run=run, kind=kind, wall_s=wall_s,
                         step=step, detail=detail)
        if self._later(message) is None:
            self.records_dropped += 1

    def recommend_later(self) -> Future | None:
        """Ask for a recommendation on the background thread, after every request queued
        before it (so the daemon has seen the records just sent); the Future's result is the
        Reply or None. None when the outbox is full."""
        return self._later(Recommend(request_id=self._next()))

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait, at most `timeout_s`, for the requests queued before it; True when done. By
        default 5 s while the daemon answers, one request's bound while it does not (the
        queued requests would only time out)."""
        if timeout_s is None:
            timeout_s = 5.0 if self.answering else self.wait_s
        marker = self._later(None, block_s=timeout_s)
        return marker is not None and bool(wait([marker], timeout_s).done)

    def reply_to(self, later: Future) -> Reply | None:
        """The reply to a request sent later: waited for at most one request's bound, and not
        at all while the daemon is not answering. None: no reply (keep the current settings)."""
        try:
            return later.result(timeout=self.wait_s if self.answering else 0)
        except FutureTimeout:
            return None

    def _later(self, message: protocol.Request | None, block_s: float = 0.0) -> Future | None:
        if os.getpid() != self._pid:
            self._start()
        done: Future = Future()
        try:
            self._outbox.put(_Later(message, done), timeout=block_s or None, block=block_s > 0)
        except queue.Full:
            return None
        if self._sender is None:
            with self._start_lock:
                if self._sender is None:
                    self._sender = threading.Thread(target=self._send_later,
                                                    name="scrtune-client", daemon=True)
                    self._sender.start()
        return done

    def _send_later(self) -> None:
        while True:
            later = self._outbox.get()
            reply = None
            try:
                if later.message is not None:
                    reply = self.request(later.message)
            except Exception:  # the thread must outlive any one request, or flush() would wait
                log.exception("scrtune: a queued request failed")
            later.done.set_result(reply)


@dataclass(frozen=True)
class _Later:
    message: protocol.Request | None  # None: a marker that flush() waits for
    done: Future


def endpoint_or_blank(find: Callable[[], str]) -> str:
    """The endpoint `find()` computes, or "" (no daemon: the fallback) when it cannot: the
    private directory may not be creatable where $XDG_RUNTIME_DIR points. Never raised into
    the application."""
    try:
        return find()
    except (UsageError, OSError) as exc:
        log.warning("scrtune: no daemon endpoint (%s): keeping the current settings", exc)
        return ""
