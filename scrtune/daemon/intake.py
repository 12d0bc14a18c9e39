"""Event messages to batches: the part of intake that needs no daemon state, so it runs on a
parse thread (the C scan releases the GIL) while the loop thread aggregates the previous
block into the statistics and keeps serving requests."""

from __future__ import annotations

import logging
import re
import time

import msgspec
from isal import igzip_lib

from scrtune.daemon.protocol import MAX_EVENT_MESSAGE_BYTES
from scrtune.daemon.rarelog import RareLog
from scrtune.events.codec import CodecError, decode_batch
from scrtune.events.model import EventBatch, Generation
from scrtune.events.parse import FileContext, parse_buffers
from scrtune.events.reader import GZIP_MAGIC, new_inflater

log = logging.getLogger("scrtune.daemon")
_rare = RareLog(log)
# Each block is parsed on its own: 2.x lines (numeric phases) are told apart from older
# generations (letters) by bytes, so the C path takes them without a first Python pass.
_NUMERIC_PHASE = re.compile(rb'"ph":\d')


class Parsed(msgspec.Struct, frozen=True, kw_only=True):
    """What a group of messages from the PULL socket came to."""

    messages: int
    invalid_messages: int  # neither a scrtune batch nor trace lines
    batches: list[EventBatch]
    parse_s: float


def parse_messages(messages: list) -> Parsed:
    """Messages (bytes, or zmq Frames received without a copy) of DFTracer lines (gzip-
    compressed when the tracer compresses) or encoded scrtune batches. Buffers of lines are
    parsed in one pass, as one block, since a batch costs the same to aggregate whatever its
    size.
    Bad input is counted, not raised."""
    started = time.perf_counter()
    lines: list[memoryview] = []
    batches: list[EventBatch] = []
    invalid = 0
    for message in messages:
        data = memoryview(message)
        try:
            if data[:2] == GZIP_MAGIC:
                data = memoryview(_gunzip(data))
            head = bytes(data[:64]).lstrip()
            if not head and not bytes(data).strip():
                # nothing to read: DFTracer's writer sends an empty gzip member (20 bytes) when
                # a process's last flush has no lines (a forked child's), not a bad message
                continue
            if head[:1] in (b"{", b"["):
                lines.append(data)
            else:
                batches.append(decode_batch(bytes(data)))
        except (CodecError, igzip_lib.IsalError) as exc:
            invalid += 1
            log.debug("invalid event message: %s", exc)
        except Exception:  # whatever a hostile message does, it costs that message only
            invalid += 1
            log.debug("invalid event message", exc_info=True)
    if lines:
        try:
            batches.append(_parse_lines(lines))
        except Exception:  # a parser bug must not take the node's daemon down
            _rare.exception("could not parse %d messages of trace lines", len(lines))
            invalid += len(lines)
    return Parsed(messages=len(messages), invalid_messages=invalid, batches=batches,
                  parse_s=time.perf_counter() - started)


def _gunzip(data: memoryview) -> bytes:
    """The decompressed message, at most MAX_EVENT_MESSAGE_BYTES of it: a few MB of gzip can
    expand to gigabytes, and only the output's size matters to memory. It runs on the parse
    thread: IgzipDecompressor holds no GIL while it inflates, so the loop thread keeps
    aggregating (see events/reader.py). Every gzip member of the message is read, as a
    trace file's are; zeros after the last one are padding."""
    inflater = new_inflater()
    parts = [inflater.decompress(data, MAX_EVENT_MESSAGE_BYTES + 1)]
    size = len(parts[0])
    while inflater.eof and inflater.unused_data.strip(b"\0") and size <= MAX_EVENT_MESSAGE_BYTES:
        rest, inflater = inflater.unused_data, new_inflater()
        parts.append(inflater.decompress(rest, MAX_EVENT_MESSAGE_BYTES + 1 - size))
        size += len(parts[-1])
    if size > MAX_EVENT_MESSAGE_BYTES:  # it stopped at one byte more than allowed
        raise CodecError(f"gzip message expands beyond {MAX_EVENT_MESSAGE_BYTES} bytes")
    return parts[0] if len(parts) == 1 else b"".join(parts)


def _parse_lines(buffers: list[memoryview]) -> EventBatch:
    """DFTracer lines, of whichever generation the first of them shows. Each buffer loses its
    trailing newlines, and the parser reads them in turn as one block, without a copy."""
    trimmed = []
    for data in buffers:
        end = len(data)
        while end and data[end - 1] == 10:  # b"\n"
            end -= 1
        trimmed.append(data[:end])
    context = FileContext(Generation.DFTRACER_2) \
        if _NUMERIC_PHASE.search(_prefix(trimmed, 600)) else FileContext()
    return parse_buffers(trimmed, context)[0]


def _prefix(buffers: list[memoryview], size: int) -> bytes:
    """The first `size` bytes (or fewer) of the buffers joined by newlines."""
    taken, length = [], 0
    for data in buffers:
        if length >= size:
            break
        taken.append(data[:size - length])
        length += len(taken[-1]) + 1
    return b"\n".join(taken)[:size]
