"""Records the daemon has not acknowledged yet, kept until it does.

A client appends each record to a small file of its own before sending it, and appends the
record's id once the daemon has committed it. When the process ends with records still
unacknowledged (the daemon was down, stopped, or could not write), the file stays; the next
client on the same node adopts it once its process is gone, and sends those records again.
The daemon stores a record id once however often it arrives, so a resend never counts twice.

File format, one line each: `+{record as JSON}` or `-{record id}`. A torn last line (the
process died while writing it) is skipped. Nothing here ever raises into the application.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import threading
import weakref

import msgspec

from scrtune.daemon.protocol import Record

log = logging.getLogger("scrtune.client")
SPOOL_SUFFIX = ".spool"
MAX_UNACKED = 100_000  # records held when the daemon stays away; beyond it they are dropped
COMPACT_LINES = 4096  # a file of only acknowledged records is emptied past this many lines
_NAME = re.compile(r"^(?P<host>.+)-(?P<pid>\d+)-(?P<token>[0-9a-f]+)\.spool$")
_decode = msgspec.json.Decoder(Record).decode
_encode = msgspec.json.Encoder().encode


class Spool:
    """Thread-safe. `directory` None or unusable: records are held in memory only."""

    def __init__(self, directory: str | None, token: str) -> None:
        self._lock = threading.Lock()
        self._unacked: dict[str, Record] = {}
        self._lines = 0
        self._file = None
        self.directory = directory or ""
        self.path = ""
        self.dropped = 0  # over MAX_UNACKED: logged, counted
        if directory:
            self._open(directory, f"{os.uname().nodename}-{os.getpid()}-{token}{SPOOL_SUFFIX}")
        atexit.register(_close_at_exit, weakref.ref(self))

    def _open(self, directory: str, name: str) -> None:
        path = os.path.join(directory, name)
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
            # O_APPEND: after compaction (truncate) each write lands at the new end; without
            # it the next one landed at the old offset, after a run of zeros that hid it
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL |
                         os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            log.warning("scrtune: no spool in %s (%s): unacknowledged records are kept in "
                        "memory only", directory, exc.strerror or exc)
            return
        self._file = os.fdopen(fd, "ab", buffering=0)
        self.path = path

    def __len__(self) -> int:
        return len(self._unacked)

    def add(self, record: Record) -> bool:
        """Keep `record` until ack(); False (dropped, counted) when too many are held."""
        with self._lock:
            if len(self._unacked) >= MAX_UNACKED:
                self.dropped += 1
                if self.dropped == 1:
                    log.warning("scrtune: %d records await the daemon; dropping new ones",
                                MAX_UNACKED)
                return False
            self._unacked[record.record_id] = record
            self._append(b"+" + _encode(record) + b"\n")
            return True

    def ack(self, record_id: str) -> None:
        """The daemon has it (or refused it for good): forget it."""
        with self._lock:
            if self._unacked.pop(record_id, None) is None:
                return
            self._append(b"-" + record_id.encode() + b"\n")
            if not self._unacked and self._lines >= COMPACT_LINES and self._file is not None:
                with contextlib.suppress(OSError):
                    self._file.truncate(0)
                    self._lines = 0

    def unacked(self) -> list[Record]:
        with self._lock:
            return list(self._unacked.values())

    def _append(self, line: bytes) -> None:
        if self._file is None:
            return
        try:
            self._file.write(line)
            self._lines += 1
        except OSError as exc:  # a full disk: memory still holds it
            log.debug("spool %s: %s", self.path, exc)

    def adopt(self) -> list[Record]:
        """The records of spools left by ended processes on this node, now this one's."""
        if not self.directory:
            return []
        adopted: list[Record] = []
        try:
            names = sorted(os.listdir(self.directory))
        except OSError:
            return []
        host = os.uname().nodename
        for name in names:
            match = _NAME.match(name)
            if not match or match["host"] != host or _alive(int(match["pid"])):
                continue
            claimed = os.path.join(self.directory, f".{name}.{os.getpid()}")
            try:
                os.rename(os.path.join(self.directory, name), claimed)  # one adopter wins
            except OSError:
                continue
            for record in _read(claimed):
                if self.add(record):
                    adopted.append(record)
            with contextlib.suppress(OSError):
                os.unlink(claimed)
        return adopted

    def close(self) -> None:
        """Remove the file when nothing is left in it; keep it for adoption otherwise."""
        with self._lock:
            if self._file is None:
                return
            with contextlib.suppress(OSError):
                self._file.close()
            if not self._unacked:
                with contextlib.suppress(OSError):
                    os.unlink(self.path)
            self._file = None


def _read(path: str) -> list[Record]:
    """The records of a spool file that were never acknowledged, in the order sent."""
    records: dict[str, Record] = {}
    try:
        with open(path, "rb") as handle:
            for line in handle:
                line = line.lstrip(b"\0")  # a spool written before O_APPEND: zeros, then lines
                if line.startswith(b"+") and line.endswith(b"\n"):
                    with contextlib.suppress(msgspec.DecodeError):
                        record = _decode(line[1:])
                        if record.record_id:
                            records[record.record_id] = record
                elif line.startswith(b"-"):
                    records.pop(line[1:].strip().decode(errors="replace"), None)
    except OSError as exc:
        log.debug("spool %s: %s", path, exc)
    return list(records.values())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _close_at_exit(ref: weakref.ref) -> None:
    spool = ref()
    if spool is not None:
        spool.close()
