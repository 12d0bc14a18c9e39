"""The daemon's durable state in SQLite (WAL): snapshots that let a restarted daemon continue
(statistics, recommendation, counters), and the goodput events clients record, each committed
before the client hears back, so nothing recorded is lost when the daemon dies."""

from __future__ import annotations

import sqlite3

import msgspec

from scrtune.errors import StoreError

SCHEMA = """
CREATE TABLE IF NOT EXISTS blobs (key TEXT PRIMARY KEY, value BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job TEXT NOT NULL, run INTEGER NOT NULL, kind TEXT NOT NULL,
    wall_s REAL NOT NULL, step INTEGER NOT NULL, detail TEXT NOT NULL,
    received_s REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS events_by_job ON events (job, run, wall_s);
"""


class StoredEvent(msgspec.Struct, frozen=True, kw_only=True):
    job: str
    run: int
    kind: str
    wall_s: float
    step: int
    detail: str


class Store:
    """`read_only` (for reports): the file must exist and is never created or changed.
    Opening a file that is not a state file raises StoreError, one line."""

    def __init__(self, path: str, read_only: bool = False) -> None:
        self.path = path
        try:
            if read_only:
                self._db = sqlite3.connect(f"file:{_uri_path(path)}?mode=ro", uri=True,
                                           isolation_level=None)
                self._db.execute("SELECT COUNT(*) FROM events").fetchone()
            else:
                self._db = sqlite3.connect(path, isolation_level=None)  # explicit transactions
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")  # a recorded event survives a crash
                self._db.executescript(SCHEMA)
        except sqlite3.Error as exc:
            raise StoreError(f"{path}: not a usable scrtune state file: {exc}") from None

    def close(self) -> None:
        self._db.close()

    def record(self, event: StoredEvent, received_s: float) -> int:
        with self._db:
            cursor = self._db.execute(
                "INSERT INTO events (job, run, kind, wall_s, step, detail, received_s) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (event.job, event.run, event.kind, event.wall_s, event.step, event.detail,
                 received_s))
        return int(cursor.lastrowid or 0)

    def events(self, job: str | None = None) -> list[StoredEvent]:
        query = "SELECT job, run, kind, wall_s, step, detail FROM events"
        rows = self._db.execute(query + (" WHERE job = ?" if job else "") + " ORDER BY id",
                                (job,) if job else ())
        return [StoredEvent(job=r[0], run=r[1], kind=r[2], wall_s=r[3], step=r[4], detail=r[5])
                for r in rows]

    def event_count(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def kind_counts(self) -> dict[str, int]:
        """How many events of each kind are recorded, counted by SQLite, not by loading them."""
        rows = self._db.execute("SELECT kind, COUNT(*) FROM events GROUP BY kind")
        return {str(kind): int(count) for kind, count in rows}

    def wall_span_s(self) -> float:
        """Seconds between the earliest and the latest recorded event (0 when none)."""
        first, last = self._db.execute("SELECT MIN(wall_s), MAX(wall_s) FROM events").fetchone()
        return float(last - first) if first is not None else 0.0

    def put(self, key: str, value: bytes) -> None:
        with self._db:
            self._db.execute("INSERT OR REPLACE INTO blobs (key, value) VALUES (?, ?)",
                             (key, value))

    def get(self, key: str) -> bytes | None:
        row = self._db.execute("SELECT value FROM blobs WHERE key = ?", (key,)).fetchone()
        return bytes(row[0]) if row else None


def _uri_path(path: str) -> str:
    """`path` inside a file: URI (where ? and # would start the query or fragment)."""
    from urllib.parse import quote

    return quote(path, safe="/")
