"""The job's goodput records, also as JSON lines where they outlive the node.

A daemon stores what TunedSCR records (job starts, saves, restores) in its state file, in the
node's own runtime directory: gone with the node's temp dir when the job ends, and on whichever
node world rank 0 ran. `scrtune daemon --records-log FILE` appends each record it stores, once,
to FILE as well (scrtune's JSON-lines schema, which `scrtune goodput --log FILE` reads), synced
before the record is acknowledged. `%h` in FILE is the host name, so that every node's daemon
may be given one path on the shared file system. A failure to write is logged once; the record
stays in the state file and the daemon keeps serving.
"""

from __future__ import annotations

import logging
import os
import socket

import msgspec

from scrtune.goodput.store import StoredEvent

log = logging.getLogger("scrtune.daemon")


class LoggedRecord(msgspec.Struct, frozen=True):
    """One line, as goodput.readers reads scrtune's JSON lines."""

    kind: str
    wall_s: float
    step: int
    job: str
    run: int
    detail: str


class RecordsLog:
    def __init__(self, pattern: str) -> None:
        self.path = os.path.abspath(pattern.replace("%h", socket.gethostname()))
        self._fd: int | None = None  # opened at the first record: a node given none has none
        self._failed = False
        self._encoder = msgspec.json.Encoder()

    def append(self, event: StoredEvent) -> None:
        line = self._encoder.encode(LoggedRecord(
            kind=event.kind, wall_s=event.wall_s, step=event.step, job=event.job,
            run=event.run, detail=event.detail)) + b"\n"
        try:
            if self._fd is None:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT |
                                   os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            os.write(self._fd, line)  # one write, O_APPEND: a line is never split
            os.fsync(self._fd)
        except OSError as exc:
            if not self._failed:
                log.warning("--records-log %s: %s; records stay in the state file only",
                            self.path, exc.strerror or exc)
            self._failed = True

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
