"""DFTracer's ZeroMQ writer: which DFTRACER_WRITE_BUFFER_SIZE gives live events, at what cost
(issue 47).

    SCRTUNE_DFTRACER_ZMQ_PREFIX=~/.cache/scrtune-dftracer-zmq/2.2.0-... \\
        python benchmarks/zmq_writer_buffers.py

The writer sends one message per full buffer (and the rest at exit): nothing reaches the daemon
before a buffer fills. A C program (tests/tracing/cwrite.c, 100,000 writes of 16 bytes to 4
files) runs untraced and traced at several buffer sizes, compressed or not, into a plain PULL
socket that timestamps each message. Reported per setting (median of --reps): the program's
wall time and its cost per event over the untraced run, messages, events per message (the
events a live reader waits for: at 1,000 events/s, a message of 350 events is 0.35 s old).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import zmq

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.join(os.path.dirname(HERE), "tests", "tracing", "cwrite.c")
FILES, WRITES, SIZE = 4, 25_000, 16
BUFFERS = (4 << 10, 64 << 10, 1 << 20, 16 << 20)  # 16 MiB: DFTracer's default


class Receiver(threading.Thread):
    def __init__(self, endpoint: str) -> None:
        super().__init__(daemon=True)
        self.socket = zmq.Context.instance().socket(zmq.PULL)
        self.socket.bind(endpoint)
        self.arrivals: list[tuple[float, int]] = []  # (time, lines)
        self.stopping = False

    def run(self) -> None:
        import zlib

        while not self.stopping:
            if self.socket.poll(50):
                message = self.socket.recv()
                if message[:2] == b"\x1f\x8b":
                    message = zlib.decompressobj(31).decompress(message)
                self.arrivals.append((time.perf_counter(), message.count(b"\n")))


def run(binary: str, work: str, prefix: str | None, buffer_bytes: int, compression: bool
        ) -> dict:
    endpoint = f"ipc://{work}/bench.sock"
    receiver = Receiver(endpoint)
    receiver.start()
    env = dict(os.environ)
    if prefix:
        env.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_INIT="PRELOAD",
                   DFTRACER_DATA_DIR=work, DFTRACER_ZMQ_ENDPOINT=endpoint,
                   DFTRACER_WRITE_BUFFER_SIZE=str(buffer_bytes),
                   DFTRACER_TRACE_COMPRESSION="1" if compression else "0",
                   LD_PRELOAD=os.path.join(prefix, "lib", "libdftracer_preload.so"))
    started = time.perf_counter()
    subprocess.run([binary, work, str(FILES), str(WRITES), str(SIZE)], env=env, check=True,
                   timeout=600)
    ended = time.perf_counter()
    time.sleep(0.5)
    receiver.stopping = True
    receiver.join()
    receiver.socket.close(linger=0)
    events = sum(lines for _, lines in receiver.arrivals)
    return {"wall_s": ended - started, "messages": len(receiver.arrivals), "events": events}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--json", help="write the runs here")
    args = parser.parse_args()
    prefix = os.environ["SCRTUNE_DFTRACER_ZMQ_PREFIX"]
    work = tempfile.mkdtemp(prefix="scrtune-zmqbuf-")
    binary = os.path.join(work, "cwrite")
    subprocess.run(["cc", "-O2", "-o", binary, SOURCE], check=True)
    settings = [("untraced", None, 0, False)] + [
        (f"{size >> 10} KiB {'gzip' if gz else 'plain'}", prefix, size, gz)
        for size in BUFFERS for gz in (True, False)]
    runs: dict[str, list[dict]] = {name: [] for name, *_ in settings}
    for _ in range(args.reps):
        for name, tracer, size, gz in settings:
            runs[name].append(run(binary, work, tracer, size, gz))
    base = statistics.median(r["wall_s"] for r in runs["untraced"])
    writes = FILES * WRITES
    print(f"{writes:,} writes of {SIZE} bytes; untraced {base:.3f} s")
    print(f"{'buffer':15} {'wall s':>7} {'us/event':>9} {'messages':>9} {'events/msg':>11}")
    for name, *_ in settings[1:]:
        wall = statistics.median(r["wall_s"] for r in runs[name])
        last = runs[name][-1]
        per_message = last["events"] / max(last["messages"], 1)
        print(f"{name:15} {wall:7.3f} {1e6 * (wall - base) / writes:9.2f} "
              f"{last['messages']:9,} {per_message:11,.0f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(runs, handle, indent=1)


if __name__ == "__main__":
    sys.exit(main())
