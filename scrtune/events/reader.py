"""Trace files to chunks of whole lines: paths, globs and directories; plain or gzip; damage.

A crashed job leaves a truncated `.pfw.gz`: it is read up to the damage and a warning says so.
DFTracer 2.x writes one gzip member per buffer flush, so members are followed to the end.
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from isal import igzip_lib

from scrtune.errors import TraceError

TRACE_SUFFIXES = (".pfw", ".pfw.gz")
# decompressed bytes per chunk: each costs the replaying thread a fixed share of Python and
# numpy calls (about 2 ms), so 8 MiB took a seventh off that thread against 4 MiB, and 16 MiB
# a tenth off a DLIO-shaped replay against 8 (a few chunks in flight are the memory it costs:
# it does not grow with the trace)
CHUNK_BYTES = 16 << 20
# The first chunk is parsed before the file's generation and time unit are known, so by the
# Python parser on the replaying thread: keep it small (about 300 lines) so the rest take the
# fast path.
FIRST_CHUNK_BYTES = 64 << 10
GZIP_MAGIC = b"\x1f\x8b"
READ_BYTES = 1 << 20  # compressed bytes read at a time
_STEM = re.compile(r"^(?P<stem>.+)-(?P<role>app|preload|fork)\.pfw(?:\.gz)?$")


@dataclass
class ReadProblems:
    """What went wrong while reading one file; filled in as the file is read."""

    warnings: list[str] = field(default_factory=list)
    truncated: bool = False


def expand_paths(paths: list[str]) -> list[str]:
    """Files, directories (searched recursively for traces) and glob patterns, in a stable order.

    Raises TraceError naming the first path that matches nothing.
    """
    found: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            inside = [
                os.path.join(root, name)
                for root, _, names in os.walk(path)
                for name in names
                if name.endswith(TRACE_SUFFIXES)
            ]
            if not inside:
                raise TraceError(f"{path}: a directory with no trace file "
                                 f"({', '.join(TRACE_SUFFIXES)}) in it")
            found.extend(sorted(inside))
        elif os.path.isfile(path):
            found.append(path)
        elif os.path.exists(path):
            raise TraceError(f"{path}: not a regular file (a pipe, socket or device)")
        else:
            matches = sorted(p for p in glob.glob(path, recursive=True) if os.path.isfile(p))
            if not matches:
                raise TraceError(f"{path}: no such file, directory or matching trace")
            found.extend(matches)
    unique = list(dict.fromkeys(os.path.normpath(p) for p in found))
    return unique


def process_group(path: str) -> str:
    """Files of one process share a stem (`-app`, `-preload`, `-fork` of one hash): keep them
    together when work is split, because regions in one may enclose I/O recorded in another."""
    match = _STEM.match(os.path.basename(path))
    stem = match.group("stem") if match else os.path.basename(path)
    return os.path.join(os.path.dirname(path), stem)


def role_order(path: str) -> int:
    """Within a group, read the file holding application regions first."""
    match = _STEM.match(os.path.basename(path))
    return {"app": 0, "preload": 1, "fork": 2}.get(match.group("role") if match else "", 0)


@dataclass(frozen=True)
class Chunk:
    """Whole lines: `head` (the line that straddled the last block boundary), then, when
    present, the lines of `body`: a view of one inflated block, never copied (a copy of each
    block cost the inflating thread as much as the inflate itself)."""

    head: bytes
    body: memoryview | None = None

    def parts(self) -> tuple[bytes] | tuple[bytes, memoryview]:
        """The buffers whose lines, in order, are the chunk's (as the C parser takes them)."""
        return (self.head,) if self.body is None else (self.head, self.body)

    def joined(self) -> bytes:
        """The lines as one bytes object, for the paths that need one (a copy)."""
        return b"\n".join(self.parts())


def iter_chunks(
    path: str, problems: ReadProblems, chunk_bytes: int = CHUNK_BYTES,
    first_bytes: int = FIRST_CHUNK_BYTES,
) -> Iterator[Chunk]:
    """Yield the file's whole lines, a block at a time, as Chunks (the final newline left
    out); the first block is at most `first_bytes`. Parsers count a chunk's lines as they go,
    so line numbers cost the reader nothing."""
    rest = b""
    for block in iter_blocks(path, problems, chunk_bytes, first_bytes):
        first = block.find(b"\n")
        if first < 0:
            rest += block
            continue
        last = block.rfind(b"\n")
        head = rest + block[:first] if rest else block[:first]
        body = memoryview(block)[first + 1 : last] if last > first else None
        rest = block[last + 1 :]
        yield Chunk(head, body)
    if rest.strip():
        yield Chunk(rest)


def iter_blocks(path: str, problems: ReadProblems, chunk_bytes: int,
                first_bytes: int | None = None) -> Iterator[bytes]:
    """The file's bytes, decompressed when gzip (every member), in blocks cut anywhere; the
    first at most `first_bytes` (default: chunk_bytes)."""
    first_bytes = min(first_bytes or chunk_bytes, chunk_bytes)
    try:
        handle = open(path, "rb")
    except OSError as exc:
        raise TraceError(f"{path}: {exc.strerror or exc}") from None
    with handle:
        head = handle.read(2)
        handle.seek(0)
        if head == GZIP_MAGIC:
            yield from _gunzip(handle, path, problems, chunk_bytes, first_bytes)
            return
        limit = first_bytes
        while block := handle.read(limit):
            yield block
            limit = chunk_bytes


def _gunzip(handle, path: str, problems: ReadProblems, chunk_bytes: int,
            first_bytes: int) -> Iterator[bytes]:
    """Every member's bytes, in blocks of at most `chunk_bytes` (the first `first_bytes`).
    ISA-L's IgzipDecompressor (the bz2-style API) inflates a call's output with the GIL
    released throughout: `isal_zlib.decompressobj` takes the GIL back for every piece of
    output it grows (beside a thread running Python it inflated a 2M-record trace in 1.53 s,
    this in 0.40 s; benchmarks/RESULTS.md, fifteenth change). It checks each member's CRC and
    length too."""
    inflater = new_inflater()
    limit = first_bytes
    member_open = False  # the current member has received input but not reached its end
    offset = 0
    while compressed := handle.read(min(READ_BYTES, chunk_bytes)):
        offset += len(compressed)
        pending = compressed
        if not member_open and not pending.strip(b"\0"):
            continue  # padding after the last member, read on its own
        while True:
            member_open = member_open or bool(pending)
            try:
                out = inflater.decompress(pending, limit)
            except igzip_lib.IsalError as exc:
                problems.truncated = True
                problems.warnings.append(
                    f"{path}: gzip data damaged near byte {offset} ({exc}); read up to the damage"
                )
                return
            pending = b""
            if out:
                yield out
                limit = chunk_bytes
            if inflater.eof:
                pending = inflater.unused_data
                inflater = new_inflater()
                member_open = False
                if pending.lstrip(b"\0") == b"":  # padding after the last member
                    break
            elif inflater.needs_input:
                break
    if member_open:
        problems.truncated = True
        problems.warnings.append(
            f"{path}: gzip stream ends early (truncated, e.g. by a crashed job); "
            "read up to the damage"
        )


def new_inflater() -> igzip_lib.IgzipDecompressor:
    """An inflater of one gzip member, which checks its CRC and length."""
    return igzip_lib.IgzipDecompressor(flag=igzip_lib.DECOMP_GZIP)
