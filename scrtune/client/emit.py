"""`scrtune.client.emit(...)`: record events without DFTracer.

Events are written as DFTracer 2.x lines (the daemon already reads those), buffered, and sent
in batches over a non-blocking PUSH socket: when the daemon is away or behind, batches are
dropped and counted, and the application never waits.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import msgspec
import zmq

from scrtune.client.connection import DIRECTORY_ENV, endpoint_or_blank, key_directory
from scrtune.daemon import curve
from scrtune.daemon.endpoints import default_endpoints
from scrtune.errors import UsageError

EVENTS_ENV = "SCRTUNE_EVENTS"
log = logging.getLogger("scrtune.client")


def events_endpoint(directory: str | None = None) -> str:
    """As requests_endpoint(), for events: `directory`, $SCRTUNE_EVENTS, $SCRTUNE_DIR."""
    if not directory and os.environ.get(EVENTS_ENV):
        return os.environ[EVENTS_ENV]
    return default_endpoints(directory or os.environ.get(DIRECTORY_ENV) or None).events[0]


class Emitter:
    """Sends events (regions and I/O calls, in DFTracer's JSON line form) to the node's
    daemon in batches, never blocking: batches the daemon cannot take are dropped and counted.
    One per process is made by `emit()`; make one yourself for another endpoint. A process
    forked after its first event gets a socket of its own."""
    def __init__(self, endpoint: str | None = None, batch_events: int = 512,
                 queue_batches: int = 64) -> None:
        self.endpoint = endpoint or endpoint_or_blank(events_endpoint)
        self.batch_events = batch_events
        self.sent = 0  # batches
        self.dropped = 0  # batches: the daemon behind, away, or not to be found
        self.unencodable = 0  # events whose values could not be written (nan times, ...)
        self._queue_batches = queue_batches
        # compact, as DFTracer writes; numpy scalars (a step from a tensor) as numbers
        self._encode = msgspec.json.Encoder(enc_hook=_plain).encode
        self._host = os.uname().nodename
        self._open()

    def _open(self) -> None:
        """A context and socket of this process's own. A process forked after the first emit
        (a data loader's worker, say) must not use its parent's: ZeroMQ sockets do not survive
        fork. The context is the emitter's own so that close() can wait for delivery."""
        self._pid = os.getpid()
        self._lines: list[bytes] = []
        self._lock = threading.Lock()
        self._context = zmq.Context()
        self._socket: zmq.Socket | None = None  # None: events are dropped and counted
        if not self.endpoint:
            return  # no daemon to be found: endpoint_or_blank() said so
        sock = self._context.socket(zmq.PUSH)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SNDHWM, self._queue_batches)
        sock.setsockopt(zmq.IPV6, 1)
        try:
            if curve.is_tcp(self.endpoint):
                curve.connect_securely(sock, self.endpoint, key_directory())
            sock.connect(self.endpoint)
        except (zmq.ZMQError, UsageError) as exc:  # a malformed endpoint, no CURVE keys: the
            # job goes on without events
            log.warning("scrtune: events cannot be sent to %r (%s): dropping them",
                        self.endpoint, exc)
            sock.close()
            return
        self._socket = sock

    def emit(self, name: str, cat: str, start_s: float, dur_s: float, **args: object) -> None:
        """One event: a region (cat e.g. CHECKPOINT, COMPUTE) or an I/O call (cat POSIX, with
        `ret` bytes and `fhash` or a path)."""
        if os.getpid() != self._pid:
            self._open()
        try:
            line = self._encode({
                "id": 0, "name": name, "cat": cat, "type": 6, "pid": self._pid,
                "tid": threading.get_native_id(), "ts": int(start_s * 1e6),
                "dur": int(dur_s * 1e6), "ph": 1, "args": {"hhash": self._host, **args}})
        except (TypeError, ValueError, OverflowError) as exc:  # never raised into the job
            self.unencodable += 1
            log.debug("event %r not encoded: %s", name, exc)
            return
        with self._lock:
            self._lines.append(line)
            if len(self._lines) >= self.batch_events:
                self._flush_locked()

    def flush(self) -> None:
        """Send the events buffered so far as one batch (non-blocking)."""
        if os.getpid() != self._pid:
            return  # the parent's unsent lines are the parent's to send
        with self._lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self._lines:
            return
        payload = b"\n".join(self._lines) + b"\n"
        self._lines = []
        if self._socket is None:
            self.dropped += 1
            return
        try:
            self._socket.send(payload, zmq.NOBLOCK)
            self.sent += 1
        except zmq.ZMQError:  # Again (the daemon is behind), or closed: dropped, counted
            self.dropped += 1

    def close(self, linger_s: float = 1.0) -> None:
        """Flush, then give queued batches at most `linger_s` to reach the daemon: closing
        a socket only hands them to ZeroMQ's I/O thread, and a process that exits at once
        (os._exit) would lose them, so the context is ended here, which waits that long."""
        self.flush()
        if self._socket is not None:
            self._socket.close(linger=int(linger_s * 1000))
            self._socket = None
        self._context.term()


def _plain(value: object) -> object:
    """What msgspec cannot encode: numpy scalars by value, anything else as text."""
    item = getattr(value, "item", None)
    return item() if callable(item) else str(value)


_default: Emitter | None = None
_default_lock = threading.Lock()


def emit(name: str, cat: str, start_s: float | None = None, dur_s: float = 0.0,
         **args: object) -> None:
    """Record one event through a process-wide Emitter (flushed every 512 events and at exit),
    in DFTracer's form: a region `name` of category `cat` from `start_s` (epoch seconds, now
    by default) lasting `dur_s`, with `args` (e.g. step=12, fname=path, size=nbytes).

    What the daemon reads as a checkpoint, as it reads a trace (scrtune.engine.classify): a
    region whose category is `checkpoint`, `ckpt` or `checkpointing` (or whose name holds
    checkpoint/ckpt, or is `capture` or `restart`) is a save when its name says save, capture,
    write, dump, persist, store, commit or output, and a restore when it says load, restore,
    restart, resume, recover, read or fetch; pass `step=` so saves and restores pair up.
    Compute regions (`train.step`, `ai.compute`, names ending in `compute`) give the cadence.
    E.g. emit("checkpoint.save", "checkpoint", t0, 2.5, step=100)."""
    emitter = _default or _make_default()
    emitter.emit(name, cat, time.time() if start_s is None else start_s, dur_s, **args)


def _make_default() -> Emitter:
    """The process-wide Emitter, made once even when threads emit their first events at the
    same moment."""
    global _default
    with _default_lock:
        if _default is None:
            import atexit

            _default = Emitter()
            atexit.register(_default.close)
        return _default


def emit_flush() -> None:
    """Send what emit() has buffered now. A process that ends without running atexit handlers
    (a forked worker leaving through os._exit) calls this first."""
    if _default is not None:
        _default.flush()
