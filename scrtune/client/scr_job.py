"""A job id of its own for a job that no resource manager names.

SCR names a job's control and cache directories after its job id (`<base>/<user>/scr.<id>`).
The id is SCR_JOB_ID, else the resource manager's ($SLURM_JOBID, $FLUX_JOB_ID, $PBS_JOBID or
$LSB_JOBID, whichever SCR was built for), else `defjobid`: every plain `mpirun` job of a user on
a node then shares one control directory, and a job restores another job's checkpoint from the
node's cache. TunedSCR sets SCR_JOB_ID for such a job: `prefix-<hash of its SCR_PREFIX>`. A
relaunch writing to the same prefix is the same job and finds its own cache again; a job with
another prefix gets other directories. Set SCR_JOB_ID yourself to choose otherwise.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

RESOURCE_MANAGER_IDS = ("SLURM_JOBID", "SLURM_JOB_ID", "FLUX_JOB_ID", "PBS_JOBID", "LSB_JOBID")
MAX_CONF_BYTES = 1 << 20  # a user config file larger than this is not scanned for SCR_PREFIX


def own_job_id(environ: Mapping[str, str], user_sets: list[str], cwd: str) -> str | None:
    """`SCR_JOB_ID=prefix-<hash>` for SCR_Config, or None when SCR has a job id already: a
    resource manager's, or SCR_JOB_ID from the environment, the user config file or the
    application's own `config()`."""
    if any(environ.get(name) for name in ("SCR_JOB_ID", *RESOURCE_MANAGER_IDS)):
        return None
    conf = _conf_values(environ.get("SCR_CONF_FILE", ""))
    if "SCR_JOB_ID" in conf or "SCR_JOB_ID" in _sets(user_sets):
        return None
    # the prefix as SCR resolves it: environment, user config file, SCR_Config, working dir
    prefix = environ.get("SCR_PREFIX") or conf.get("SCR_PREFIX") or \
        _sets(user_sets).get("SCR_PREFIX") or cwd
    digest = hashlib.sha1(os.path.abspath(os.path.join(cwd, prefix)).encode()).hexdigest()
    return f"SCR_JOB_ID=prefix-{digest[:12]}"


def _sets(strings: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for text in strings:
        name, sep, value = text.partition("=")
        if sep and value.strip():
            found[name.strip()] = value.strip()
    return found


def _conf_values(path: str) -> dict[str, str]:
    """`NAME=VALUE` lines of SCR's user config file (comments and descriptor lines aside);
    {} when it cannot be read."""
    if not path:
        return {}
    try:
        with open(path, "rb") as handle:
            text = handle.read(MAX_CONF_BYTES).decode(errors="replace")
    except OSError:
        return {}
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return _sets([line for line in lines if " " not in line.partition("=")[2].strip()])
