"""Numbers for people: one unit family (KiB, MiB, GiB: powers of 1024), durations in the unit
that reads best, counts with their noun in the right number, core lists as ranges."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 line`, `2 lines`, `1,024 processes` (nouns given where `s` is wrong)."""
    word = noun if count == 1 else (nouns or f"{noun}s")
    return f"{count:,} {word}"


def ordinal(count: int) -> str:
    """`2nd`, `3rd`, `11th`, `22nd`."""
    suffix = "th" if 10 <= count % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(count % 10, "th")
    return f"{count}{suffix}"


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} PiB"


def human_rate(bytes_per_s: float) -> str:
    return f"{human_bytes(bytes_per_s)}/s"


def human_us(micros: float) -> str:
    if micros < 1_000:
        return f"{micros:.0f} us"
    if micros < 1_000_000:
        return f"{micros / 1e3:.1f} ms"
    return human_seconds(micros / 1e6)


def human_seconds(seconds: float) -> str:
    """`2.50 s`, `12.0 min`, `3.5 h`, `2.1 days`."""
    if seconds < 60:
        return f"{seconds:.2f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    if seconds < 86400 * 2:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.1f} days"


def utc_time(epoch_s: float) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def ranges(numbers: Iterable[int]) -> str:
    """`0-3, 8, 10-47`: sorted, runs joined."""
    values = sorted(set(numbers))
    parts: list[str] = []
    start = prev = None
    for value in values:
        if prev is not None and value == prev + 1:
            prev = value
            continue
        if start is not None:
            parts.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = value
    if start is not None:
        parts.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(parts)


def time_unit(span_s: float) -> tuple[str, float]:
    """The unit to draw a span of `span_s` seconds in: (name, seconds per unit)."""
    if span_s < 120:
        return "s", 1.0
    if span_s < 2 * 3600:
        return "min", 60.0
    if span_s < 2 * 86400:
        return "h", 3600.0
    return "days", 86400.0
