"""Readable tables for people; machines get `--format json`."""

from __future__ import annotations

import datetime as dt

from scrtune.engine.summary import Summary


def human_bytes(count: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024
    return f"{count:.1f} TiB"


def human_us(micros: float) -> str:
    if micros < 1_000:
        return f"{micros:.0f} us"
    if micros < 1_000_000:
        return f"{micros / 1e3:.1f} ms"
    return f"{micros / 1e6:.2f} s"


def table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(headers, widths)).rstrip()]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip() for row in rows]
    return "\n".join(lines) + "\n"


CHECKPOINT_COLUMNS = ["#", "region", "found by", "step", "ranks", "bytes", "files", "duration",
                      "main write sizes"]


def replay_table(summary: Summary, verbose: bool = False) -> str:
    out = _overview(summary)
    out += _checkpoints(summary)
    out += _details(summary)
    out += [f"cannot derive: {line}" for line in summary.missing_statistics]
    out += [f"warning: {warning}" for warning in summary.warnings]
    if verbose:
        out += _files(summary)
    return "\n".join(out).rstrip() + "\n"


def _overview(summary: Summary) -> list[str]:
    generations = sorted({g.generation for g in summary.generations})
    start = dt.datetime.fromtimestamp(summary.start_us / 1e6, dt.timezone.utc) \
        if summary.start_us else None
    out = [f"files        {len(summary.generations)} ({', '.join(generations)})",
           f"records      {summary.records:,}   invalid lines {summary.invalid_lines:,}",
           f"ranks        {summary.ranks}   processes {summary.processes}   threads "
           f"{summary.threads}   hosts {', '.join(summary.hosts) or '-'}",
           f"time span    {human_us(summary.span_us)}"
           + (f" from {start:%Y-%m-%d %H:%M:%S} UTC" if start else "")]
    if summary.cores:
        out.append(f"cores seen   {len(summary.cores)}: {summary.cores}")
    return out + [""]


def _checkpoints(summary: Summary) -> list[str]:
    out = []
    for title, items in (("checkpoints (saves)", summary.checkpoints),
                         ("restores", summary.restores)):
        if not items:
            out.append(f"{title}: none found")
            continue
        rows = [[str(c.index), c.name[:34], c.found_by, "-" if c.step is None else str(c.step),
                 str(c.ranks), human_bytes(c.bytes_written if c.kind == "save" else c.bytes_read),
                 str(c.files), human_us(c.dur_us),
                 ", ".join(human_bytes(m.size_bytes) for m in c.write_sizes[:3]) or "-"]
                for c in items]
        out += [f"{title}: {len(items)}", table(CHECKPOINT_COLUMNS, rows)]
    return out


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
                           f"{human_bytes(b.bytes_per_s)}/s"] for b in summary.bandwidth]))
    return out


def _files(summary: Summary) -> list[str]:
    out = ["", table(["file", "generation", "records", "invalid", "truncated"],
                     [[g.path, g.generation, f"{g.records:,}", str(g.invalid_lines),
                       "yes" if g.truncated else "no"] for g in summary.generations])]
    out += [f"invalid: {g.path}:{sample['line']}: {sample['reason']}"
            for g in summary.generations for sample in g.invalid_samples]
    return out
