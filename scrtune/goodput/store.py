"""The daemon's durable state in SQLite (WAL): snapshots that let a restarted daemon continue
(statistics, recommendation, counters), and the goodput events clients record, each committed
before the client hears back, so nothing recorded is lost when the daemon dies.

An event may carry the id its client gave it: storing it again (a retry after a late reply, a
resend from the client's spool) stores nothing and answers with the first copy's row id. A
write that fails (a full disk, a read-only file) raises StoreUnavailable; reads go on."""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator

import msgspec

from scrtune.errors import StoreError, StoreUnavailable
from scrtune.goodput import salvage, sidecar

SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (key TEXT PRIMARY KEY, value BLOB NOT NULL);
-- values of LARGE_VALUE_BYTES or more, each in a file beside this one (sidecar.py)
CREATE TABLE IF NOT EXISTS sidecars (key TEXT PRIMARY KEY, ref BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL, run INTEGER NOT NULL, kind TEXT NOT NULL,
    wall_s REAL NOT NULL, step INTEGER NOT NULL, detail TEXT NOT NULL,
    received_s REAL NOT NULL, record_id TEXT
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job, run, wall_s);
"""
# after _migrate(): a state file from before record ids gains the column first
RECORD_ID_INDEX = ("CREATE UNIQUE INDEX IF NOT EXISTS events_by_record ON events (record_id) "
                   "WHERE record_id IS NOT NULL")


class StoredEvent(msgspec.Struct, frozen=True, kw_only=True):
    job: str
    run: int
    kind: str
    wall_s: float
    step: int
    detail: str
    record_id: str = ""  # the client's id for it; "" for none (never deduplicated)


class Store:
    """`read_only` (for reports): the file must exist and is never created or changed.
    Opening a file that is not a state file raises StoreError, one line."""

    def __init__(self, path: str, read_only: bool = False) -> None:
        """`problems`: what was wrong with the file and what was done, one line each
        (salvage.py); the daemon logs them."""
        self.path = path
        self.writable = not read_only
        self.problems: list[str] = []
        try:
            if read_only:
                self._db = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True,
                                           isolation_level=None)
                self._db.execute("SELECT COUNT(*) FROM events").fetchone()
            else:
                self.problems += filter(None, [salvage.before_open(path)])
                self._open_checked(path)
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: not a usable scrtune state file: {exc}") from None

    def _open_checked(self, path: str) -> None:
        """Open for writing; a damaged SQLite file is moved aside and its readable events
        copied into a fresh one (a file that is not SQLite at all is refused: StoreError)."""
        try:
            self._open_for_writing(path)
            why = salvage.damage(self._db) if self.writable else ""
        except sqlite3.DatabaseError as exc:
            if not salvage.is_sqlite(path):
                raise
            why = str(exc)
        if why:
            with contextlib.suppress(sqlite3.Error, AttributeError):
                self._db.close()
            aside = salvage.move_aside(path)
            self._open_for_writing(path)
            copied, claimed = salvage.copy_events(aside, self._db)
            self.problems.append(f"{path} is damaged ({why}): moved to {aside}; {copied} of "
                                 f"{claimed} recorded events recovered into a fresh state file, "
                                 "whose statistics start afresh")
        self._inode = os.stat(path).st_ino if self.writable else 0

    def still_there(self) -> str:
        """When the state file was deleted or replaced under this open one, write it again
        from the open one (its events and snapshots), so that nothing recorded is lost at the
        next start; the warning, or "" when it is in place."""
        try:
            if os.stat(self.path).st_ino == self._inode:
                return ""
            why = "replaced"
        except FileNotFoundError:
            why = "deleted"
        except OSError:
            return ""
        if why == "replaced":
            return f"{self.path} was replaced under the daemon: left alone, writing on"
        try:
            self._db.execute("VACUUM INTO ?", (self.path,))
            old, self._db = self._db, None
            old.close()
            self._open_for_writing(self.path)
            self._inode = os.stat(self.path).st_ino
        except (sqlite3.Error, OSError) as exc:
            if self._db is None:
                self._db = sqlite3.connect(self.path, isolation_level=None)
            return f"{self.path} was deleted under the daemon and cannot be written again: {exc}"
        return f"{self.path} was deleted under the daemon: written again from the open one"

    def _open_for_writing(self, path: str) -> None:
        """Read and write; a state file that exists but cannot be written (read-only, on a
        read-only mount) is opened for reading, so status and reports still work."""
        self._db = sqlite3.connect(path, isolation_level=None)  # explicit transactions
        try:
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")  # a recorded event survives a crash
            self._db.executescript(SCHEMA)
            self._migrate()
            sidecar.remove(path, sidecar.unnamed(path, set(self._sidecars().values())))
        except sqlite3.OperationalError as exc:
            if "readonly" not in str(exc) or not os.path.exists(path):
                raise
            self._db.close()
            self._db = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True,
                                       isolation_level=None)
            self._db.execute("SELECT COUNT(*) FROM events").fetchone()
            self.writable = False

    def close(self) -> None:
        self._db.close()

    def _migrate(self) -> None:
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(events)")}
        if "record_id" not in columns:
            self._db.execute("ALTER TABLE events ADD COLUMN record_id TEXT")
        self._db.execute(RECORD_ID_INDEX)

    def record(self, event: StoredEvent, received_s: float) -> tuple[int, bool]:
        """(row id, True) once committed; (the first copy's row id, False) when an event of
        the same record id is stored already."""
        try:
            with self._db:
                cursor = self._db.execute(
                    "INSERT INTO events (job, run, kind, wall_s, step, detail, received_s, "
                    "record_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                    (event.job, event.run, event.kind, event.wall_s, event.step, event.detail,
                     received_s, event.record_id or None))
        except sqlite3.Error as exc:
            raise StoreUnavailable(f"{self.path}: cannot store the event: {exc}") from None
        if cursor.rowcount == 1:
            return int(cursor.lastrowid or 0), True
        row = self._db.execute("SELECT id FROM events WHERE record_id = ?",
                               (event.record_id,)).fetchone()
        return int(row[0]), False

    def events(self, job: str | None = None) -> list[StoredEvent]:
        return [event for batch in self.event_batches(job) for event in batch]

    def event_batches(self, job: str | None = None,
                      rows: int = 50_000) -> Iterator[list[StoredEvent]]:
        """The events in the order received, a batch at a time (a long job's store is read in
        flat memory)."""
        query = "SELECT job, run, kind, wall_s, step, detail FROM events"
        cursor = self._db.execute(query + (" WHERE job = ?" if job else "") + " ORDER BY id",
                                  (job,) if job else ())
        while batch := cursor.fetchmany(rows):
            yield [StoredEvent(job=r[0], run=r[1], kind=r[2], wall_s=r[3], step=r[4],
                               detail=r[5]) for r in batch]

    def event_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def kind_counts(self) -> dict[str, int]:
        """How many events of each kind are recorded, counted by SQLite, not by loading them."""
        rows = self._db.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind")
        return {str(kind): int(count) for kind, count in rows}

    def last_kind(self, kinds: tuple[str, ...]) -> str | None:
        """The kind of the latest event (by time, then by arrival) among `kinds`."""
        marks = ", ".join("?" * len(kinds))
        row = self._db.execute(f"SELECT kind FROM events WHERE kind IN ({marks}) "
                               "ORDER BY wall_s DESC, id DESC LIMIT 1", kinds).fetchone()
        return str(row[0]) if row else None

    def wall_span_s(self) -> float:
        """Seconds between the earliest and the latest recorded event (0 when none)."""
        first, last = self._db.execute("SELECT MIN(wall_s), MAX(wall_s) FROM events").fetchone()
        return float(last - first) if first is not None else 0.0

    def put(self, key: str, value: bytes) -> None:
        self.put_many({key: value})

    def put_many(self, items: dict[str, bytes | bytearray], synced: bool = True) -> None:
        """All of `items` or none: a snapshot's parts must agree with each other. With
        `synced=False` the commit does not wait for the disk (the next synced one carries
        it): a power loss may lose it, never a crash of the process, and the file stays
        whole. A daemon's snapshot is such: losing one means resuming from the one before
        (forwarders resend from its offsets), and a node's loop need not wait for tens of MB
        to reach its disk. (On this project's VM, whose disk is the host's cache, the wait
        did not show.) A value of LARGE_VALUE_BYTES or more goes to a file of its own,
        written before the commit that names it (sidecar.py)."""
        written: list[str] = []
        try:
            refs = {}
            for key, value in items.items():
                if isinstance(value, bytes | bytearray | memoryview) and \
                        len(value) >= sidecar.LARGE_VALUE_BYTES:
                    refs[key] = sidecar.write(self.path, key, value, synced)
                    written.append(refs[key].file)
            replaced = self._commit(items, refs, synced)
        except (sqlite3.Error, OSError) as exc:
            sidecar.remove(self.path, written)
            raise StoreUnavailable(f"{self.path}: cannot save {', '.join(items)}: {exc}") \
                from None
        except BaseException:
            sidecar.remove(self.path, written)
            raise
        sidecar.remove(self.path, replaced)

    def _commit(self, items: dict[str, bytes | bytearray], refs: dict[str, sidecar.SidecarRef],
                synced: bool) -> list[str]:
        """One transaction; returns the sidecar files it no longer names."""
        self._db.execute(f"PRAGMA synchronous={'FULL' if synced else 'NORMAL'}")
        try:
            with self._db:  # commits, or rolls back what raised
                self._db.execute("BEGIN")  # the connection commits each statement otherwise
                replaced = self._sidecars(list(items))
                self._db.executemany(
                    "INSERT OR REPLACE INTO blobs (key, value) VALUES (?, ?)",
                    [(k, v) for k, v in items.items() if k not in refs])
                self._db.executemany(
                    "INSERT OR REPLACE INTO sidecars (key, ref) VALUES (?, ?)",
                    [(k, msgspec.msgpack.encode(ref)) for k, ref in refs.items()])
                self._db.executemany("DELETE FROM sidecars WHERE key = ?",
                                     [(k,) for k in items if k not in refs])
                self._db.executemany("DELETE FROM blobs WHERE key = ?", [(k,) for k in refs])
        finally:
            self._db.execute("PRAGMA synchronous=FULL")  # recorded events: as opened
        return list(replaced.values())

    def get(self, key: str) -> bytes | None:
        """The value; raises StoreError when it was written beside the file and that file is
        gone or damaged."""
        row = self._db.execute("SELECT value FROM blobs WHERE key = ?", (key,)).fetchone()
        if row:
            return bytes(row[0])
        try:
            row = self._db.execute("SELECT ref FROM sidecars WHERE key = ?", (key,)).fetchone()
        except sqlite3.OperationalError:  # a state file from before sidecars, opened read-only
            return None
        if not row:
            return None
        try:
            return sidecar.read(self.path, msgspec.msgpack.decode(row[0],
                                                                  type=sidecar.SidecarRef))
        except (msgspec.DecodeError, sidecar.SidecarDamaged) as exc:
            raise StoreError(f"{key} unreadable: {exc}") from None

    def _sidecars(self, keys: list[str] | None = None) -> dict[str, str]:
        """Key -> sidecar file, of `keys` or of all."""
        rows = self._db.execute("SELECT key, ref FROM sidecars").fetchall()
        named = {}
        for key, ref in rows:
            if keys is None or key in keys:
                try:
                    named[key] = msgspec.msgpack.decode(ref, type=sidecar.SidecarRef).file
                except msgspec.DecodeError:
                    continue
        return named


def _uri_path(path: str) -> str:
    """`path` inside a file: URI (where ? and # would start the query or fragment)."""
    from urllib.parse import quote

    return quote(path, safe="/")
