"""Requests to the node's daemon that can never hang or crash the training job.

Every request is bounded: one timeout per attempt, a fresh socket per retry (a DEALER whose
peer vanished is discarded, not reused), LINGER 0 so closing never waits. Requests that the
caller need not wait for (records, a recommendation asked ahead) go, in order, through one
background thread. When the daemon is away the answer is None: the documented fallback is
"keep the current settings", logged once.

Records are never lost to an absent daemon: `record_later` appends the record to this
process's spool (spool.py; a local file append, the only cost on the caller's thread) and the
background thread sends it until the daemon acknowledges it, retrying with back-off while the
daemon is down, stopped, or cannot write. Each record carries an id, so a retry or a resend is
stored once.
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass

import zmq

from scrtune.client.spool import Spool
from scrtune.daemon import curve, protocol
from scrtune.daemon.endpoints import default_endpoints, is_private, runtime_dir
from scrtune.daemon.protocol import RETRYABLE, Hello, Recommend, Record, Relaunch, Reply, Status
from scrtune.errors import UsageError

log = logging.getLogger("scrtune.client")
DEFAULT_TIMEOUT_S = 0.5
MAX_TIMEOUT_S = 3600.0  # ZeroMQ takes milliseconds as a C int; no job should wait longer
ENDPOINT_ENV = "SCRTUNE_REQUESTS"  # overrides where the daemon is found
DIRECTORY_ENV = "SCRTUNE_DIR"
RETRY_S = (0.5, 1.0, 2.0, 4.0, 8.0)  # waits between resends while the daemon stays away


def requests_endpoint(directory: str | None = None) -> str:
    """The daemon in `directory` when given; else $SCRTUNE_REQUESTS; else the daemon in
    $SCRTUNE_DIR or the default directory. Clients and the CLI all find it this way."""
    if not directory and os.environ.get(ENDPOINT_ENV):
        return os.environ[ENDPOINT_ENV]
    return default_endpoints(directory or os.environ.get(DIRECTORY_ENV) or None).requests


def key_directory() -> str:
    """The daemon directory holding its CURVE keys: $SCRTUNE_DIR, else the default one;
    "" when there is none (TCP then cannot be used)."""
    try:
        return os.environ.get(DIRECTORY_ENV) or runtime_dir()
    except (UsageError, OSError):
        return ""


def spool_directory(endpoint: str = "") -> str:
    """Where records for the daemon at `endpoint` wait: `spool/` in its directory (for IPC,
    the socket's; else $SCRTUNE_DIR or the default one, as for its CURVE keys): a spool is
    only ever sent to the daemon it was written for. "" when there is none to be had
    (records then wait in memory only)."""
    if endpoint.startswith("ipc://"):
        directory = os.path.dirname(endpoint.removeprefix("ipc://"))
        return os.path.join(directory, "spool") if is_private(directory) else ""
    directory = key_directory()
    return os.path.join(directory, "spool") if directory else ""


def pinned(endpoint: str) -> str:
    """An IPC endpoint in a private directory, by the directory this client opened now: the
    socket is then reached through /proc/self/fd/N for the client's life, even if the path
    is later made to name another directory (a runtime directory removed by a cleaner and
    planted again by another user as a link to theirs). Other endpoints as they are."""
    if not endpoint.startswith("ipc://") or not os.path.isdir("/proc/self/fd"):
        return endpoint
    directory, name = os.path.split(endpoint.removeprefix("ipc://"))
    fd = _PINNED.get(directory)
    if fd is None:
        try:
            fd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return endpoint
        if not is_private(f"/proc/self/fd/{fd}/."):
            os.close(fd)
            return endpoint
        _PINNED[directory] = fd  # one per directory, open for the process's life
    return f"ipc:///proc/self/fd/{fd}/{name}"


_PINNED: dict[str, int] = {}  # directory -> the descriptor this process pinned it by


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
                 retries: int = 1, name: str = "", spool_dir: str | None = None,
                 key_dir: str | None = None, says_fallback: bool = True) -> None:
        """`spool_dir`: where unacknowledged records are kept (default: spool_directory() when
        the endpoint is found, not given; "" keeps them in memory only). `says_fallback`:
        log once that an unanswered request keeps the current settings (a job's client);
        False for a caller that reports the unanswered request itself (the CLI, whose
        `--wait-s` polls a daemon that is still starting: the warning came at its first
        poll and told a job's log that the settings were kept)."""
        self.endpoint = endpoint or endpoint_or_blank(requests_endpoint)
        self._pinned = pinned(self.endpoint)  # what the socket connects to (see pinned())
        self.timeout_s = bounded_timeout(timeout_s)
        self.retries = retries
        self.name = name or f"pid {os.getpid()}"
        self._spool_dir = spool_dir
        self.key_dir = key_dir  # CURVE keys for a daemon on TCP (None: key_directory())
        self._warned = False
        self._says_fallback = says_fallback
        self.unanswered = ""  # why the last unanswered request went so, for the caller to say
        self._cannot_connect = ""  # a socket this client cannot make (TCP without CURVE keys)
        self.answering = True  # False while the last request went unanswered
        self.attempts = 0  # requests sent, each waiting up to timeout_s: what a job waited on
        self.records_dropped = 0  # the spool was full: see spool.MAX_UNACKED
        self.records_refused = 0  # the daemon refused them for good (malformed): not resent
        self._start()

    def _start(self) -> None:
        """Sockets, locks and the sender thread of this process. A forked child starts
        afresh: it has none of its parent's threads, a lock may have been held at the fork,
        and ZeroMQ sockets do not survive fork."""
        self._pid = os.getpid()
        self._token = os.urandom(6).hex()  # this process's record ids: <token>-<n>
        self._ids = itertools.count(1)
        self._spool: Spool | None = None  # made at the first record_later
        self._retry_at = 0.0  # monotonic time of the next resend
        self._retries_failed = 0
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
            sent = self.attempts
            self._cannot_connect = ""
            for _ in range(self.retries + 1):
                reply = self._attempt(message)
                if reply is not None:
                    self.answering = True
                    return reply
            self.answering = False
            self.unanswered = self._cannot_connect or ("no socket there" if self.attempts == sent
                                                       else f"no answer within {self.timeout_s:.2f}"
                                                       f" s, {self.retries + 1} tries")
            if not self._warned and self._says_fallback:
                self._warned = True
                log.warning("no scrtune daemon answered at %s (%s): keeping the current "
                            "settings", self.endpoint, self.unanswered)
            return None

    def _attempt(self, message: protocol.Request) -> Reply | None:
        reply = None
        if self._pinned.startswith("ipc://") and \
                not os.path.exists(self._pinned.removeprefix("ipc://")):
            return None  # no socket, so no daemon: nothing to wait for (issue 49: 2.2 s)
        self.attempts += 1
        try:
            if self._socket is None:
                self._socket = self._context.socket(zmq.DEALER)
                self._socket.setsockopt(zmq.LINGER, 0)
                self._socket.setsockopt(zmq.IPV6, 1)
                if curve.is_tcp(self.endpoint):
                    curve.connect_securely(self._socket, self.endpoint,
                                           self.key_dir or key_directory())
                self._socket.connect(self._pinned)  # a malformed endpoint raises here
            sock = self._socket
            sock.send(protocol.encode(message), zmq.NOBLOCK)
            if sock.poll(int(self.timeout_s * 1000), zmq.POLLIN):
                reply = protocol.decode_reply(sock.recv(zmq.NOBLOCK))
        except (zmq.ZMQError, ValueError) as exc:
            log.debug("request to %s failed: %s", self.endpoint, exc)
        except UsageError as exc:  # TCP without the job's CURVE keys: no daemon for us
            self._cannot_connect = str(exc)
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

    def recommend(self, starting: bool = False) -> Reply | None:
        """The recommendation now (SCR parameters, intents, runtime actions); or None.
        `starting`: asked before SCR_Init, by a new run."""
        return self.request(Recommend(request_id=self._next(), starting=starting))

    def relaunch(self) -> Reply | None:
        """After a run: whether the daemon halted it to relaunch with new settings (the halt
        is then cleared, so scr_run launches again); or None."""
        return self.request(Relaunch(request_id=self._next()))

    def record(self, job: str, kind: str, wall_s: float, step: int = -1, run: int = 0,
               detail: str = "") -> Reply | None:
        """Record one goodput event and wait until the daemon has committed it durably.

        `kind` is one of (scrtune.goodput.events.Kind): job_started, job_terminated,
        job_crashed, step_started, step_finished, checkpoint_save_started,
        checkpoint_save_finished, checkpoint_restore_started, checkpoint_restore_finished,
        startup_started, startup_finished, data_loading_started, data_loading_finished,
        custom_started, custom_finished; any other is refused (the Reply says so). `wall_s`:
        epoch seconds; `step`: the training step (-1: none); `run`: the launch's number."""
        return self.request(self._record(job, kind, wall_s, step, run, detail))

    def _record(self, job: str, kind: str, wall_s: float, step: int, run: int,
                detail: str) -> Record:
        request_id = self._next()
        return Record(request_id=request_id, job=job, run=run, kind=kind, wall_s=wall_s,
                      step=step, detail=detail, record_id=f"{self._token}-{request_id}")

    # -- off the caller's thread -----------------------------------------------------------
    def record_later(self, job: str, kind: str, wall_s: float, step: int = -1, run: int = 0,
                     detail: str = "") -> None:
        """Record without waiting: the record is spooled (one local file append) and a
        background thread sends it until the daemon has committed it, so the training thread
        never waits on the daemon. Call flush() before the process ends; what is still
        unacknowledged then stays spooled, and a later client on this node sends it."""
        if os.getpid() != self._pid:
            self._start()
        record = self._record(job, kind, wall_s, step, run, detail)
        if not self._spooled().add(record):
            self.records_dropped += 1
            return
        self._later(_Spooled(record.record_id))  # a full outbox is no loss: a resend takes it

    @property
    def records_unacknowledged(self) -> int:
        return len(self._spool) if self._spool is not None else 0

    def _spooled(self) -> Spool:
        if self._spool is None:
            with self._start_lock:
                if self._spool is None:
                    directory = self._spool_dir if self._spool_dir is not None else (
                        spool_directory(self.endpoint) if self.endpoint else "")
                    self._spool = Spool(directory or None, self._token)
        return self._spool

    def recommend_later(self) -> Future | None:
        """Ask for a recommendation on the background thread, after the records sent before
        it (so the daemon has seen them); the Future's result is the Reply or None. None when
        the outbox is full."""
        return self._later(Recommend(request_id=self._next()))

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait, at most `timeout_s`, for the requests queued before it and for every
        spooled record to be acknowledged; True when done. By default 5 s while the daemon
        answers, one attempt's timeout (0.5 s) while it does not. Records not acknowledged by
        then stay spooled (see spool.py)."""
        if timeout_s is None:
            timeout_s = 5.0 if self.answering else self.timeout_s
        deadline = time.monotonic() + timeout_s
        marker = self._later(None, block_s=timeout_s)
        left = max(0.0, deadline - time.monotonic())
        return marker is not None and bool(wait([marker], left).done) and \
            bool(marker.result())

    def close(self, timeout_s: float | None = None) -> bool:
        """flush(), then let go of the spool: removed when empty, kept for adoption if not."""
        done = self.flush(timeout_s)
        if self._spool is not None:
            self._spool.close()
        return done

    def reply_to(self, later: Future) -> Reply | None:
        """The reply to a request sent later: waited for at most one request's bound, and not
        at all while the daemon is not answering. None: no reply (keep the current settings)."""
        try:
            return later.result(timeout=self.wait_s if self.answering else 0)
        except FutureTimeout:
            return None

    def _later(self, message: object, block_s: float = 0.0) -> Future | None:
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
        self._spooled().adopt()  # what clients before this one on the node left unsent
        while True:
            later = self._next_later()
            message = later.message if later is not None else None
            try:
                # in order: the spooled records through this one; all at a resend or flush()
                if later is None or message is None or isinstance(message, _Spooled):
                    self._send_records(force=later is not None and message is None,
                                       upto=getattr(message, "record_id", None))
                if later is None or isinstance(message, _Spooled):
                    result: object = None
                elif message is None:  # flush(): done when nothing waits for the daemon
                    result = not self.records_unacknowledged
                else:
                    result = self.request(message)  # type: ignore[arg-type]
            except Exception:  # the thread must outlive any one request, or flush() would wait
                log.exception("scrtune: a queued request failed")
                result = None
            if later is not None:
                later.done.set_result(result)

    def _next_later(self) -> _Later | None:
        """The next queued request; None when a resend of the spooled records is due first."""
        timeout_s = None
        if self.records_unacknowledged:
            timeout_s = max(0.0, self._retry_at - time.monotonic())
        try:
            return self._outbox.get(timeout=timeout_s)
        except queue.Empty:
            return None

    def _send_records(self, force: bool, upto: str | None = None) -> None:
        """Send the spooled records in order (through `upto` when given) until one is not
        acknowledged; then wait (back off) before the next attempt, unless `force`d."""
        if not self.records_unacknowledged or not force and time.monotonic() < self._retry_at:
            return
        spool = self._spooled()
        for record in spool.unacked():
            reply = self.request(record)
            if reply is None or not reply.ok and reply.error is not None and \
                    reply.error.code in RETRYABLE:
                self._retry_at = time.monotonic() + RETRY_S[min(self._retries_failed,
                                                                len(RETRY_S) - 1)]
                self._retries_failed += 1
                return
            if not reply.ok:  # malformed: it would be refused forever
                self.records_refused += 1
                log.warning("scrtune: the daemon refused a %s record: %s", record.kind,
                            reply.error.message if reply.error else "?")
            spool.ack(record.record_id)
            self._retries_failed = 0
            if record.record_id == upto:
                return


@dataclass(frozen=True)
class _Spooled:
    """Queued by record_later: send the spooled records through this one."""

    record_id: str


@dataclass(frozen=True)
class _Later:
    message: object  # a Request; _Spooled; or None, the marker that flush() waits for
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
