"""Issue 45, "a hostile or unlucky file": `scrtune forward` against a real daemon subprocess,
with files no tracer should write but a job can: a line over the message limit, a
`.pfw.gz` of zeros without a newline. One bad line costs that line; memory stays bounded."""

from __future__ import annotations

import gzip
import os
import subprocess
import time

import psutil

from tests.conftest import SCRTUNE, only_file, wait_until
from tests.test_daemon import settled

GOOD = gzip.open(only_file("v2_python_api")).read().splitlines(keepends=True)  # 888 records


def _forward(directory: str, path) -> subprocess.CompletedProcess:
    """`scrtune forward --once` of one file to the daemon in `directory`."""
    return subprocess.run([*SCRTUNE, "forward", "--dir", directory, "--once", "--give-up-s",
                           "20", str(path)], capture_output=True, text=True, timeout=300)


def test_a_line_over_the_message_limit_costs_that_line_only(daemon, tmp_path) -> None:
    """It once stopped its file for good (the forwarder waited for its end forever) while
    `--once` exited 0; the lines after it never reached the daemon."""
    directory, _ = daemon
    trace = tmp_path / "long.pfw"
    long_line = b'{"id":1,"name":"' + b"x" * (5 << 20) + b'"}\n'
    trace.write_bytes(b"".join(GOOD[:400]) + long_line + b"".join(GOOD[400:]))
    forward = _forward(directory, trace)
    assert forward.returncode == 0, forward.stderr
    assert "skipped" in forward.stderr
    counters = settled(directory)
    assert counters["records"] == 888 and counters["batches_out_of_order"] == 0, counters


def test_a_gzip_of_zeros_without_newlines_keeps_the_forwarder_small(daemon, tmp_path) -> None:
    """A 0.6 MB `.pfw.gz` without newlines once took it to 1.2 GiB (it held the decompressed
    bytes, waiting for a line's end). 400 MB of zeros here, then the good lines."""
    directory, _ = daemon
    trace = tmp_path / "zeros.pfw.gz"
    with gzip.open(trace, "wb", compresslevel=1) as handle:
        handle.write(b"".join(GOOD[:400]))
        for _ in range(100):
            handle.write(bytes(4 << 20))
        handle.write(b"\n" + b"".join(GOOD[400:]))
    forward = psutil.Popen([*SCRTUNE, "forward", "--dir", directory, "--once", "--give-up-s",
                            "20", str(trace)], stderr=subprocess.PIPE, text=True)
    peak_bytes = 0
    while forward.poll() is None:
        try:
            peak_bytes = max(peak_bytes, forward.memory_info().rss)
        except psutil.Error:  # ended between the two calls
            pass
        time.sleep(0.01)
    assert forward.wait(timeout=300) == 0, forward.stderr.read()
    assert 0 < peak_bytes < 300 << 20, peak_bytes  # held, it would be 400 MB and more
    counters = settled(directory)
    assert counters["records"] == 888 and counters["batches_out_of_order"] == 0, counters


def test_a_file_truncated_and_rewritten_in_place_is_sent_again_whole(daemon, tmp_path) -> None:
    """A file truncated and written again in place (same inode) once lost every record of
    the new content: 400 of 400 when it came back at its old size, 1,285 of 2,470 when it
    grew past it before the next look; only the out-of-order counter showed it."""
    from scrtune.client.forward import Forwarder
    from scrtune.daemon.endpoints import default_endpoints

    directory, _ = daemon
    trace = tmp_path / "job.pfw"
    trace.write_bytes(b"".join(GOOD[:400]))
    endpoints = default_endpoints(directory)
    forwarder = Forwarder([str(trace)], endpoints.events[0], requests=endpoints.requests)
    try:
        _pump_until_taken(forwarder)
        first = settled(directory)["records"]
        inode = trace.stat().st_ino
        time.sleep(0.01)  # a new modification time, as any later write has
        with open(trace, "r+b") as handle:  # the same inode: truncated, then written again
            handle.truncate(0)
            handle.write(b"".join(GOOD[488:888]))  # other lines, as long or longer
        assert trace.stat().st_ino == inode
        _pump_until_taken(forwarder)
        counters = settled(directory)
    finally:
        forwarder.close()
    assert counters["records"] == first + 400, (first, counters)
    assert counters["batches_out_of_order"] == 0, counters


def _pump_until_taken(forwarder, timeout_s: float = 300.0) -> None:
    # pump() before acknowledged(), both every time: the file is sent as it is asked about
    wait_until(lambda: forwarder.pump() & forwarder.acknowledged(every_s=0.2), timeout_s,
               lambda: "the daemon did not take the file")


def test_once_ends_with_more_files_than_one_offsets_request_names(daemon, tmp_path) -> None:
    """`--once` with more than 4,096 files never ended: only the first 4,096 were asked
    about, so the others always looked unacknowledged and were sent again and again."""
    directory, _ = daemon
    files = 4_100
    for number in range(files):
        (tmp_path / f"p{number}.pfw").write_bytes(GOOD[500])
    forward = subprocess.run([*SCRTUNE, "forward", "--dir", directory, "--once", "--give-up-s",
                              "60", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert forward.returncode == 0, forward.stderr[-2000:]
    counters = settled(directory)
    # every file's record once: a burst this size overflows the intake queue (issue 47), and
    # the forwarder's resends make up for the drops, the duplicates refused as out of order
    assert counters["records"] == files, counters


def test_a_rotated_file_keeps_its_place_and_the_new_one_is_sent(daemon, tmp_path) -> None:
    """`job.pfw` renamed `job-1.pfw` (both followed), a new `job.pfw` begun: the renamed one
    was sent again whole under its new name, its records counted twice."""
    from scrtune.client.forward import Forwarder
    from scrtune.daemon.endpoints import default_endpoints

    directory, _ = daemon
    endpoints = default_endpoints(directory)
    trace = tmp_path / "job.pfw"
    trace.write_bytes(b"".join(GOOD[:400]))
    forwarder = Forwarder([str(tmp_path)], endpoints.events[0], requests=endpoints.requests)
    try:
        _pump_until_taken(forwarder)
        first = settled(directory)["records"]
        with open(trace, "ab") as handle:  # written after the last look, before rotation
            handle.write(b"".join(GOOD[400:500]))
        os.rename(trace, tmp_path / "job-1.pfw")
        trace.write_bytes(b"".join(GOOD[500:888]))
        _pump_until_taken(forwarder)
        counters = settled(directory)
    finally:
        forwarder.close()
    assert counters["records"] == first + 488, (first, counters)
