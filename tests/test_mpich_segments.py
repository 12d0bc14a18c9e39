"""The tests kill MPI ranks on purpose (a node's failure); MPICH's shared-memory segment of
their job stays in /dev/shm, which conftest removes after each test when no live process maps
it. Checked on a real 2-rank job that SIGKILLs itself."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

from tests.conftest import (
    MPICH_SEGMENTS,
    mapped_segments,
    segments_locked,
    unlink_orphan_segments,
)
from tests.test_tuned_scr import mpirun

pytestmark = pytest.mark.mpi

pytest.importorskip("mpi4py", reason="mpi4py (the test extra) runs the MPI job")

KILLED = """
import os, signal
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()
os.kill(os.getpid(), signal.SIGKILL)
"""

LIVE = """
import os, sys, time
from mpi4py import MPI
MPI.COMM_WORLD.Barrier()  # every rank has attached the segment
if MPI.COMM_WORLD.Get_rank() == 0:  # one line: two ranks' lines interleave
    print("attached", flush=True)
while not os.path.exists(sys.argv[1]):  # until the test is done with it
    time.sleep(0.05)
"""


def test_a_killed_job_s_segment_is_removed_and_a_live_job_s_is_kept(tmp_path):
    if mpirun() is None:
        pytest.skip("no mpirun (the mpich wheel of the test extra)")
    killed, live = tmp_path / "killed.py", tmp_path / "live.py"
    killed.write_text(KILLED)
    live.write_text(LIVE)
    before = set(glob.glob(MPICH_SEGMENTS))
    release = tmp_path / "release"
    running = subprocess.Popen([mpirun(), "-n", "2", sys.executable, str(live), str(release)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert running.stdout is not None and running.stdout.readline() == "attached\n"
        # another test run's removal would take the killed job's segment before it is looked at
        with segments_locked():
            # the live job's, mapped by its ranks (and any other live job's since `before`)
            held = (set(glob.glob(MPICH_SEGMENTS)) - before) & mapped_segments()
            assert held
            done = subprocess.run([mpirun(), "-n", "2", sys.executable, str(killed)],
                                  capture_output=True, timeout=120)
            assert done.returncode != 0  # its ranks were killed
            left = set(glob.glob(MPICH_SEGMENTS)) - before - held - mapped_segments()
            assert left  # MPICH did not remove the killed job's segment
            removed = set(unlink_orphan_segments(before))
            assert left <= removed and not removed & held
            assert all(os.path.exists(path) for path in held)  # the live job's stays
    finally:
        release.touch()
        running.communicate(timeout=120)
