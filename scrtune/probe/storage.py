"""Measure one storage directory the way a checkpoint uses it: files written in calls of a
given size and made durable (fsync), then read back cold.

Page cache is the trap of every quick benchmark: a write that is not synced measures memory,
and a read of a file just written hits the cache. So a write's time includes its fsync, and
before a read the file's cached pages are dropped with posix_fadvise(DONTNEED) (honoured for
clean pages on Linux file systems; on tmpfs, e.g. /dev/shm, memory is the medium and reads are
memory reads, which is what SCR's cache reads there too). Each measurement stops at a deadline
(`time.monotonic()`), so the whole probe stays within the time it was given.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np  # random bytes: a store may compress


class ProbeError(OSError):
    """The directory cannot be measured (missing, not writable, full)."""


@dataclass(frozen=True)
class CallTiming:
    size_bytes: int
    direction: str  # "write" or "read"
    calls: int
    dur_s: float  # all the calls, and the fsync for writes

    @property
    def per_call_s(self) -> float:
        return self.dur_s / max(self.calls, 1)

    @property
    def bytes_per_s(self) -> float:
        return self.size_bytes * self.calls / self.dur_s if self.dur_s > 0 else 0.0


@dataclass(frozen=True)
class LineFit:
    """duration of one call = latency_s + size / bytes_per_s."""

    latency_s: float
    bytes_per_s: float


@dataclass(frozen=True)
class TierMeasurement:
    path: str
    fs_type: str  # from /proc/mounts: tmpfs, ext4, xfs, lustre, ...
    timings: tuple[CallTiming, ...]
    write: LineFit
    read: LineFit
    streams: int
    write_bytes_per_s: float  # all streams at once, the largest call size, synced
    read_bytes_per_s: float
    free_bytes: int


def fs_type(path: str) -> str:
    """The file system type of the mount holding `path` (longest mount point prefix)."""
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    with contextlib.suppress(OSError), open("/proc/mounts", encoding="utf-8") as mounts:
        for line in mounts:
            fields = line.split()
            if len(fields) < 3:
                continue
            point = fields[1].replace("\\040", " ")
            inside = real == point or real.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(best):
                best, kind = point, fields[2]
    return kind


@contextlib.contextmanager
def flushed_pair(local_dir: str, parallel_dir: str, name: str, what: str
                 ) -> Iterator[tuple[str, str]]:
    """A cached file's path under `local_dir` and its flushed copy's under `parallel_dir`, both
    removed afterwards; an OSError on either is a ProbeError naming `what` and the two."""
    source = os.path.join(local_dir, f"{name}-source")
    target = os.path.join(parallel_dir, f"{name}-target")
    try:
        yield source, target
    except OSError as exc:
        raise ProbeError(f"{what} {source} -> {target}: {exc.strerror or exc}") from None
    finally:
        for path in (source, target):
            if os.path.exists(path):
                os.unlink(path)


@contextlib.contextmanager
def scratch_dir(parent: str) -> Iterator[str]:
    """A private directory under `parent`, removed afterwards whatever happens."""
    if not os.path.isdir(parent):
        raise ProbeError(f"{parent}: not a directory")
    try:
        path = tempfile.mkdtemp(prefix=".scrtune-profile-", dir=parent)
    except OSError as exc:
        raise ProbeError(f"{parent}: cannot create a file there ({exc.strerror})") from None
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def time_write(path: str, size_bytes: int, cap_bytes: int, deadline: float) -> CallTiming:
    """Write calls of `size_bytes` until `cap_bytes` or the deadline, then fsync: all timed."""
    block = np.random.default_rng(len(path)).bytes(size_bytes)  # not compressible
    calls = 0
    started = time.perf_counter()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while calls == 0 or (calls * size_bytes < cap_bytes and time.monotonic() < deadline):
            os.write(fd, block)
            calls += 1
        os.fsync(fd)
    except OSError as exc:
        raise ProbeError(f"{path}: write failed ({exc.strerror})") from None
    finally:
        os.close(fd)
    return CallTiming(size_bytes, "write", calls, time.perf_counter() - started)


def drop_cached(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def time_read(path: str, size_bytes: int, deadline: float) -> CallTiming:
    """Read the file back cold in calls of `size_bytes` until its end or the deadline."""
    drop_cached(path)
    calls = 0
    started = time.perf_counter()
    fd = os.open(path, os.O_RDONLY)
    try:
        while calls == 0 or time.monotonic() < deadline:
            if len(os.read(fd, size_bytes)) < size_bytes:
                break
            calls += 1
    finally:
        os.close(fd)
    return CallTiming(size_bytes, "read", max(calls, 1), time.perf_counter() - started)


def fit_line(timings: list[CallTiming]) -> LineFit:
    """Bandwidth from the largest calls, latency from what the smallest cost beyond moving
    their bytes at that bandwidth. A least-squares line over sizes spanning 4 KiB to 16 MiB
    is decided by the large calls, and its intercept (the latency) is noise, often negative."""
    largest = max(timings, key=lambda t: t.size_bytes)
    smallest = min(timings, key=lambda t: t.size_bytes)
    bandwidth = largest.bytes_per_s
    latency = smallest.per_call_s - smallest.size_bytes / bandwidth if bandwidth else 0.0
    return LineFit(latency_s=max(latency, 0.0), bytes_per_s=bandwidth)


def parallel_streams(folder: str, streams: int, size_bytes: int, cap_bytes: int,
                     deadline: float) -> tuple[float, float]:
    """Write then read `streams` files at once (threads: os.write and os.read release the GIL);
    the aggregate write and read rates."""
    paths = [os.path.join(folder, f"stream-{i}") for i in range(streams)]
    write_deadline = time.monotonic() + (deadline - time.monotonic()) / 2
    written = _together(lambda p: time_write(p, size_bytes, cap_bytes, write_deadline), paths)
    read = _together(lambda p: time_read(p, size_bytes, deadline), paths)
    return written, read


def _together(work, paths: list[str]) -> float:
    results: list[CallTiming] = []
    failures: list[BaseException] = []

    def run(path: str) -> None:
        try:
            results.append(work(path))
        except BaseException as exc:  # re-raised below, in the caller's thread
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(p,)) for p in paths]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall_s = time.perf_counter() - started
    if failures:
        raise failures[0]
    return sum(t.size_bytes * t.calls for t in results) / wall_s


def measure_tier(parent: str, sizes: tuple[int, ...], streams: int, budget_s: float,
                 cap_bytes: int) -> TierMeasurement:
    """All of one directory's measurements within `budget_s`: each call size written and read
    by one stream, then the largest size by `streams` at once."""
    with scratch_dir(parent) as folder:
        usage = shutil.disk_usage(folder)
        cap = max(min(cap_bytes, usage.free // (4 * max(streams, 1))), max(sizes))
        slice_s = budget_s / (2 * len(sizes) + 2)
        timings: list[CallTiming] = []
        for size in sizes:
            path = os.path.join(folder, f"calls-{size}")
            timings.append(time_write(path, size, cap, time.monotonic() + slice_s))
            timings.append(time_read(path, size, time.monotonic() + slice_s))
            os.unlink(path)
        write_bps, read_bps = parallel_streams(folder, streams, max(sizes), cap,
                                               time.monotonic() + 2 * slice_s)
    return TierMeasurement(
        path=os.path.abspath(parent), fs_type=fs_type(parent), timings=tuple(timings),
        write=fit_line([t for t in timings if t.direction == "write"]),
        read=fit_line([t for t in timings if t.direction == "read"]),
        streams=streams, write_bytes_per_s=write_bps, read_bytes_per_s=read_bps,
        free_bytes=usage.free)
