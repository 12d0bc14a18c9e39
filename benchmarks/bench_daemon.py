"""Daemon intake rate, request latency, and the client's overhead on a training loop.

    python benchmarks/bench_daemon.py [--buffers 3000] [--parts intake,latency,overhead]
    python benchmarks/bench_daemon.py --parts intake --producers 1 --tree /tmp/previous
    python benchmarks/bench_daemon.py --parts intake --producers 1 --rate 1000000 --buffers 15000

Intake: producers PUSH buffers of real DFTracer lines (64 KiB, as the tracer flushes with a
small write buffer; time moves on at every buffer, as in a job's trace) into a daemon
subprocess; beside it, raw ZeroMQ PUSH/PULL of the same bytes (the receiver only counts) in
the same run. `--rate` paces the producers (events/s, all of them together: a job's steady
stream) instead of sending as fast as the daemon takes them.
Latency: `recommend` round trips over IPC and TCP.
Overhead: a loop of 2 ms steps checkpointing every 50 steps, with and without TunedSCR (over the
SCR double) and event emission. `--tree` runs the daemon from another checkout (its C parts
built in place), to compare intake with a previous commit in alternating runs.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import zmq  # noqa: E402

from scrtune.client import DaemonClient, Emitter, TunedSCR  # noqa: E402
from scrtune.daemon.endpoints import default_endpoints  # noqa: E402
from scrtune.daemon.protocol import Lines, encode  # noqa: E402
from scrtune.engine.replay import EXAMPLE_TRACE  # noqa: E402
from tests.scr_double import ScrDouble  # noqa: E402
from tests.tracing.largetrace import _shifted, source_lines  # noqa: E402


def trace_buffers(size: int = 64 << 10, repeats: int = 60,
                  source: str = EXAMPLE_TRACE) -> tuple[list[bytes], int]:
    """A trace (the shipped one by default) repeated with time moving on (as a running
    job's would)."""
    lines = [line for line in source_lines(source) if b'"ph":4' not in line]
    shifted = [_shifted(line, r * 1_000_000, r * len(lines), r * 1000)
               for r in range(repeats) for line in lines]
    buffers, current, events = [], [], 0
    for line in shifted:
        current.append(line)
        if sum(map(len, current)) >= size:
            buffers.append(b"\n".join(current) + b"\n")
            events += len(current)
            current = []
    return buffers, events // len(buffers)


def resent(buffers: list[bytes], count: int) -> list[bytes]:
    """`count` buffers to send: `buffers` over and over, every time stamp 10^13 µs (115 days)
    later at each pass, built before the clock starts. A job's time moves on; sending the same
    times again made the daemon place each resent window among all the earlier ones, a cost
    no real trace has. (Time stamps of 16 digits sharing their first four, as the traces'.)"""
    lead = re.search(rb'"ts":(\d{4})\d{12}\b', buffers[0])
    assert lead, "16-digit time stamps expected"
    old = b'"ts":' + lead.group(1)
    return [buffers[at] if not cycle else
            buffers[at].replace(old, b'"ts":%d' % (int(lead.group(1)) + 10 * cycle))
            for cycle, at in (divmod(index, len(buffers)) for index in range(count))]


def produce(endpoint: str, buffers: list[bytes], count: int,
            buffers_per_s: float | None = None, source: str = "") -> None:
    """Send `count` buffers: as fast as the receiver takes them (blocking sends), or one
    every 1/buffers_per_s seconds (sleeping in between, so the daemon has the other core)."""
    sock = zmq.Context().socket(zmq.PUSH)
    sock.setsockopt(zmq.SNDHWM, 100)
    sock.connect(endpoint)
    started, offset = time.monotonic(), 0
    for index in range(count):
        if buffers_per_s:
            time.sleep(max(0.0, started + index / buffers_per_s - time.monotonic()))
        data = buffers[index % len(buffers)]
        if source:  # as `scrtune forward` sends: the file's name and offsets with the lines
            sock.send(encode(Lines(source=source, start=offset, end=offset + len(data),
                                   data=data)))
            offset += len(data)
        else:
            sock.send(data)
    sock.close(linger=-1)


def _start(endpoint: str, buffers, producers: int, count: int,
           buffers_per_s: float | None = None, forwarded: bool = False) -> list:
    procs = [multiprocessing.Process(
        target=produce, args=(endpoint, buffers, count, buffers_per_s,
                              f"/bench/rank-{index}-app.pfw" if forwarded else ""))
             for index in range(producers)]
    for proc in procs:
        proc.start()
    return procs


def _busy_s() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from /proc/stat."""
    fields = [int(v) for v in open("/proc/stat").readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds of `pid`'s threads: "loop" (the main thread), "zmq" (ZeroMQ's I/O
    thread) and "other" (the parse thread: Python does not name OS threads)."""
    out = {"loop": 0.0, "zmq": 0.0, "other": 0.0}
    for task in os.listdir(f"/proc/{pid}/task"):
        text = open(f"/proc/{pid}/task/{task}/stat").read()
        name = text[text.index("(") + 1:text.rindex(")")]
        fields = text[text.rindex(")") + 2:].split()
        kind = "loop" if int(task) == pid else "zmq" if name.startswith("ZMQbg/IO") else \
            "other"
        out[kind] += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out


def raw_rate(buffers, per_buffer: int, producers: int, count: int) -> tuple[float, float]:
    """The same bytes through PUSH/PULL, the receiver only counting; events/s, and the CPU
    the transport took per event (µs, both ends, all cores)."""
    endpoint = f"ipc://{tempfile.mkdtemp()}/raw.sock"
    pull = zmq.Context.instance().socket(zmq.PULL)
    pull.bind(endpoint)
    busy = _busy_s()
    start = time.monotonic()
    procs = _start(endpoint, buffers, producers, count)
    for _ in range(producers * count):
        pull.recv()
    elapsed = time.monotonic() - start
    busy = _busy_s() - busy
    for proc in procs:
        proc.join()
    pull.close(linger=0)
    events = producers * count * per_buffer
    return events / elapsed, busy / events * 1e6


def daemon_rate(buffers, per_buffer: int, producers: int, count: int, tree: str | None = None,
                events_per_s: float | None = None, forwarded: bool = False
                ) -> tuple[float, int, dict[str, float]]:
    """From the first send until the daemon has processed every batch it received; events/s,
    batches dropped (or refused as out of order after a drop), and the daemon's CPU per event
    (µs) by thread. `events_per_s`: the
    producers' pace, all together (None: as fast as they can)."""
    directory = tempfile.mkdtemp()
    os.chmod(directory, 0o700)
    env = dict(os.environ, PYTHONPATH=tree) if tree else None
    daemon = subprocess.Popen([sys.executable, "-m", "scrtune", "daemon", "--dir", directory,
                               "--foreground", "--intake-queue", str(producers * count + 1)],
                              stderr=subprocess.DEVNULL, env=env, cwd=tree)
    client = DaemonClient(default_endpoints(directory).requests, timeout_s=10.0)
    while client.hello() is None:
        time.sleep(0.1)
    client.status()  # the first status computes a recommendation (of nothing yet)
    cpu = _thread_cpu_s(daemon.pid)
    start = time.monotonic()
    pace = events_per_s / per_buffer / producers if events_per_s else None
    procs = _start(default_endpoints(directory).events[0], buffers, producers, count, pace,
                   forwarded)
    while True:
        counters = client.status().result["counters"]
        # a forwarded message after a dropped one is refused (out of order): a forwarder
        # would send both again, this producer does not
        lost = counters["batches_dropped"] + counters["batches_out_of_order"]
        if counters["batches_received"] == producers * count and \
                counters["records"] + lost * per_buffer >= 0.99 * producers * count * per_buffer:
            break
        time.sleep(0.02)
    elapsed = time.monotonic() - start
    after = _thread_cpu_s(daemon.pid)
    for proc in procs:
        proc.join()
    daemon.terminate()
    daemon.wait()
    records = max(counters["records"], 1)
    per_event = {kind: (after[kind] - cpu[kind]) / records * 1e6 for kind in after}
    return counters["records"] / elapsed, lost, per_event


def latency(endpoint_args: list[str], count: int = 2000) -> tuple[float, float]:
    directory = tempfile.mkdtemp()
    os.chmod(directory, 0o700)
    daemon = subprocess.Popen([sys.executable, "-m", "scrtune", "daemon", "--dir", directory,
                               "--foreground", *endpoint_args], stderr=subprocess.DEVNULL)
    tcp = endpoint_args[1] if endpoint_args else None
    client = DaemonClient(default_endpoints(directory, tcp).requests, timeout_s=5.0)
    while client.hello() is None:
        time.sleep(0.1)
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        assert client.recommend() is not None
        samples.append(time.perf_counter() - started)
    daemon.terminate()
    daemon.wait()
    samples.sort()
    return samples[len(samples) // 2] * 1e3, samples[int(len(samples) * 0.99)] * 1e3


def training_loop(steps: int, tuned: bool, directory: str) -> float:
    step_s, every = 0.002, 50
    scr = ScrDouble(prefix=directory)
    emitter = None
    if tuned:
        scr = TunedSCR(scr, client=DaemonClient(default_endpoints(directory).requests))
        emitter = Emitter(default_endpoints(directory).events[0])
    scr.init()
    started = time.perf_counter()
    for step in range(steps):
        begin = time.perf_counter()
        while time.perf_counter() - begin < step_s:  # compute (busy, like a GPU wait)
            pass
        if emitter is not None:
            emitter.emit("train.step", "COMPUTE", time.time(), step_s, step=step)
        if step % every == every - 1:
            scr.need_checkpoint()
            scr.start_output(f"ckpt.{step}", 1)
            scr.complete_output(True)
    elapsed = time.perf_counter() - started
    scr.finalize()
    if emitter is not None:
        emitter.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--buffers", type=int, default=3000,
                        help="messages each producer sends (64 KiB each by default)")
    parser.add_argument("--parts", default="intake,latency,overhead",
                        help="which measurements to run (comma-separated)")
    parser.add_argument("--repeats", type=int, default=5,
                        help="training loops of each kind; the median is reported")
    parser.add_argument("--producers", default="1,2,4",
                        help="intake: producer counts to run (comma-separated)")
    parser.add_argument("--tree", help="intake: run the daemon from this checkout")
    parser.add_argument("--source", default=EXAMPLE_TRACE,
                        help="intake: the trace whose lines are sent, repeated with time "
                        "moving on (default: the shipped example, a checkpoint every ~220 "
                        "records)")
    parser.add_argument("--message-kib", type=int, default=64,
                        help="intake: KiB of lines a message (default 64, a tracer's small "
                        "write buffer; `scrtune forward` sends up to 4096)")
    parser.add_argument("--forwarded", action="store_true",
                        help="intake: messages as `scrtune forward` sends them, each with "
                        "its file's name and offsets")
    parser.add_argument("--rate", type=float,
                        help="intake: events/s the producers send, all together (default: "
                        "as fast as the daemon takes them)")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    print(f"machine: {platform.node()} {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    if "intake" in parts:
        intake(args.buffers, [int(p) for p in args.producers.split(",")], args.tree,
               args.rate, args.source, args.message_kib, args.forwarded)
    if "latency" in parts:
        print("\n| transport | recommend p50 ms | p99 ms |\n|---|---:|---:|")
        for label, extra in (("IPC", []), ("TCP loopback", ["--tcp", "127.0.0.1:47711"])):
            p50, p99 = latency(extra)
            print(f"| {label} | {p50:.3f} | {p99:.3f} |")
    if "overhead" in parts:
        overhead(args.repeats)


def intake(count: int, producer_counts: list[int], tree: str | None,
           events_per_s: float | None = None, source: str = EXAMPLE_TRACE,
           message_kib: int = 64, forwarded: bool = False) -> None:
    buffers, per_buffer = trace_buffers(message_kib << 10, source=source)
    buffers = resent(buffers, count)
    pace = f", sent at {events_per_s:,.0f} events/s" if events_per_s else ""
    way = ", as `scrtune forward` sends them" if forwarded else ""
    print(f"\n{per_buffer} events per {message_kib} KiB message{way}{pace}\n")
    print("| producers | daemon events/s | raw ZeroMQ events/s | ratio | dropped |")
    print("|---:|---:|---:|---:|---:|")
    costs = []
    for producers in producer_counts:
        raw, raw_cpu = raw_rate(buffers, per_buffer, producers, count // producers)
        rate, dropped, daemon_cpu = daemon_rate(buffers, per_buffer, producers,
                                                count // producers, tree, events_per_s,
                                                forwarded)
        print(f"| {producers} | {rate:,.0f} | {raw:,.0f} | {rate / raw:.2f} | {dropped} |")
        costs.append((producers, raw_cpu, daemon_cpu))
    print("\nCPU per event, µs (raw: the whole machine; daemon: its threads)\n")
    print("| producers | raw ZeroMQ | daemon I/O thread | parse thread | loop thread | "
          "daemon, all threads |")
    print("|---:|---:|---:|---:|---:|---:|")
    for producers, raw_cpu, daemon_cpu in costs:
        print(f"| {producers} | {raw_cpu:.3f} | {daemon_cpu['zmq']:.3f} | "
              f"{daemon_cpu['other']:.3f} | {daemon_cpu['loop']:.3f} | "
              f"{sum(daemon_cpu.values()):.3f} |")


def overhead(repeats: int) -> None:
    directory = tempfile.mkdtemp()
    os.chmod(directory, 0o700)
    daemon = subprocess.Popen([sys.executable, "-m", "scrtune", "daemon", "--dir", directory,
                               "--foreground"], stderr=subprocess.DEVNULL)
    client = DaemonClient(default_endpoints(directory).requests, timeout_s=5.0)
    while client.hello() is None:
        time.sleep(0.1)
    plain_runs, tuned_runs = [], []
    for _ in range(repeats):  # interleaved, so that the VM's drift falls on both
        plain_runs.append(training_loop(1000, False, directory))
        tuned_runs.append(training_loop(1000, True, directory))
    plain, tuned = statistics.median(plain_runs), statistics.median(tuned_runs)
    daemon.terminate()
    daemon.wait()
    print("\n| training loop (1000 x 2 ms steps, checkpoint every 50) | seconds |\n|---|---:|")
    print(f"| plain SCR (double) | {plain:.3f} |\n| TunedSCR + emit per step | {tuned:.3f} |")
    print(f"| slowdown | {100 * (tuned / plain - 1):.2f}% |")


if __name__ == "__main__":
    main()
