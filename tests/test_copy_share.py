"""`scrtune profile`'s transfer-thread probe (issue 48, fortieth round): a thread copying in
buffer-sized calls, AXL's way, keeps a core busy while it copies and leaves it while a call
waits on the file system. Under benchmarks/slowpfs.c's 2 ms write call, 1 MiB calls leave the
core most of the time (0.16-0.22 busy on the project's machine) and 8 MiB ones far less often
(0.42-0.74); without the wait the same 1 MiB copy keeps it busy (0.6). The profile carries the
shares; one that cannot be a share is refused in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.test_cli_errors import _one_line_error

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIM = os.path.join(ROOT, "benchmarks", "slowpfs.c")
PROBE = ("import json, sys\n"
         "from scrtune.probe.copy_share import thread_shares\n"
         "print(json.dumps({s.buffer_bytes >> 20: s.busy_share\n"
         "                  for s in thread_shares(sys.argv[1], sys.argv[2], 1.5)}))\n")


def _shares(local: str, parallel: str, preload: dict[str, str]) -> dict[int, float]:
    done = subprocess.run([sys.executable, "-c", PROBE, local, parallel], capture_output=True,
                          text=True, timeout=120, env={**os.environ, **preload})
    assert done.returncode == 0, done.stderr
    assert not os.listdir(local) and not os.listdir(parallel)  # its files are gone
    return {int(size): share for size, share in json.loads(done.stdout).items()}


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler for benchmarks/slowpfs.c")
def test_a_thread_waiting_on_each_call_keeps_a_core_less_busy_with_small_calls(tmp_path):
    shim = tmp_path / "libslowpfs.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(shim), SHIM, "-ldl"],
                   check=True)
    local, parallel = tmp_path / "local", tmp_path / "pfs"
    local.mkdir()
    parallel.mkdir()
    slow = _shares(str(local), str(parallel), {
        "LD_PRELOAD": str(shim), "SCRTUNE_SLOW_PREFIX": os.path.realpath(parallel),
        "SCRTUNE_SLOW_CALL_US": "2000"})
    fast = _shares(str(local), str(parallel), {})
    assert sorted(slow) == [1, 8, 64] and all(0 < share <= 1 for share in slow.values())
    # a 1 MiB call's copy is a fraction of the 2 ms it then waits; 8 MiB's several times more
    assert slow[1] < 0.5 and slow[1] < slow[8]
    # the same copy with nothing to wait for keeps its core busier
    assert fast[1] > slow[1]


def test_a_profile_whose_thread_shares_are_no_shares_is_refused_in_one_line(run_cli, tmp_path):
    for bad, field in (("{buffer_bytes = 1048576, busy_share = 1.5}", "busy_share"),
                       ("{buffer_bytes = 0, busy_share = 0.5}", "buffer_bytes"),
                       ("{buffer_bytes = 1048576, busy_share = 0.2}, "
                        "{buffer_bytes = 1048576, busy_share = 0.3}", "one entry per"),
                       ("{buffer_bytes = 1048576, share = 0.2}", "share")):
        profile = tmp_path / "sys.toml"
        profile.write_text(f"cores_per_node = 2\ntransfer_thread_shares = [{bad}]\n")
        _one_line_error(run_cli("recommend", "--example", "--system", str(profile)),
                        "sys.toml", "transfer_thread_shares", field)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler for benchmarks/slowpfs.c")
@pytest.mark.skipif(not os.path.exists("/proc/thread-self/schedstat"),
                    reason="no schedstat: the kernel keeps no run-queue seconds")
def test_the_dispatch_wait_benchmark_prints_each_buffer_and_thread_count(tmp_path):
    """benchmarks/dispatch_wait.py, as HISTORY runs it (one round): a row per buffer size and
    thread count, the waits not negative, its files gone from both directories."""
    local, parallel = tmp_path / "local", tmp_path / "pfs"
    local.mkdir()
    parallel.mkdir()
    done = subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks", "dispatch_wait.py"),
                           "--pfs", str(parallel), "--local", str(local), "--budget-s", "0"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [line.split() for line in done.stdout.splitlines()[1:]]
    assert [(row[0], row[2]) for row in rows] == [
        (mib, threads) for mib in ("1", "8", "64") for threads in ("1", "2", "4")]
    assert all(float(row[3]) >= 0 and float(row[4]) >= 0 for row in rows)
    assert not os.listdir(local) and not os.listdir(parallel)
