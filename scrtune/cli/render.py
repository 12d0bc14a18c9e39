"""Readable tables for people; machines get `--format json`."""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable
from typing import TypeVar

from scrtune.engine.checkpoints import Checkpoint
from scrtune.engine.summary import Summary
from scrtune.units import human_bytes, human_rate, human_us, ranges, utc_time

T = TypeVar("T")
WIDTH = 100  # columns of every table for people
# the free-text column is never narrower than this, however wide the others (a study's
# configuration names of 74 characters left it 0 wide: a ValueError, issue 49)
MIN_TEXT = 12


def table(headers: list[str], rows: list[list[str]], width: int = WIDTH) -> str:
    """Columns padded; the last column (free text) wrapped onto more lines to fit `width`."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    room = width - sum(widths[:-1]) - 2 * (len(widths) - 1)
    # the free text wraps within what is left; only its header sets a floor, so that no row,
    # the header included, is wider than `width` (then fit() would break it)
    widths[-1] = min(widths[-1], max(room, len(headers[-1]), MIN_TEXT))

    def line(cells: list[str]) -> str:
        return "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()

    lines = [line(headers), "  ".join("-" * w for w in widths).rstrip()]
    for row in rows:
        # an empty free-text column is 0 wide, which textwrap refuses
        parts = [_unglued(p) for p in textwrap.wrap(_glued(str(row[-1])), max(widths[-1], 1))] \
            or [""]
        lines.append(line([*row[:-1], parts[0]]))
        lines += [line([""] * (len(row) - 1) + [part]) for part in parts[1:]]
    return "\n".join(lines) + "\n"


def fit(text: str, width: int = WIDTH) -> str:
    """Lines longer than `width` wrapped, continued under a hanging indent; a number is never
    parted from its unit ("2.0" at a line's end, "MiB" on the next: issue 49)."""
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip()))
        out.append(_unglued(textwrap.fill(_glued(line), width,
                                          subsequent_indent=indent + "    ",
                                          break_on_hyphens=False)))
    return "\n".join(out)


_UNIT = re.compile(r"(?<=\d) (?=(?:B|KiB|MiB|GiB|TiB|KB|MB|GB|TB|s|ms|us|ns|h|min|days?|"
                   r"nodes?|ranks?|cores?|files?|GiB/s|MiB/s|KiB/s|B/s)\b)")
_GLUE = "\x00"  # no whitespace to textwrap: the pair stays on one line


def _glued(text: str) -> str:
    return _UNIT.sub(_GLUE, text)


def _unglued(text: str) -> str:
    return text.replace(_GLUE, " ")


def elided(items: list[T], verbose: bool, row: Callable[[T], list[str]], head: int = 5,
           tail: int = 5) -> list[list[str]]:
    """Every item's row with -v; otherwise the first and last few, and a row saying how many
    more. Only the rows shown are made (a trace may hold thousands of checkpoints)."""
    if verbose or len(items) <= head + tail + 2:
        return [row(item) for item in items]
    first = [row(item) for item in items[:head]]
    hidden = len(items) - head - tail
    return [*first, ["...", f"{hidden:,} more (-v lists all)"] + [""] * (len(first[0]) - 2),
            *(row(item) for item in items[-tail:])]


CHECKPOINT_COLUMNS = ["#", "region", "found by", "step", "ranks", "bytes", "files", "duration",
                      "write sizes"]


def replay_table(summary: Summary, verbose: bool = False) -> str:
    out = _overview(summary)
    out += _checkpoints(summary, verbose)
    out += _details(summary)
    out += [f"cannot derive: {line}" for line in summary.missing_statistics]
    out += [f"warning: {warning}" for warning in summary.warnings]
    if verbose:
        out += _files(summary)
    return fit("\n".join(out).rstrip() + "\n")


def _overview(summary: Summary) -> list[str]:
    generations = sorted({g.generation for g in summary.generations})
    hosts = summary.hosts
    out = [f"files        {len(summary.generations)} ({', '.join(generations)})",
           f"records      {summary.records:,}   invalid lines {summary.invalid_lines:,}",
           f"ranks        {summary.ranks}   processes {summary.processes}   threads "
           f"{summary.threads}   hosts "
           + (", ".join(hosts[:4]) + (f" and {len(hosts) - 4} more" if len(hosts) > 4 else "")
              or "-"),
           f"time span    {human_us(summary.span_us)}"
           + (f" from {utc_time(summary.start_us / 1e6)}" if summary.start_us else "")]
    if summary.cores:
        out.append(f"cores seen   {len(summary.cores)}: {ranges(summary.cores)}")
    return out + [""]


def _checkpoints(summary: Summary, verbose: bool) -> list[str]:
    out = []
    for title, items in (("checkpoints (saves)", summary.checkpoints),
                         ("restores", summary.restores)):
        if not items:
            out.append(f"{title}: none found")
            continue
        latest = " (the latest: earlier ones are not listed)" if summary.unlisted_windows else ""
        out += [f"{title}: {len(items):,}{latest}",
                table(CHECKPOINT_COLUMNS, elided(items, verbose, _checkpoint_row))]
    return out


def _checkpoint_row(c: Checkpoint) -> list[str]:
    return [str(c.index), _short(c.name, 30), c.found_by, "-" if c.step is None else str(c.step),
            str(c.ranks),
            human_bytes(c.bytes_written if c.kind == "save" else c.bytes_read) if c.files else "-",
            str(c.files) if c.files else "-", human_us(c.dur_us),
            ", ".join(human_bytes(m.size_bytes) for m in c.write_sizes[:2]) or "-"]


def _short(text: str, width: int) -> str:
    """The end of a long name is the part that tells: whole dotted parts from the right
    (`...save_checkpoint`, not `...eckpointing.save_checkpoint`: issue 49), cut within a part
    only when the last one alone is too long."""
    if len(text) <= width:
        return text
    parts, kept = text.split("."), ""
    for part in reversed(parts):
        candidate = f"{part}.{kept}" if kept else part
        if len(candidate) + 3 > width:
            break
        kept = candidate
    return "..." + (kept or text[-(width - 3):])


def _details(summary: Summary) -> list[str]:
    out = []
    if summary.intervals:
        mean = sum(i.interval_us for i in summary.intervals) / len(summary.intervals)
        compute = sum(i.compute_us for i in summary.intervals) / len(summary.intervals)
        out.append(f"between checkpoints: mean {human_us(mean)}, of which outside checkpoints "
                   f"{human_us(compute)}\n")
    if summary.write_sizes:
        out.append(f"dominant write sizes ({summary.write_sizes_scope} writes, by bytes):")
        out.append(table(["size", "calls", "bytes", "share"],
                         [[human_bytes(m.size_bytes), f"{m.calls:,}", human_bytes(m.bytes),
                           f"{100 * m.bytes_share:.1f}%"] for m in summary.write_sizes]))
    if summary.bandwidth:
        out.append("observed bandwidth per storage path (bytes / time inside calls):")
        out.append(table(["prefix", "direction", "bytes", "files", "bandwidth"],
                         [[b.prefix, b.direction, human_bytes(b.bytes), str(b.files),
                           human_rate(b.bytes_per_s)] for b in summary.bandwidth]))
    return out


def _files(summary: Summary) -> list[str]:
    out = ["", table(["file", "generation", "records", "invalid", "truncated"],
                     [[g.path, g.generation, f"{g.records:,}", str(g.invalid_lines),
                       "yes" if g.truncated else "no"] for g in summary.generations])]
    out += [f"invalid: {g.path}:{sample['line']}: {sample['reason']}"
            for g in summary.generations for sample in g.invalid_samples]
    return out
