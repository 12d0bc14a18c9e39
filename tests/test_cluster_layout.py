"""Where the daemon lives on a cluster's nodes (issue 42): one daemon per node whatever the task
layout, and a runtime directory of the node's own even when the login shell's
XDG_RUNTIME_DIR came along with the job."""

from __future__ import annotations

import os
import subprocess
import tempfile

from scrtune.daemon.endpoints import runtime_dir
from tests.conftest import SCRTUNE


def test_a_login_shells_runtime_dir_missing_on_the_node_is_not_used(tmp_path) -> None:
    """sbatch passes XDG_RUNTIME_DIR=/run/user/<uid>, absent on compute nodes: every node fell
    back to one shared home directory, and all daemons but one exited 2."""
    home = tmp_path / "home"
    environ = {"XDG_RUNTIME_DIR": str(tmp_path / "run-user-1000"), "HOME": str(home),
               "SLURM_JOB_ID": "4242"}
    chosen = runtime_dir(environ)
    assert chosen == os.path.join(tempfile.gettempdir(), f"scrtune-{os.getuid()}", "4242")
    assert not home.exists() and not (tmp_path / "run-user-1000").exists()
    present = tmp_path / "xdg"
    present.mkdir(mode=0o700)
    environ["XDG_RUNTIME_DIR"] = str(present)
    assert runtime_dir(environ) == str(present / f"scrtune-{os.getuid()}" / "4242")


def test_only_the_first_task_on_a_node_runs_the_daemon(tmp_path) -> None:
    """`srun --ntasks-per-node=1 scrtune daemon` inside a job of 2 tasks per node still starts
    2 tasks a node (srun inherits SLURM_NTASKS); the extra daemons exited 2, and under
    `srun -K` took the first one down with them."""
    env = {k: v for k, v in os.environ.items() if k not in ("SCRTUNE_DIR", "XDG_RUNTIME_DIR")}
    env.update(SLURM_JOB_ID="777001", SLURM_LOCALID="1", TMPDIR=str(tmp_path))
    second = subprocess.run([*SCRTUNE, "daemon", "--foreground"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert second.returncode == 0, second.stderr
    assert "its task 0 runs the node's daemon" in second.stderr
    assert not (tmp_path / f"scrtune-{os.getuid()}" / "777001").exists()  # nothing bound
