"""`mpirun -n 2 scrtune replay` splits files across ranks and prints what one process prints."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import DATA, SCRTUNE

pytestmark = pytest.mark.mpi

pytest.importorskip("mpi4py")


def _mpirun() -> str:
    # the launcher installed beside this Python (the mpich wheel) matches its mpi4py
    beside = os.path.join(os.path.dirname(sys.executable), "mpirun")
    found = beside if os.path.exists(beside) else shutil.which("mpirun") or shutil.which("mpiexec")
    if not found:
        pytest.fail("mpirun not found: install the [mpi] extra (mpich wheel)")
    return found


def test_two_ranks_give_the_same_json_as_one_process():
    single = subprocess.run(
        [*SCRTUNE, "replay", DATA, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert single.returncode == 0, single.stderr
    multi = subprocess.run(
        [_mpirun(), "-n", "2", *SCRTUNE, "replay", DATA, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert multi.returncode == 0, multi.stderr
    assert multi.stdout == single.stdout
    assert multi.stdout.count("\n") == 1  # only rank 0 prints
