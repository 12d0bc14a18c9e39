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


def replay_table(summary: Summary, verbose: bool = False) -> str:
    out: list[str] = []
    generations = sorted({g.generation for g in summary.generations})
    start = (
        dt.datetime.fromtimestamp(summary.start_us / 1e6, dt.timezone.utc)
        if summary.start_us
        else None
    )
    out.append(f"files        {len(summary.generations)} ({', '.join(generations)})")
    out.append(f"records      {summary.records:,}   invalid lines {summary.invalid_lines:,}")
    out.append(
        f"ranks        {summary.ranks}   processes {summary.processes}   threads "
        f"{summary.threads}   hosts {', '.join(summary.hosts) or '-'}"
    )
    out.append(
        f"time span    {human_us(summary.span_us)}"
        + (f" from {start:%Y-%m-%d %H:%M:%S} UTC" if start else "")
    )
    if summary.cores:
        out.append(f"cores seen   {len(summary.cores)}: {summary.cores}")
    out.append("")
    for title, items in (
        ("checkpoints (saves)", summary.checkpoints),
        ("restores", summary.restores),
    ):
        if not items:
            out.append(f"{title}: none found")
            continue
        out.append(f"{title}: {len(items)}")
        rows = [
            [
                str(c.index),
                c.name[:34],
                c.found_by,
                "-" if c.step is None else str(c.step),
                str(c.ranks),
                human_bytes(c.bytes_written if c.kind == "save" else c.bytes_read),
                str(c.files),
                human_us(c.dur_us),
                ", ".join(human_bytes(m.size_bytes) for m in c.write_sizes[:3]) or "-",
            ]
            for c in items
        ]
        out.append(
            table(
                [
                    "#",
                    "region",
                    "found by",
                    "step",
                    "ranks",
                    "bytes",
                    "files",
                    "duration",
                    "main write sizes",
                ],
                rows,
            )
        )
    if summary.intervals:
        mean = sum(i.interval_us for i in summary.intervals) / len(summary.intervals)
        compute = sum(i.compute_us for i in summary.intervals) / len(summary.intervals)
        out.append(
            f"between checkpoints: mean {human_us(mean)}, of which outside checkpoints "
            f"{human_us(compute)}\n"
        )
    if summary.write_sizes:
        out.append(f"dominant write sizes ({summary.write_sizes_scope} writes, by bytes):")
        out.append(
            table(
                ["size", "calls", "bytes", "share"],
                [
                    [
                        human_bytes(m.size_bytes),
                        f"{m.calls:,}",
                        human_bytes(m.bytes),
                        f"{100 * m.bytes_share:.1f}%",
                    ]
                    for m in summary.write_sizes
                ],
            )
        )
    if summary.bandwidth:
        out.append("observed bandwidth per storage path (bytes / time inside calls):")
        out.append(
            table(
                ["prefix", "direction", "bytes", "files", "bandwidth"],
                [
                    [
                        b.prefix,
                        b.direction,
                        human_bytes(b.bytes),
                        str(b.files),
                        f"{human_bytes(b.bytes_per_s)}/s",
                    ]
                    for b in summary.bandwidth
                ],
            )
        )
    for line in summary.missing_statistics:
        out.append(f"cannot derive: {line}")
    for warning in summary.warnings:
        out.append(f"warning: {warning}")
    if verbose:
        out.append("")
        out.append(
            table(
                ["file", "generation", "records", "invalid", "truncated"],
                [
                    [
                        g.path,
                        g.generation,
                        f"{g.records:,}",
                        str(g.invalid_lines),
                        "yes" if g.truncated else "no",
                    ]
                    for g in summary.generations
                ],
            )
        )
        for g in summary.generations:
            for sample in g.invalid_samples:
                out.append(f"invalid: {g.path}:{sample['line']}: {sample['reason']}")
    return "\n".join(out).rstrip() + "\n"
