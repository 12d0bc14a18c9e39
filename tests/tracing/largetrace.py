"""Build a large trace from a real one: its records repeated with shifted timestamps.

Metadata records are kept once (the tracer writes each name once per process); every repeat
shifts `ts` by `shift_s` seconds (more than the source spans), renumbers `id` and moves
`step` on by 1000, so the result reads like one long run of the same workload. `pid_offset`
moves every `pid` on, so several built files read as several ranks of one run. Used by tests
and by benchmarks/.
"""

from __future__ import annotations

import argparse
import gzip
import re

_TS = re.compile(rb'"ts":(\d+)')
_ID = re.compile(rb'^\{"id":(\d+)')
_STEP = re.compile(rb'"step":(\d+)')
_PID = re.compile(rb'"pid":(\d+)')


def source_lines(path: str) -> list[bytes]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as handle:
        return [
            line for line in handle.read().split(b"\n") if line.strip() not in (b"", b"[", b"]")
        ]


def _shifted(line: bytes, shift_us: int, id_base: int, step_base: int) -> bytes:
    line = _TS.sub(lambda m: b'"ts":%d' % (int(m.group(1)) + shift_us), line)
    line = _ID.sub(lambda m: b'{"id":%d' % (int(m.group(1)) + id_base), line)
    return _STEP.sub(lambda m: b'"step":%d' % (int(m.group(1)) + step_base), line)


def _moved_pid(line: bytes, pid_offset: int) -> bytes:
    if not pid_offset:
        return line
    return _PID.sub(lambda m: b'"pid":%d' % (int(m.group(1)) + pid_offset), line)


def build(source: str, target: str, records: int, shift_s: float = 1.0, level: int = 6,
          regions_once: bool = False, pid_offset: int = 0) -> int:
    """Write at least `records` records to `target` (.gz compresses); returns records written.
    `regions_once` keeps checkpoint regions in the first repetition only: more records, the
    same checkpoints (to show that memory follows checkpoints found, not records read)."""
    lines = [_moved_pid(line, pid_offset) for line in source_lines(source)]
    meta = [line for line in lines if b'"ph":4' in line]
    events = [line for line in lines if b'"ph":4' not in line]
    later = [line for line in events if b'"cat":"CHECKPOINT"' not in line] if regions_once \
        else events
    opener = gzip.open if target.endswith(".gz") else open
    kwargs = {"compresslevel": level} if target.endswith(".gz") else {}
    written = 0
    with opener(target, "wb", **kwargs) as out:
        out.write(b"\n".join(meta) + b"\n")
        written += len(meta)
        repeat = 0
        while written < records:
            shift = int(repeat * shift_s * 1_000_000)
            base = repeat * len(events)
            source_events = events if repeat == 0 else later
            block = [_shifted(line, shift, base, repeat * 1000) for line in source_events]
            out.write(b"\n".join(block) + b"\n")
            written += len(block)
            repeat += 1
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("source")
    parser.add_argument("target")
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--pid-offset", type=int, default=0)
    args = parser.parse_args()
    print(build(args.source, args.target, args.records, pid_offset=args.pid_offset))


if __name__ == "__main__":
    main()
