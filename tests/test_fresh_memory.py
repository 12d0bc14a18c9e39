"""benchmarks/fresh_memory.py, which the README says to run before reading a real-SCR grid:
it runs, prints each process's step times, and leaves nothing in /dev/shm."""

import glob
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.alone  # it times fresh memory, watches /dev/shm (tests/alone.py)

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      "benchmarks", "fresh_memory.py")


@pytest.mark.skipif(not os.path.isdir("/dev/shm"), reason="no /dev/shm on this machine")
def test_fresh_memory_prints_each_steps_time_and_cleans_up():
    before = set(glob.glob("/dev/shm/scrtune-fresh-*"))
    done = subprocess.run([sys.executable, SCRIPT, "--procs", "2", "--step-mb", "64",
                           "--steps", "3", "--compute-s", "0", "--free-behind", "1"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("2 processes x 64 MB a step (128 MB a step in all)")
    steps = [[float(t) for t in line.split()] for line in lines[1:]]
    assert len(steps) == 2 and all(len(times) == 3 and min(times) > 0 for times in steps)
    assert set(glob.glob("/dev/shm/scrtune-fresh-*")) == before
