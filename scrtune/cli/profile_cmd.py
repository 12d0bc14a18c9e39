"""`scrtune profile`: measure this node's storage and write the system profile."""

from __future__ import annotations

import argparse
import os
import sys

import msgspec

from scrtune.cli.argtypes import check_out, format_option, positive_int, seconds
from scrtune.cli.render import fit, table
from scrtune.errors import UsageError
from scrtune.units import human_bytes, human_rate, human_seconds, human_us, plural

MIN_BUDGET_S = 2.0


def _sizes(text: str) -> tuple[int, ...]:
    from scrtune.scr_config.values import byte_count

    try:
        sizes = tuple(sorted({byte_count(part) for part in text.split(",") if part.strip()}))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not sizes or sizes[0] < 1 or sizes[-1] > 1 << 30:
        raise argparse.ArgumentTypeError(f"call sizes from 1 byte to 1 GiB, e.g. 4KB,1MB: "
                                         f"{text!r}")
    return sizes


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--local", default=os.environ.get("SCR_CACHE_BASE", "/dev/shm"),
                        help="the node-local store SCR caches in (default: $SCR_CACHE_BASE, "
                        "else /dev/shm, SCR's default)")
    parser.add_argument("--parallel", default=os.environ.get("SCR_PREFIX", os.getcwd()),
                        help="a directory on the parallel file system, where checkpoints are "
                        "flushed (default: $SCR_PREFIX, else the current directory, as SCR)")
    parser.add_argument("-o", "--out", default="scrtune-system.toml",
                        help="the profile to write; `-` for stdout (default: "
                        "scrtune-system.toml)")
    parser.add_argument("--force", action="store_true", help="replace an existing --out file")
    parser.add_argument("--time-s", type=seconds, default=50.0,
                        help="time budget for all measurements (default 50)")
    parser.add_argument("--sizes", type=_sizes, default=None, metavar="SIZE,...",
                        help="write/read call sizes (default 4KB,64KB,1MB,16MB: metadata to "
                        "tensor writes)")
    parser.add_argument("--streams", type=positive_int, default=0,
                        help="files written at once for the node's bandwidth (default: "
                        "min(cores, 4))")
    parser.add_argument("--max-file-bytes", type=_sizes, default=None, metavar="SIZE",
                        help="largest file one stream writes (default 512MB; less when the "
                        "store has little free space)")
    format_option(parser)


def run(args: argparse.Namespace) -> int:
    from scrtune.probe.storage import ProbeError
    from scrtune.probe.system import DEFAULT_SIZES, ProbeSettings, measure_node, render_toml

    if args.time_s < MIN_BUDGET_S:
        raise UsageError(f"--time-s: at least {MIN_BUDGET_S:g} s")
    check_out(args.out, args.force)
    settings = ProbeSettings(local_path=args.local, parallel_path=args.parallel,
                             budget_s=args.time_s, sizes=args.sizes or DEFAULT_SIZES,
                             streams=args.streams,
                             **({"cap_bytes": args.max_file_bytes[-1]}
                                if args.max_file_bytes else {}))
    try:
        node = measure_node(settings)
    except ProbeError as exc:
        raise UsageError(str(exc)) from None
    text = render_toml(node)
    # with `-o -` the profile is standard output, and the report goes to standard error
    report = sys.stderr if args.out == "-" else sys.stdout
    if args.out == "-":
        sys.stdout.write(text)
    else:
        try:
            with open(args.out, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:  # it could be written a moment ago: say so, and keep the text
            sys.stdout.write(text)
            raise UsageError(f"-o {args.out}: {exc.strerror}; the profile was printed "
                             "instead") from None
    if args.format == "json":
        report.write(msgspec.json.encode({"profile": args.out, **_as_json(node)}).decode()
                     + "\n")
    else:
        report.write(fit(_readable(node, args.out)))
    return 0


def _as_json(node) -> dict[str, object]:
    import dataclasses

    return {"cores": node.cores, "memory_bytes": node.memory_bytes,
            "busy_core_slowdown": node.busy_core_slowdown,
            "fresh_memory_bytes_per_s": node.fresh_memory_bytes_per_s,
            "dirty_allowance_bytes": node.dirty_allowance_bytes,
            "rs_arithmetic_bytes_per_s": node.rs_arithmetic_bytes_per_s,
            "transfer_thread_shares": [msgspec.structs.asdict(share)
                                       for share in node.thread_shares],
            "local": dataclasses.asdict(node.local), "parallel": dataclasses.asdict(node.parallel)}


def _readable(node, out: str) -> str:
    sizes = sorted({t.size_bytes for t in node.local.timings})
    rows = []
    for name, tier in (("node-local", node.local), ("parallel", node.parallel)):
        for direction, line, rate in (("write", tier.write, tier.write_bytes_per_s),
                                      ("read", tier.read, tier.read_bytes_per_s)):
            per_size = {t.size_bytes: human_us(t.per_call_s * 1e6) for t in tier.timings
                        if t.direction == direction}
            rows.append([name if direction == "write" else "", direction, human_rate(rate),
                         human_us(line.latency_s * 1e6), *(per_size[s] for s in sizes)])
    lines = [f"{plural(node.cores, 'core')}, {human_bytes(node.memory_bytes)} memory; measured "
             f"in at most {human_seconds(node.budget_s)}",
             f"node-local: {node.local.path} ({node.local.fs_type}); parallel: "
             f"{node.parallel.path} ({node.parallel.fs_type})",
             f"a flush copy on a core a rank keeps busy takes x{node.busy_core_slowdown:.2f} "
             "as long as alone; fresh memory (beyond written kept pages) "
             f"{human_rate(node.fresh_memory_bytes_per_s)}; unsynced writes the kernel lets "
             f"wait before writing back {human_bytes(node.dirty_allowance_bytes)}; RS parity "
             f"arithmetic {human_rate(node.rs_arithmetic_bytes_per_s)} a core; a transfer "
             "thread's busy share of a core with buffers of " + ", ".join(
                 f"{human_bytes(share.buffer_bytes)} {share.busy_share:.2f}"
                 for share in node.thread_shares), "",
             "one call, by size: writes include their fsync, reads are cold", ""]
    lines.append(table(["tier", "calls", f"{node.local.streams} streams", "latency",
                        *(human_bytes(s) for s in sizes)], rows))
    lines += ["", f"wrote {out}: use it with --system (recommend, study, daemon). Failure rates, "
              "scaling with nodes, network, OSTs and flush types are defaults there: edit them."]
    return "\n".join(lines) + "\n"
