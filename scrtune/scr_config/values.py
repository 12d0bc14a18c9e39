"""Does SCR read this value as written? One check per parse type, shared by lint and renderers."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from scrtune.scr_config.catalogue import Kind

_INT = re.compile(r"-?\d+")
# scr_abtoull (src/scr_util.c): strtod (leading blanks, a sign, decimals, an exponent), then
# at most one unit letter, a B only after it, and nothing else: `64 MB`, `10B` and `64MB `
# are errors (SCR keeps the default); `6.4e7` and `.5GB` are read exactly
_BYTES = re.compile(r"\s*\+?((?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)(?:([KMGTPE])B?)?",
                    re.IGNORECASE)
_FLOAT = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50,
          "E": 1 << 60}
_BOOL_WORDS = {"true", "false", "yes", "no", "on", "off", "enabled", "disabled"}
INT_MAX = (1 << 31) - 1


@dataclass(frozen=True)
class Problem:
    """How SCR would misread a value: `code` names the pitfall, `message` says what happens."""

    severity: str  # "error": misread, aborts or crashes; "warning": works, but not as it reads
    code: str
    message: str


def check_value(kind: Kind, value: str, values: tuple[str, ...] = ()) -> Problem | None:
    if value[:1] in "\"'" and value[:1] and value.endswith(value[0]) and len(value) > 1:
        return Problem("error", "quoted", f"quotes are kept by SCR: {value} is read with the "
                       "quote characters (numbers become 0)")
    if kind is Kind.FLAG:
        return _flag(value)
    if kind is Kind.INT:
        return _int(value)
    if kind is Kind.BYTES:
        if not _BYTES.fullmatch(value):
            return Problem("error", "not-a-byte-count", f"{_shown(value)} is not a byte count: SCR "
                           "reports an error and keeps the default")
        return None
    if kind is Kind.FLOAT and not _FLOAT.fullmatch(value.strip()):
        return Problem("error", "non-numeric", f"{_shown(value)} is read by strtod as "
                       f"{_strtod_prefix(value)}")
    if kind is Kind.ENUM_CI and value.upper() not in values:
        return Problem("error", "unknown-value",
                       f"{_shown(value)} is not one of {', '.join(values)}")
    if kind is Kind.ENUM_CS and value not in values:
        if value.upper() in values:
            return Problem("error", "wrong-case", f"{_shown(value)} must be written "
                           f"{value.upper()} (case-sensitive; this aborts the job at the first "
                           "flush)")
        return Problem("error", "unknown-value", f"{_shown(value)} is not one of "
                       f"{', '.join(values)} (this aborts the job at the first flush)")
    return None


def _flag(value: str) -> Problem | None:
    if value in ("0", "1"):
        return None
    if value.lower() in _BOOL_WORDS:
        return Problem("error", "word-boolean", f"{_shown(value)} is read by atoi as 0 (off): "
                       "write 1 or 0")
    if _INT.fullmatch(value):
        if _atoi(value) != _strtol(value):
            return _beyond_int(value)
        return Problem("warning", "flag-not-0-1", f"{_shown(value)} counts as {_atoi(value) != 0}: "
                       "write 1 or 0")
    return Problem("error", "non-numeric", f"{_shown(value)} is read by atoi as {_atoi(value)}")


def _int(value: str) -> Problem | None:
    if _INT.fullmatch(value):
        return _beyond_int(value) if _atoi(value) != _strtol(value) else None
    read = _atoi(value)
    if read:
        return Problem("error", "truncated-number", f"{_shown(value)} is read by atoi as {read} "
                       "(units and decimals are not understood)")
    return Problem("error", "non-numeric", f"{_shown(value)} is read by atoi as 0")


def _shown(value: str) -> str:
    """The value as messages quote it: a long one cut, so that a finding stays one line."""
    return repr(value if len(value) <= 48 else value[:45] + "...")


def _beyond_int(value: str) -> Problem:
    return Problem("error", "out-of-range", f"{_shown(value)} is beyond a C int: atoi reads it as "
                   f"{_atoi(value)}")


def _atoi(value: str) -> int:
    """What glibc's atoi returns: (int) strtol(value), which keeps the low 32 bits."""
    return (_strtol(value) + (1 << 31)) % (1 << 32) - (1 << 31)


def _strtol(value: str) -> int:
    """What strtol returns for the digits `value` starts with: saturated at the limits of a
    64-bit long (counted by digits first: Python refuses int() of very long strings)."""
    match = re.match(r"\s*([-+]?)0*(\d*)", value)
    if not match or not match.group(2):
        return 0
    sign, digits = match.groups()
    limit = (1 << 63) if sign == "-" else (1 << 63) - 1
    read = limit if len(digits) > 19 else min(int(digits), limit)
    return -read if sign == "-" else read


def _strtod_prefix(value: str) -> float:
    match = re.match(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)", value)
    return float(match.group()) if match else 0.0


def byte_count(value: str) -> int:
    """The number of bytes SCR reads from a valid byte-count value."""
    match = _BYTES.fullmatch(value)
    count = float(match.group(1)) * _UNITS[(match.group(2) or "").upper()] if match else 0.0
    if not match or not math.isfinite(count):  # 1e400 would be an OverflowError for int()
        raise ValueError(f"not a byte count: {_shown(value)}")
    return int(count)


def format_bytes(count: int) -> str:
    """Bytes as SCR reads them, with the largest exact unit (32MB, 1792MB, 4096)."""
    for unit in ("E", "P", "T", "G", "M", "K"):
        size = _UNITS[unit]
        if count >= size and count % size == 0:
            return f"{count // size}{unit}B"
    return str(count)


def as_read(kind: Kind, value: str | None, default: str = "") -> str:
    """The value as SCR uses it, in one canonical spelling, so that what was asked for and what
    SCR resolved compare equal when SCR reads them alike (`64MB` and `67108864`, `sync` and
    `SYNC`, `2.5` and `2` for an integer). An unset value is the compiled default."""
    text = default if value is None or value == "" else str(value)
    if kind in (Kind.FLAG, Kind.INT):
        return str(_atoi(text))
    if kind is Kind.BYTES:
        try:
            return str(byte_count(text))
        except ValueError:
            return text
    if kind is Kind.FLOAT:
        return repr(_strtod_prefix(text))
    if kind is Kind.ENUM_CI:
        return text.upper()
    return text
