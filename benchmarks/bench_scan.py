"""The C scan alone: µs per line of a trace, without inflating, aggregating or start-up.

    python benchmarks/bench_scan.py TRACE [--previous /tmp/previous] [--rounds 15]

Reads up to 200 MB of the trace's lines, cut at newlines into blocks of 4 MiB (as replay cuts
them), and times `_fastparse.parse` over all blocks: the best of --rounds, alternating with a
previous checkout's built module when --previous is given (build it with
`python setup.py build_ext --inplace` there). Both must return the same result on every block.
"""

from __future__ import annotations

import argparse
import glob
import gzip
import importlib.util
import os
import platform
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from scrtune.events import parse  # noqa: E402

BLOCK_BYTES = 4 << 20


def load(tree: str):
    """The `_fastparse` module built in `tree`, set up as the parser sets up its own."""
    (path,) = glob.glob(os.path.join(tree, "scrtune", "events", "_fastparse*.so"))
    spec = importlib.util.spec_from_file_location("_fastparse", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.set_data_calls(sorted(parse.DATA_WRITE_CALLS | parse.DATA_READ_CALLS))
    return module


def blocks(trace: str, limit_bytes: int = 200 << 20) -> list[bytes]:
    with gzip.open(trace) if trace.endswith(".gz") else open(trace, "rb") as handle:
        data = handle.read(limit_bytes)
    data = data[:data.rindex(b"\n")]
    out, start = [], 0
    while start < len(data):
        stop = data.rfind(b"\n", start, start + BLOCK_BYTES)
        stop = len(data) if start + BLOCK_BYTES >= len(data) or stop <= start else stop
        out.append(data[start:stop])
        start = stop + 1
    return out


def comparable(result: tuple) -> tuple:
    """A parse result with its columns as bytes (a column is a buffer: bytearray, or the
    scan's own Column type, which compares by identity)."""
    rows, lines, columns, *rest = result
    return (rows, lines, {name: bytes(column) for name, column in columns.items()}, *rest)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("trace")
    parser.add_argument("--previous", help="a checkout whose built C scan to compare with")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    modules = {"this": load(os.path.dirname(HERE))}
    if args.previous:
        modules["previous"] = load(args.previous)
    data = blocks(args.trace)
    lines, size = sum(b.count(b"\n") + 1 for b in data), sum(map(len, data))
    if args.previous and any(comparable(modules["this"].parse(b)) !=
                             comparable(modules["previous"].parse(b)) for b in data):
        sys.exit("the two scans disagree on this trace")
    best = dict.fromkeys(modules, float("inf"))
    for _ in range(args.rounds):
        for name, module in modules.items():
            started = time.perf_counter()
            for block in data:
                module.parse(block)
            best[name] = min(best[name], time.perf_counter() - started)
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, Python "
          f"{platform.python_version()}; {lines:,} lines, {size / lines:.0f} bytes each; best of "
          f"{args.rounds}\n\n| scan | µs per line | MB/s |\n|---|---:|---:|")
    for name, seconds in best.items():
        print(f"| {name} | {seconds / lines * 1e6:.3f} | {size / seconds / 1e6:,.0f} |")


if __name__ == "__main__":
    main()
