"""Whose state a daemon's default directory holds.

The default directory is named after the scheduler's job id (endpoints.job_key), or `nojob`
without one. A name alone is reused: every plain `mpirun` job script of a user on a node
starts a daemon in `nojob`, and a Slurm cluster whose state was wiped numbers its jobs from 1
again. A daemon continuing such a directory's state would serve one job what another job's
events taught it, and label its goodput with the other job's history. So the directory keeps
the identity of the job whose state it holds (`job-identity`): the scheduler's job id with the
job's start time, or, without a scheduler, the daemon's parent process (the job script) with
its start time. A daemon of another job moves the state aside (`previous/<time>/`, nothing
deleted) and starts afresh; a daemon restarted within its job continues where it was.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import time
from collections.abc import Mapping

from scrtune.daemon.endpoints import job_key

log = logging.getLogger("scrtune.daemon")
IDENTITY_FILE = "job-identity"
STATE_PREFIX = "state.sqlite"  # the state file, its SQLite sidecars and its value files
MAX_IDENTITY_BYTES = 512


def job_identity(environ: Mapping[str, str] | None = None, timeout_s: float = 5.0) -> str:
    """This job, told apart from any earlier one that had the same job key."""
    environ = os.environ if environ is None else environ
    key = job_key(environ)
    if key == "nojob":
        parent = os.getppid()
        return f"nojob: parent {parent} started {_process_start(parent)}"
    return f"{key}: started {_slurm_start(environ, timeout_s) or 'unknown'}"


def adopt(directory: str, identity: str) -> str:
    """Make `directory` hold `identity`'s state: another job's state files are moved to
    `previous/<time>/`. Returns what was done, for the log ('' when nothing moved)."""
    path = os.path.join(directory, IDENTITY_FILE)
    try:
        with open(path, "rb") as handle:
            held = handle.read(MAX_IDENTITY_BYTES).decode(errors="replace").strip()
    except FileNotFoundError:
        held = None
    except OSError as exc:
        held = f"unreadable ({exc.strerror or exc})"
    moved = ""
    stale = [name for name in sorted(os.listdir(directory)) if name.startswith(STATE_PREFIX)]
    if held != identity and stale:
        aside = os.path.join(directory, "previous", time.strftime("%Y%m%dT%H%M%S"))
        os.makedirs(aside, mode=0o700, exist_ok=True)
        for name in stale:
            os.replace(os.path.join(directory, name), os.path.join(aside, name))
        moved = (f"{directory} held the state of another job ({held or 'unknown'}); "
                 f"moved to {aside}")
    if held != identity:
        temporary = f"{path}.{os.getpid()}"
        with open(temporary, "w") as handle:
            handle.write(identity + "\n")
        os.replace(temporary, path)
    return moved


def _process_start(pid: int) -> str:
    """A process's start time in clock ticks since boot (/proc/PID/stat field 22): with the
    pid, it names one process among all that had that pid."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().rsplit(b")", 1)[1].split()[19].decode()
    except (OSError, IndexError):
        return "unknown"


def _slurm_start(environ: Mapping[str, str], timeout_s: float) -> str:
    """Slurm's start time of the job: SLURM_JOB_START_TIME (Slurm 23.02 and later), else
    `squeue -o %S`, asked once with a bounded wait; '' when unknown."""
    if environ.get("SLURM_JOB_START_TIME"):
        return environ["SLURM_JOB_START_TIME"]
    job, squeue = environ.get("SLURM_JOB_ID", ""), shutil.which("squeue")
    if not job.isdigit() or squeue is None:
        return ""
    try:
        return subprocess.run([squeue, "-h", "-j", job, "-o", "%S"], capture_output=True,
                              text=True, timeout=timeout_s, check=False).stdout.strip()[:64]
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.info("job start unknown (squeue -j %s): %s", job, exc)
        return ""
