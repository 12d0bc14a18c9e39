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


def _launches(tmp_path, launches: int, ranks: int, one_after_another: bool) -> list[str]:
    """A real one-process trace made into `launches` launches of `ranks` processes each, each
    process its own pid; a launch starts a second after the previous one ended, or all at once."""
    import gzip
    import re

    from tests.conftest import only_file

    text = gzip.open(only_file("v2_python_api")).read().decode()
    times = [int(t) for t in re.findall(r'"ts":(\d+)', text)]
    span_us = max(times) - min(times)
    tmp_path.mkdir()
    paths = []
    for launch in range(launches):
        for rank in range(ranks):
            pid = 10_000 + 100 * launch + rank
            shift_us = (span_us + 1_000_000) * launch if one_after_another else 0
            lines = re.sub(r'"(pid|tid)":4210', f'"\\1":{pid}', text)
            lines = re.sub(r'"ts":(\d+)', lambda m, by=shift_us: f'"ts":{int(m[1]) + by}', lines)
            path = tmp_path / f"train-{pid}.pfw"
            path.write_text(lines)
            paths.append(str(path))
    return paths


def test_relaunched_processes_are_not_more_ranks(tmp_path) -> None:
    """After 3 launches a 2-rank job is 2 ranks, not 6 (issue 42: "after 8 launches a 2-rank
    job is 16 ranks per node"); 6 processes that run at once are 6 ranks."""
    from scrtune.engine.replay import replay

    relaunched = replay(_launches(tmp_path / "a", 3, 2, one_after_another=True))
    assert (relaunched.ranks, relaunched.processes) == (2, 6)
    at_once = replay(_launches(tmp_path / "b", 1, 6, one_after_another=False))
    assert (at_once.ranks, at_once.processes) == (6, 6)
