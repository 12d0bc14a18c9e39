"""The `scrtune` console script: after a command that ends quickly, the process ends without
tearing the interpreter down, yet prints everything, exits with the command's code, and keeps
the ordinary exit where something must still run (MPI, other commands)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from scrtune.cli.main import COMMANDS

# an atexit handler registered before the command: it runs only on the ordinary exit
_RUN = """
import atexit, sys
from scrtune.cli.main import console
atexit.register(lambda: print("interpreter torn down", file=sys.stderr))
sys.argv = ["scrtune", *sys.argv[1:]]
console()
"""


def _console(*argv: str) -> subprocess.CompletedProcess:
    """Output buffered as a user's shell leaves it (without PYTHONUNBUFFERED)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    return subprocess.run([sys.executable, "-c", _RUN, *argv], capture_output=True, text=True,
                          timeout=300, env=env)


@pytest.mark.parametrize("output", ["json", "table"])
def test_replay_ends_at_once_with_its_whole_output(output):
    """The table is a few KiB, left in stdout's buffer when the command returns: the quick
    exit must flush it."""
    quick = _console("replay", "--example", "--format", output)
    assert quick.returncode == 0, quick.stderr
    assert "interpreter torn down" not in quick.stderr
    whole = subprocess.run([sys.executable, "-c", "import sys; from scrtune.cli.main import "
                            "main; sys.exit(main())", "replay", "--example", "--format", output],
                           capture_output=True, text=True, timeout=300, check=True)
    assert quick.stdout == whole.stdout
    assert "checkpoint" in quick.stdout


def test_a_quick_exit_keeps_the_commands_exit_code_and_error(tmp_path):
    missing = tmp_path / "nothing-here.pfw"
    failed = _console("replay", str(missing))
    assert failed.returncode == 2
    assert failed.stderr.splitlines() == [
        f"scrtune replay: error: {missing}: no such file, directory or matching trace"]


def test_other_commands_exit_as_usual():
    assert not next(c for c in COMMANDS if c.name == "interval").ends_quickly
    usual = _console("interval", "--ckpt-cost", "300", "--mtbf", "86400", "--format", "json")
    assert usual.returncode == 0, usual.stderr
    assert "interpreter torn down" in usual.stderr
    assert json.loads(usual.stdout)


@pytest.mark.mpi
def test_under_mpi_the_interpreter_exits_as_usual():
    """mpi4py finalizes MPI in an atexit handler: a quick exit would skip it."""
    pytest.importorskip("mpi4py")
    run = subprocess.run([sys.executable, "-c", "import mpi4py.MPI\n" + _RUN, "replay",
                          "--example", "--format", "json"], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert "interpreter torn down" in run.stderr
