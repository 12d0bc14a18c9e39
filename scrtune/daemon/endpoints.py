"""Where a node's daemon listens: IPC sockets in a private per-user, per-job directory by
default; TCP only when asked, on loopback unless an address is given."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass

from scrtune.errors import UsageError


@dataclass(frozen=True)
class Endpoints:
    requests: str  # ROUTER: hello, status, recommend, record
    events: tuple[str, ...]  # PULL: event batches and trace-line buffers
    directory: str


def job_key(environ: Mapping[str, str]) -> str:
    for name in ("SLURM_JOB_ID", "SLURM_JOBID", "FLUX_JOB_ID", "PBS_JOBID", "LSB_JOBID"):
        if environ.get(name):
            return "".join(c if c.isalnum() or c in "._-" else "_" for c in environ[name])
    return "nojob"


def runtime_dir(environ: Mapping[str, str] | None = None, base: str | None = None) -> str:
    """`$XDG_RUNTIME_DIR` (or the temp dir) / scrtune-<uid> / <job id>, created 0700; refused
    if someone else owns it or others may enter it."""
    environ = os.environ if environ is None else environ
    root = base or environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()
    path = os.path.join(root, f"scrtune-{os.getuid()}", job_key(environ))
    for directory in (os.path.dirname(path), path):
        # makedirs applies its mode to the last level only: make each level ourselves.
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise UsageError(f"{directory}: cannot create it: {exc.strerror or exc}") from None
    for directory in (os.path.dirname(path), path):
        info = os.stat(directory)
        if info.st_uid != os.getuid() or stat.S_IMODE(info.st_mode) & 0o077:
            raise UsageError(f"{directory}: must be owned by you and closed to others (0700)")
    return path


def default_endpoints(directory: str | None = None, tcp: str | None = None,
                      extra_events: tuple[str, ...] = ()) -> Endpoints:
    """IPC in `directory` (default: runtime_dir()), or TCP at `tcp` ("PORT" on loopback, or
    "HOST:PORT" for requests, events on PORT+1)."""
    if tcp:
        host, _, port = tcp.rpartition(":")
        host = host or "127.0.0.1"
        try:
            number = int(port)
        except ValueError:
            raise UsageError(f"--tcp {tcp}: expected PORT or HOST:PORT") from None
        if not 1 <= number < 65535:  # events listen on PORT+1
            raise UsageError(f"--tcp {tcp}: PORT must be 1-65534 (events use PORT+1)")
        return Endpoints(f"tcp://{host}:{number}", (f"tcp://{host}:{number + 1}", *extra_events),
                         directory or runtime_dir())
    directory = directory or runtime_dir()
    if directory and not os.path.isdir(directory):
        try:
            os.makedirs(directory, mode=0o700, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"{directory}: cannot create it: {exc.strerror or exc}") from None
    return Endpoints(f"ipc://{directory}/requests.sock",
                     (f"ipc://{directory}/events.sock", *extra_events), directory)
