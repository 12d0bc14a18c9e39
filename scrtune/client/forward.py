"""`scrtune forward`: follow DFTracer trace files as they grow and ship whole lines to the daemon.

DFTracer writes a file per process (`-app`, `-preload`, `-fork`); with a small
`DFTRACER_WRITE_BUFFER_SIZE` the `.pfw` grows while the job runs. New files (new processes) are
picked up at every scan. A `.pfw.gz` is followed too: it is decompressed again from the start
whenever it grows (gzip cannot be entered mid-stream), and only lines not sent before are sent,
so compression off (`DFTRACER_TRACE_COMPRESSION=0`) is cheaper for long live jobs. The forwarder
is not the training job, so it may wait: when the daemon is away or full, it keeps its place in
each file and sends again later, and so survives the daemon restarting.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import time
from dataclasses import dataclass, field

import zmq

from scrtune.client.connection import DaemonClient, key_directory
from scrtune.daemon import curve, protocol
from scrtune.errors import TraceError, UsageError
from scrtune.events.reader import ReadProblems, expand_paths, iter_blocks

log = logging.getLogger("scrtune.forward")
MAX_MESSAGE_BYTES = 4 << 20
RETRY_FIRST_S = 0.05  # the first retry of what the daemon did not take, doubling to:
RETRY_MAX_S = 5.0  # (or the interval, if shorter): a daemon away costs a send a few seconds


@dataclass
class _Followed:
    offset: int = 0  # bytes of whole lines sent (decompressed bytes for .pfw.gz)
    inode: int = 0
    size: int = 0  # the file's size when everything in it was sent
    source: str = ""  # this file's name to the daemon: host, inode, path
    daemon_at: int = -1  # where the daemon stood at the last look (-1: not looked yet)
    mtime_ns: int = 0  # the file's when everything in it was sent
    marks: bytes = b""  # its first bytes and those before `offset` then: see _rewritten
    rewrites: int = 0  # times it was truncated and written again in place


@dataclass
class Forwarder:
    paths: list[str]
    endpoint: str
    key_dir: str | None = None  # where a TCP daemon's CURVE keys are (None: key_directory())
    # the daemon's request endpoint: lines then go with their offsets, and the forwarder
    # resends what a restarted daemon lost or a busy one dropped ("": best effort)
    requests: str = ""
    sent_messages: int = 0
    sent_bytes: int = 0
    skipped_lines: int = 0  # longer than a message: passed over, said once per file
    files: dict[str, _Followed] = field(default_factory=dict)
    reported: set[str] = field(default_factory=set)  # problems already logged, once each

    def __post_init__(self) -> None:
        self._socket = zmq.Context.instance().socket(zmq.PUSH)
        self._socket.setsockopt(zmq.LINGER, 500)  # a stopping forwarder ends within a second
        self._socket.setsockopt(zmq.SNDHWM, 64)
        # queue only for a daemon that is there: "sent" then means a daemon has it, and with
        # none, sends fail at once and are tried again, in place
        self._socket.setsockopt(zmq.IMMEDIATE, 1)
        self._socket.setsockopt(zmq.IPV6, 1)
        if curve.is_tcp(self.endpoint):  # raises UsageError (exit 2) without the keys
            curve.connect_securely(self._socket, self.endpoint, self.key_dir or key_directory())
        try:
            self._socket.connect(self.endpoint)
        except zmq.ZMQError as exc:  # not an address ZeroMQ can connect to
            self._socket.close(linger=0)
            raise UsageError(f"--endpoint {self.endpoint}: {exc.strerror}: expected "
                             "ipc://PATH or tcp://HOST:PORT") from None
        self._client = DaemonClient(self.requests, timeout_s=0.5, retries=0,
                                    name="scrtune forward", key_dir=self.key_dir) \
            if self.requests else None
        self._looked_at = 0.0

    def scan(self) -> list[str]:
        found = []
        for path in self.paths:
            try:
                listed = expand_paths([path])
            except TraceError:  # nothing there yet: the process has not started
                self._once(f"{path}: no trace files yet")
                continue
            for name in listed:
                if name.endswith((".pfw", ".pfw.gz")):
                    found.append(name)
                else:
                    self._once(f"{name}: not a .pfw or .pfw.gz file: not followed")
        return found

    def _once(self, message: str) -> None:
        if message not in self.reported:
            self.reported.add(message)
            log.info("%s", message)

    def pump(self) -> bool:
        """Send what the files gained since the last call; False when the daemon did not
        take everything (call again later: nothing is skipped)."""
        complete = True
        found = {}
        for path in self.scan():
            with contextlib.suppress(OSError):  # removed since the scan
                found[path] = os.stat(path)
        self._follow_renames(found)
        for path, info in found.items():
            state = self.files.setdefault(path, _Followed())
            if info.st_size == state.size and info.st_mtime_ns == state.mtime_ns:
                continue
            if info.st_ino != state.inode or info.st_size < state.size or \
                    _rewritten(path, state):
                if info.st_ino == state.inode:  # a new name: the daemon takes it from 0
                    state.rewrites += 1
                    self._once(f"{path}: truncated or rewritten in place: sent again from "
                               "its start")
                state.inode, state.offset = info.st_ino, 0  # new or truncated: from the start
                state.daemon_at = -1
                source = f"{os.uname().nodename}:{info.st_ino}:{os.path.abspath(path)}"
                state.source = f"{source[:1016]}#{state.rewrites}" if state.rewrites else \
                    source[:1024]
            try:
                sent = self._send_compressed(path, state) if path.endswith(".gz") else \
                    self._send_new(path, state, info.st_size)
            except OSError as exc:  # removed or unreadable since the scan: try it next time
                self._once(f"{path}: {exc.strerror or exc}")
                continue
            if sent:
                state.size, state.mtime_ns = info.st_size, info.st_mtime_ns
                state.marks = _marks(path, state)
            complete &= sent
        return complete

    def _follow_renames(self, found: dict[str, os.stat_result]) -> None:
        """A followed file now under another name (rotated: `job.pfw` renamed `job-1.pfw`,
        a new `job.pfw` begun) keeps its place and its name to the daemon: it was sent again
        whole under the new name, and counted twice."""
        by_inode = {info.st_ino: path for path, info in found.items()}
        for old_path, state in list(self.files.items()):
            now = found.get(old_path)
            if now is not None and now.st_ino == state.inode:
                continue  # still where it was
            new_path = by_inode.get(state.inode)
            if new_path is not None and new_path != old_path and (
                    new_path not in self.files or self.files[new_path].inode != state.inode):
                self.files[new_path] = self.files.pop(old_path)
                self._once(f"{old_path}: renamed {new_path}: followed there")

    def _send_new(self, path: str, state: _Followed, size: int) -> bool:
        with open(path, "rb") as handle:
            while state.offset < size:
                handle.seek(state.offset)
                data = handle.read(min(MAX_MESSAGE_BYTES, size - state.offset))
                rest = self._send_lines(data, state)
                if rest is None:
                    return False
                if len(rest) < len(data):
                    continue
                if len(data) < MAX_MESSAGE_BYTES:
                    break  # only a partial line so far: wait for the rest
                end = _next_newline(handle, state.offset + len(data), size)
                if end is None:
                    break  # a line over the limit still being written: skipped once whole
                if not self._skip(path, state, end - state.offset):
                    return False
        return True

    def _send_compressed(self, path: str, state: _Followed) -> bool:
        """The lines past `state.offset` of the decompressed file. A line longer than a
        message is skipped (and said so) without being held: memory stays at about two
        messages whatever the file holds (1.5 GiB of zeros once took 2.6 GiB)."""
        problems = ReadProblems()  # a member still being written ends the read: not an error
        seen, pending, dropped = 0, b"", 0  # dropped: bytes of an over-long line, not held
        for block in iter_blocks(path, problems, MAX_MESSAGE_BYTES):
            if seen + len(block) > state.offset + dropped:
                pending += block[max(0, state.offset + dropped - seen):]
            seen += len(block)
            if dropped and (newline := pending.find(b"\n")) >= 0:
                if not self._skip(path, state, dropped + newline + 1):
                    return False
                pending, dropped = pending[newline + 1:], 0
            if len(pending) >= MAX_MESSAGE_BYTES:
                pending = self._send_lines(pending, state)
                if pending is None:
                    return False
                if len(pending) >= MAX_MESSAGE_BYTES:  # no newline in a whole message
                    pending, dropped = b"", dropped + len(pending)
        for warning in problems.warnings:  # once each: the file may still grow
            self._once(warning)
        return dropped > 0 or self._send_lines(pending, state) is not None

    def _skip(self, path: str, state: _Followed, length: int) -> bool:
        """Pass over one line longer than a message: the daemon is told the bytes it skips
        (a Lines message without data), so its offset in the file moves on with ours."""
        self._once(f"{path}: a line of {length:,} bytes at offset {state.offset:,} is longer "
                   f"than {MAX_MESSAGE_BYTES >> 20} MiB: skipped")
        if self._client is not None:
            try:
                self._socket.send(protocol.encode(protocol.Lines(
                    state.source, state.offset, state.offset + length, b"")), zmq.NOBLOCK)
            except zmq.Again:
                return False
        state.offset += length
        self.skipped_lines += 1
        return True

    def _send_lines(self, data: bytes, state: _Followed) -> bytes | None:
        """Send `data` up to its last newline; what is left, or None when the daemon did not
        take it (nothing is lost: the offset did not move)."""
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            return data
        message = data[:cut] if self._client is None else protocol.encode(protocol.Lines(
            state.source, state.offset, state.offset + cut, data[:cut]))
        try:
            self._socket.send(message, zmq.NOBLOCK)
        except zmq.Again:
            return None
        state.offset += cut
        self.sent_messages += 1
        self.sent_bytes += cut
        return data[cut:]

    def acknowledged(self, every_s: float = 1.0) -> bool:
        """Ask the daemon, at most every `every_s`, where it stands in each file; a file it
        stands behind in, twice running, is sent again from there (a restarted daemon
        resumes from its last snapshot; a busy one drops). True when it has taken all that
        was sent; without a request endpoint, True."""
        if self._client is None:
            return True
        if time.monotonic() - self._looked_at < every_s:
            return False
        self._looked_at = time.monotonic()
        followed = [(path, state) for path, state in self.files.items() if state.source]
        daemon_at: dict[str, int] = {}
        step = protocol.MAX_SOURCES_PER_REQUEST  # more files: several requests (once, only
        for first in range(0, len(followed), step):  # the first 4,096 were ever asked about)
            reply = self._client.request(protocol.Offsets(
                request_id=int(self._looked_at * 1000) + first // step,
                sources=[state.source for _, state in followed[first:first + step]]))
            offsets = _offsets(reply)
            if offsets is None:
                return False
            daemon_at.update(offsets)
        behind = False
        for path, state in followed:
            at = daemon_at.get(state.source, 0)
            if at < state.offset:
                behind = True
                if at == state.daemon_at:  # no progress since the last look: resend
                    state.offset, state.size = at, -1
                    # the bytes before the new offset, or the next look takes the file for
                    # one rewritten in place and sends it all again under a new name
                    state.marks = _marks(path, state)
            state.daemon_at = at
        return not behind

    def close(self) -> None:
        self._socket.close()


def _offsets(reply) -> dict[str, int] | None:
    """The daemon's offset in each file from an Offsets reply; None for no answer or one of
    any other shape (a reply is hostile until checked: it must not stop the forwarder)."""
    if reply is None or not reply.ok or not isinstance(reply.result, dict):
        return None
    offsets = reply.result.get("offsets")
    if not isinstance(offsets, dict) or not all(
            isinstance(source, str) and isinstance(at, int) and not isinstance(at, bool)
            and 0 <= at < 1 << 62 for source, at in offsets.items()):
        return None
    return offsets


@dataclass(frozen=True)
class Forwarded:
    messages: int
    bytes: int
    files: int
    complete: bool  # everything the files held was taken by a daemon
    stopped_by: int | None = None  # the signal that ended it


MARK_BYTES = 256


def _marks(path: str, state: _Followed) -> bytes:
    """The file's first bytes, and (uncompressed) the bytes before the offset sent: a file
    truncated and written again in place (same inode) shows other bytes there, even when it
    has grown past its old size before the next look."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(MARK_BYTES)
            if path.endswith(".gz") or state.offset <= MARK_BYTES:
                return head
            handle.seek(state.offset - MARK_BYTES)
            return head + handle.read(MARK_BYTES)
    except OSError:
        return b""


def _rewritten(path: str, state: _Followed) -> bool:
    return bool(state.marks) and _marks(path, state) != state.marks


def _next_newline(handle, start: int, size: int) -> int | None:
    """The offset just past the next newline at or after `start`, or None before `size`."""
    at = start
    while at < size:
        handle.seek(at)
        chunk = handle.read(min(MAX_MESSAGE_BYTES, size - at))
        newline = chunk.find(b"\n")
        if newline >= 0:
            return at + newline + 1
        at += len(chunk)
    return None


def _sleep_unless(stopping: list[int], duration_s: float) -> None:
    """time.sleep resumes after a signal handler returns (PEP 475): sleep in slices, so a
    SIGTERM during a long --interval-s ends the forwarder within a tenth of a second."""
    deadline = time.monotonic() + duration_s
    while not stopping and (left := deadline - time.monotonic()) > 0:
        time.sleep(min(left, 0.1))


def follow(paths: list[str], endpoint: str, interval_s: float = 0.5, once: bool = False,
           give_up_s: float = 30.0, key_dir: str | None = None,
           requests: str = "") -> Forwarded:
    """Forward until SIGTERM/SIGUSR1/SIGINT, or with `once` until what exists now is sent.
    With `once`, a daemon that takes nothing for `give_up_s` ends it (incomplete); without it,
    the forwarder waits for the daemon as long as it runs."""
    stopping: list[int] = []  # the signals received
    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1):  # USR1: see daemon.loop
        signal.signal(signum, lambda number, _frame: stopping.append(number))
    forwarder = Forwarder(paths, endpoint, key_dir, requests)
    complete = False
    try:
        progress_at, progress = time.monotonic(), -1
        retry_s = RETRY_FIRST_S
        while not stopping:
            taken = forwarder.pump()
            complete = taken & forwarder.acknowledged()
            if forwarder.sent_messages != progress:
                progress_at, progress = time.monotonic(), forwarder.sent_messages
            if once and (complete or time.monotonic() - progress_at > give_up_s):
                break
            # what the daemon did not take (a socket still connecting refuses the first
            # send) is tried again soon, backing off to the interval: an hour's --interval-s
            # once held a trace's start back for the whole hour
            _sleep_unless(stopping, interval_s if taken else min(interval_s, retry_s))
            retry_s = RETRY_FIRST_S if taken else min(2 * retry_s, RETRY_MAX_S)
        else:
            complete = forwarder.pump()
    finally:
        forwarder.close()
    log.info("forwarded %d messages, %d bytes", forwarder.sent_messages, forwarder.sent_bytes)
    return Forwarded(forwarder.sent_messages, forwarder.sent_bytes, len(forwarder.files),
                     complete, stopping[0] if stopping else None)
