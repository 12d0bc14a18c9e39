"""Large values of the state file kept beside it, one file each.

A daemon's statistics snapshot is tens of MB under a busy stream. SQLite writes a blob that
size through its WAL and copies it again into the database when it checkpoints: measured
here, 32 MB cost 140-210 ms of CPU and 350 ms of the loop's time, against 16-65 ms to write
a file. So a large value goes to a new file of its own (`<state file>.<key>.<12 hex>`, mode
0600, never overwritten), and the database row names it with its size and CRC-32, in the same
transaction as the small values it must agree with. The file replaced is removed after the
commit; one a crash left unnamed is removed when the state file is next opened for writing.
A file that no longer matches its size or CRC (a power loss before an unsynced snapshot
reached the disk) reads as damaged: the caller then starts afresh, as with any unreadable
state.
"""

from __future__ import annotations

import os
import re
import secrets

import msgspec
from isal import isal_zlib

LARGE_VALUE_BYTES = 1 << 20  # below this, a value stays in its row


class SidecarRef(msgspec.Struct, frozen=True, array_like=True):
    """What the database row keeps of a value written beside it."""

    file: str  # a base name, in the state file's directory
    size_bytes: int
    crc32: int


class SidecarDamaged(ValueError):
    """A sidecar file is missing, or its size or CRC-32 is not what its row says."""


def write(db_path: str, key: str, value: bytes | bytearray | memoryview,
          synced: bool) -> SidecarRef:
    """`value` to a new file beside `db_path`; when `synced`, the file and its name reach the
    disk before this returns (the commit naming it follows)."""
    directory, base = os.path.split(os.path.abspath(db_path))
    name = f"{base}.{_slug(key)}.{secrets.token_hex(6)}"
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    fd = os.open(os.path.join(directory, name), flags, 0o600)
    try:
        with os.fdopen(fd, "wb", closefd=False) as out:
            out.write(value)
            out.flush()
            if synced:
                os.fsync(fd)
        if synced:
            _sync_directory(directory)
    except BaseException:
        os.close(fd)
        remove(db_path, [name])
        raise
    os.close(fd)
    return SidecarRef(file=name, size_bytes=len(value), crc32=isal_zlib.crc32(value))


def read(db_path: str, ref: SidecarRef) -> bytes:
    """The value `ref` names. Raises SidecarDamaged when it is not what was written."""
    if not _NAME.fullmatch(ref.file):  # a row names a file of ours, never a path
        raise SidecarDamaged(f"{ref.file!r} is not a sidecar file name")
    path = os.path.join(os.path.dirname(os.path.abspath(db_path)), ref.file)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise SidecarDamaged(f"{path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as source:
        value = source.read(ref.size_bytes + 1)
    if len(value) != ref.size_bytes or isal_zlib.crc32(value) != ref.crc32:
        raise SidecarDamaged(f"{path}: {len(value)} bytes not matching the {ref.size_bytes} "
                             "written (cut short or changed since)")
    return value


def remove(db_path: str, names: list[str]) -> None:
    directory = os.path.dirname(os.path.abspath(db_path))
    for name in names:
        if _NAME.fullmatch(name):
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass
            except OSError:  # a read-only directory: left, removed when it can be
                continue


def unnamed(db_path: str, named: set[str]) -> list[str]:
    """Sidecar files of `db_path` that no row names (left by a crash before a commit)."""
    directory, base = os.path.split(os.path.abspath(db_path))
    try:
        listed = os.listdir(directory)
    except OSError:
        return []
    return [name for name in listed if name.startswith(base + ".") and
            _NAME.fullmatch(name) and name[len(base) + 1:].count(".") == 1 and
            name not in named]


def _sync_directory(directory: str) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _slug(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", key)[:40] or "_"


_NAME = re.compile(r"[^/\0]+\.[A-Za-z0-9_-]{1,40}\.[0-9a-f]{12}")
