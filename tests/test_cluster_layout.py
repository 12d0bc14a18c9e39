"""Where the daemon lives on a cluster's nodes (issue 42): one daemon per node whatever the task
layout, and a runtime directory of the node's own even when the login shell's
XDG_RUNTIME_DIR came along with the job."""

from __future__ import annotations

import os
import subprocess
import tempfile

import pytest

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
    # each launch a run for goodput; a relaunch saving step 100 again is another checkpoint
    assert len(relaunched.launches) == 3
    assert [c.step for c in relaunched.checkpoints] == [100, 200] * 3
    at_once = replay(_launches(tmp_path / "b", 1, 6, one_after_another=False))
    assert (at_once.ranks, at_once.processes) == (6, 6) and len(at_once.launches) == 1
    assert [c.step for c in at_once.checkpoints] == [100, 200]


def _default_daemon(tmp_path, via_own_parent: bool) -> tuple[subprocess.Popen, str]:
    """A daemon in its default directory (no --dir: the `nojob` one, no scheduler), started
    by this process or by a parent process of its own (another job script); (process, dir)."""
    import sys
    import time

    from tests.test_daemon import client_for

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SLURM_", "FLUX_", "PBS_", "LSB_", "SCRTUNE_DIR"))}
    env.update(XDG_RUNTIME_DIR=str(tmp_path / "run"))
    (tmp_path / "run").mkdir(mode=0o700, exist_ok=True)
    command = [*SCRTUNE, "daemon", "--snapshot-s", "0.2"]
    if via_own_parent:
        command = [sys.executable, "-c", "import subprocess, sys; "
                   "sys.exit(subprocess.call(sys.argv[1:]))", *command]
    proc = subprocess.Popen(command, env=env)
    directory = str(tmp_path / "run" / f"scrtune-{os.getuid()}" / "nojob")
    deadline = time.monotonic() + 60  # a bound on a wait, wide for a busy machine
    # (a client given the path would make it, its parents with the umask's modes)
    while not os.path.exists(os.path.join(directory, "requests.sock")) or \
            client_for(directory).hello() is None:
        if proc.poll() is not None or time.monotonic() > deadline:
            pytest.fail(f"the daemon did not start (exit {proc.poll()})")
        time.sleep(0.05)
    return proc, directory


def _stop_default_daemon(proc: subprocess.Popen, directory: str) -> None:
    import signal

    with open(os.path.join(directory, "daemon.lock")) as handle:
        os.kill(int(handle.read()), signal.SIGTERM)  # the daemon, not a parent standing by
    assert proc.wait(timeout=30) == 0


def test_a_job_id_used_again_starts_afresh_and_a_restarted_daemon_continues(tmp_path) -> None:
    """Every plain job script's daemon takes the `nojob` directory (a wiped Slurm numbers its
    jobs from 1 again): the next job's daemon continued the previous job's state. Another job
    moves it aside; the same job's restarted daemon continues it."""
    from tests.test_daemon import client_for, feed

    proc, directory = _default_daemon(tmp_path, via_own_parent=False)
    feed(directory)
    _stop_default_daemon(proc, directory)
    proc, _ = _default_daemon(tmp_path, via_own_parent=False)  # restarted by the same parent
    assert client_for(directory).status().result["counters"]["records"] == 888
    _stop_default_daemon(proc, directory)
    proc, _ = _default_daemon(tmp_path, via_own_parent=True)  # another job's daemon
    try:
        assert client_for(directory).status().result["counters"]["records"] == 0
    finally:
        _stop_default_daemon(proc, directory)
    moved = os.listdir(os.path.join(directory, "previous"))
    assert len(moved) == 1
    assert "state.sqlite" in os.listdir(os.path.join(directory, "previous", moved[0]))
    with open(os.path.join(directory, "daemon.log")) as handle:
        assert "held the state of another job (nojob: parent" in handle.read()


def test_a_scheduler_job_is_told_apart_by_its_start_time() -> None:
    from scrtune.daemon.identity import job_identity

    first = job_identity({"SLURM_JOB_ID": "7", "SLURM_JOB_START_TIME": "1795000000"})
    again = job_identity({"SLURM_JOB_ID": "7", "SLURM_JOB_START_TIME": "1795000000"})
    later = job_identity({"SLURM_JOB_ID": "7", "SLURM_JOB_START_TIME": "1795009999"})
    assert first == again != later and first.startswith("7: ")
