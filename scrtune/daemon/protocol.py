"""The daemon's request/reply protocol: typed msgpack messages, no transport in sight.

Every request carries the protocol version and a request id chosen by the client; every reply
echoes the id inside an ok/error envelope with a machine-readable code. This module never
imports zmq: the loop moves bytes, this module gives them meaning.
"""

from __future__ import annotations

import enum
from typing import Annotated

import msgspec

PROTOCOL_VERSION = 1
MAX_REQUEST_BYTES = 1 << 20  # requests are small; a bigger one is refused, never decoded
MAX_EVENT_MESSAGE_BYTES = 64 << 20  # one buffer of trace lines or one event batch
# what SQLite stores as INTEGER; NaN fails every bound, so a time must be a real one
_Int64 = Annotated[int, msgspec.Meta(le=(1 << 63) - 1)]
_EpochSeconds = Annotated[float, msgspec.Meta(ge=0, le=1e11)]
RequestId = Annotated[int, msgspec.Meta(ge=0, le=(1 << 63) - 1)]  # chosen by the client
# every string a client sends is kept or echoed: each has a bound
_Name = Annotated[str, msgspec.Meta(max_length=256)]
_Detail = Annotated[str, msgspec.Meta(max_length=4096)]
# the client's own id of a record: stored once however often it is sent
RecordId = Annotated[str, msgspec.Meta(max_length=64, pattern=r"^[0-9A-Za-z_.:-]*$")]


class ErrorCode(str, enum.Enum):
    BAD_MESSAGE = "bad_message"  # not a request at all
    BAD_VERSION = "bad_version"
    TOO_LARGE = "too_large"
    UNKNOWN_COMMAND = "unknown_command"
    BAD_ARGUMENT = "bad_argument"
    STORE_UNAVAILABLE = "store_unavailable"  # the record was not kept: send it again later
    INTERNAL = "internal"


class Hello(msgspec.Struct, frozen=True, tag="hello", kw_only=True):
    version: int = PROTOCOL_VERSION
    request_id: RequestId = 0
    client: _Name = ""  # e.g. "rank 0 on node12, pid 4242"


class Status(msgspec.Struct, frozen=True, tag="status", kw_only=True):
    version: int = PROTOCOL_VERSION
    request_id: RequestId = 0


class Recommend(msgspec.Struct, frozen=True, tag="recommend", kw_only=True):
    """The init-time configuration and the runtime actions for the next output. `starting`:
    asked by a run about to call SCR_Init, so a run before it that started and never ended
    crashed (counted in the failure rate the answer plans with, not one launch late)."""

    version: int = PROTOCOL_VERSION
    request_id: RequestId = 0
    starting: bool = False


class Relaunch(msgspec.Struct, frozen=True, tag="relaunch", kw_only=True):
    """From the job script after a run ended: if the daemon halted it to relaunch with new
    settings, clear that halt (scr_run stops on any halt condition) and say so."""

    version: int = PROTOCOL_VERSION
    request_id: RequestId = 0


class Record(msgspec.Struct, frozen=True, tag="record", kw_only=True):
    """A goodput or output event from the client (kept durably before the reply)."""

    version: int = PROTOCOL_VERSION
    request_id: RequestId = 0
    job: _Name
    run: Annotated[_Int64, msgspec.Meta(ge=0)] = 0
    kind: _Name  # job_started, checkpoint_save_finished, ... (see goodput events)
    wall_s: _EpochSeconds
    step: Annotated[_Int64, msgspec.Meta(ge=-1)] = -1
    detail: _Detail = ""
    record_id: RecordId = ""  # "": not deduplicated (a retry may store it twice)


_Source = Annotated[str, msgspec.Meta(min_length=1, max_length=1024)]
_Offset = Annotated[int, msgspec.Meta(ge=0, le=1 << 62)]
MAX_SOURCES_PER_REQUEST = 4096


class Offsets(msgspec.Struct, frozen=True, tag="offsets", kw_only=True):
    """From `scrtune forward`: how far into each of its files the daemon has taken lines
    (see Lines). After a restart that is what the daemon had saved: the forwarder resends
    from there."""

    version: int = PROTOCOL_VERSION
    request_id: RequestId = 0
    sources: Annotated[list[_Source], msgspec.Meta(max_length=MAX_SOURCES_PER_REQUEST)]


Request = Hello | Status | Recommend | Record | Relaunch | Offsets
COMMANDS: tuple[str, ...] = ("hello", "status", "recommend", "record", "relaunch", "offsets")


class Lines(msgspec.Struct, frozen=True, array_like=True, tag="lines"):
    """On the events socket: bytes [start, end) of one trace file (`source`), whole lines.
    The daemon takes a source's lines only in order (start = where it stands), so a resend
    after a restart or a drop never counts twice."""

    source: _Source
    start: _Offset
    end: _Offset
    data: bytes


class LinesView(msgspec.Struct, frozen=True, array_like=True, tag="lines"):
    """A Lines message as the daemon decodes it: `data` a view into the message received,
    not a copy (the forwarder sends up to 4 MiB a message; the loop thread copied each
    twice)."""

    source: _Source
    start: _Offset
    end: _Offset
    data: memoryview


LINES_HEADER = b"\x95\xa5lines"  # how an encoded Lines begins: [\"lines\", 4 fields]
_lines_decoder = msgspec.msgpack.Decoder(LinesView)


def decode_lines(data: bytes | memoryview) -> LinesView | None:
    """A Lines message whose offsets match its data, or one without data that passes over
    a line the forwarder skipped (longer than a message); else None. From a memoryview,
    `data` is a view into it."""
    try:
        lines = _lines_decoder.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeDecodeError):
        return None
    matches = lines.end == lines.start + len(lines.data)
    return lines if matches or (not lines.data and lines.end > lines.start) else None


class Error(msgspec.Struct, frozen=True):
    code: ErrorCode
    message: str


class Reply(msgspec.Struct, frozen=True, kw_only=True):
    """`ok` with `result`, or not ok with `error`; `request_id` echoes the request's."""

    version: int = PROTOCOL_VERSION
    request_id: int
    ok: bool
    result: object = None
    error: Error | None = None


# the request may succeed when sent again later; the others never will
RETRYABLE = frozenset({ErrorCode.STORE_UNAVAILABLE, ErrorCode.INTERNAL})


class ProtocolError(Exception):
    def __init__(self, code: ErrorCode, message: str, request_id: int = 0) -> None:
        super().__init__(message)
        self.code = code
        self.request_id = request_id


_request_decoder = msgspec.msgpack.Decoder(Request)
_reply_decoder = msgspec.msgpack.Decoder(Reply)
_encoder = msgspec.msgpack.Encoder()


def encode(message: msgspec.Struct) -> bytes:
    return _encoder.encode(message)


def decode_request(data: bytes) -> Request:
    """A request, or ProtocolError with the code to answer with."""
    if len(data) > MAX_REQUEST_BYTES:
        raise ProtocolError(ErrorCode.TOO_LARGE, f"request of {len(data)} bytes: the limit is "
                            f"{MAX_REQUEST_BYTES}")
    try:
        request = _request_decoder.decode(data)
    except msgspec.ValidationError as exc:
        code = ErrorCode.UNKNOWN_COMMAND if "`$.type`" in str(exc) else ErrorCode.BAD_ARGUMENT
        raise ProtocolError(code, f"invalid request: {exc}", _peek_id(data)) from None
    except (msgspec.DecodeError, UnicodeDecodeError) as exc:  # strings must be UTF-8
        raise ProtocolError(ErrorCode.BAD_MESSAGE, f"not a msgpack request: {exc}") from None
    if not _names_version(data):  # the field has a default for our own constructors only
        raise ProtocolError(ErrorCode.BAD_VERSION, "the request names no protocol version",
                            request.request_id)
    if request.version != PROTOCOL_VERSION:
        raise ProtocolError(ErrorCode.BAD_VERSION, f"protocol version {request.version}; this "
                            f"daemon speaks {PROTOCOL_VERSION}", request.request_id)
    return request


def _names_version(data: bytes) -> bool:
    try:
        value = msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return False
    return isinstance(value, dict) and "version" in value


def _peek_id(data: bytes) -> int:
    try:
        value = msgspec.msgpack.decode(data)
    except (msgspec.DecodeError, UnicodeDecodeError):
        return 0
    request_id = value.get("request_id", 0) if isinstance(value, dict) else 0
    # echoed in the error reply: only an id a client can have sent (not a bool, in range)
    valid = isinstance(request_id, int) and not isinstance(request_id, bool) and \
        0 <= request_id < 1 << 63
    return request_id if valid else 0


def decode_reply(data: bytes) -> Reply:
    return _reply_decoder.decode(data)


def ok(request_id: int, result: object) -> bytes:
    return encode(Reply(request_id=request_id, ok=True, result=result))


def error(request_id: int, code: ErrorCode, message: str) -> bytes:
    return encode(Reply(request_id=request_id, ok=False, error=Error(code, message)))
