"""A state file that is damaged, empty or gone, said in words and recovered from (issue 45).

SQLite opens a file with garbage in its middle and fails only when a query reaches the damaged
pages: a daemon then answered every `status` with an error and refused every record for good. A
zero-byte file, or a state file deleted while the daemon ran (its writes then went to an
unlinked inode, lost at the next start), went unnoticed. Here: SQLite's own check at open; a
damaged file is moved aside (never deleted) and what can be read of its events is copied into a
fresh one; a state file deleted under a running daemon is written again from the open one
(`VACUUM INTO`). Each case is one warning line naming the file.
"""

from __future__ import annotations

import os
import sqlite3
import time

SQLITE_MAGIC = b"SQLite format 3\0"
COPY_ROWS = 1000


def before_open(path: str) -> str:
    """What is wrong with `path` before it is opened for writing ("" when nothing)."""
    try:
        size = os.path.getsize(path)
    except OSError:
        directory, base = os.path.split(os.path.abspath(path))
        try:
            left = [n for n in os.listdir(directory) if n.startswith(base + ".")]
        except OSError:
            left = []
        return (f"{path} is missing, but {len(left)} file(s) of an earlier one are beside it "
                "(deleted?): starting a fresh state file") if left else ""
    return f"{path} was empty (0 bytes): starting a fresh state file" if size == 0 else ""


def is_sqlite(path: str) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def damage(db: sqlite3.Connection) -> str:
    """SQLite's quick_check of an open database: "" when whole, else its first complaint."""
    try:
        rows = db.execute("PRAGMA quick_check(3)").fetchall()
    except sqlite3.DatabaseError as exc:
        return str(exc)
    found = [str(row[0]) for row in rows]
    return "" if found == ["ok"] else "; ".join(found)


def move_aside(path: str) -> str:
    """Rename the damaged file (and its WAL and shared memory) out of the way; its new name."""
    aside = f"{path}.damaged-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.replace(path + suffix, aside + suffix)
    return aside


def copy_events(damaged: str, db: sqlite3.Connection) -> tuple[int, int]:
    """The events readable in `damaged` copied into `db` (same schema), a range of ids at a
    time so that a damaged page costs its own rows; (copied, rows the damaged file claims)."""
    source = sqlite3.connect(f"file:{damaged}?mode=ro", uri=True)
    copied = 0
    try:
        try:
            low, high = source.execute("SELECT MIN(id), MAX(id) FROM events").fetchone()
        except sqlite3.DatabaseError:
            return 0, 0
        if low is None:
            return 0, 0
        columns = "job, run, kind, wall_s, step, detail, received_s, record_id"
        for first in range(low, high + 1, COPY_ROWS):
            try:
                rows = source.execute(f"SELECT {columns} FROM events WHERE id >= ? AND id < ? "
                                      "ORDER BY id", (first, first + COPY_ROWS)).fetchall()
            except sqlite3.DatabaseError:
                rows = _one_by_one(source, columns, first)
            with db:  # commits, or rolls back what raised
                # the store's connection commits each statement otherwise: a sync a row, and
                # under a busy machine a scheduling wait each (3000 rows took 25 s, not 0.4)
                db.execute("BEGIN")
                db.executemany(f"INSERT INTO events ({columns}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                               "ON CONFLICT DO NOTHING", rows)
            copied += len(rows)
        return copied, high - low + 1
    finally:
        source.close()


def _one_by_one(source: sqlite3.Connection, columns: str, first: int) -> list:
    rows = []
    for row_id in range(first, first + COPY_ROWS):
        try:
            row = source.execute(f"SELECT {columns} FROM events WHERE id = ?",
                                 (row_id,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            rows.append(row)
    return rows
