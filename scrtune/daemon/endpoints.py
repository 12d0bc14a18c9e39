"""Where a node's daemon listens: IPC sockets in a private per-user, per-job directory by
default; TCP only when asked, on loopback unless an address is given."""

from __future__ import annotations

import contextlib
import fcntl
import logging
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


def runtime_dir(environ: Mapping[str, str] | None = None, base: str | None = None,
                serving: bool = False) -> str:
    """`$XDG_RUNTIME_DIR` (or the temp dir) / scrtune-<uid> / <job key>, created 0700.

    The job key is the scheduler's job id. Without one (plain `mpirun`) it is `nojob`, unless
    a daemon serves that already: a second daemon (`serving`) then takes `nojob-<its parent
    pid>` (the job script's shell), and clients take the `nojob-<pid>` of their nearest
    ancestor that a daemon serves, so each job script's processes find their own daemon.

    Where the directory is someone else's (another user made /tmp/scrtune-<uid> first, to read
    or stop the daemon) or others may enter it, it is never used: the fallback is
    ~/.scrtune/run/<job key>, which the daemon, its clients and the CLI all pick the same way,
    with a warning that says why. Neither usable: UsageError, naming both."""
    environ = os.environ if environ is None else environ
    root = base or _runtime_root(environ)
    parent = os.path.join(root, f"scrtune-{os.getuid()}")
    path = os.path.join(parent, _job_key(parent, environ, serving))
    try:
        return _private_path(path)
    except UsageError as problem:
        home = environ.get("HOME") or os.path.expanduser("~")
        parent = os.path.join(home, ".scrtune", "run")
        fallback = os.path.join(parent, _job_key(parent, environ, serving))
        try:
            _private_path(fallback)
        except UsageError as second:
            raise UsageError(f"{problem}; and the fallback {second}") from None
        logging.getLogger("scrtune").warning("scrtune: not using %s (%s); using %s", path,
                                             problem, fallback)
        return fallback


def _runtime_root(environ: Mapping[str, str]) -> str:
    """`$XDG_RUNTIME_DIR` where it exists, else the temp dir. `sbatch` passes the login
    shell's XDG_RUNTIME_DIR to compute nodes, where it does not exist: creating it there would
    fall back to the (shared) home directory on every node."""
    xdg = environ.get("XDG_RUNTIME_DIR", "")
    return xdg if xdg and os.path.isdir(xdg) else tempfile.gettempdir()


def local_task(environ: Mapping[str, str]) -> int:
    """This process's task number on its node when a launcher started several (Slurm's
    SLURM_LOCALID, Flux's FLUX_TASK_LOCAL_ID), else 0."""
    for name in ("SLURM_LOCALID", "FLUX_TASK_LOCAL_ID"):
        value = environ.get(name, "")
        if value.isdigit():
            return int(value)
    return 0


def _job_key(parent: str, environ: Mapping[str, str], serving: bool) -> str:
    key = job_key(environ)
    if key != "nojob" or not is_private(parent):
        return key
    if serving:
        return f"nojob-{os.getppid()}" if _served(os.path.join(parent, key)) else key
    for pid in _ancestors():
        if _served(os.path.join(parent, f"nojob-{pid}")):
            return f"nojob-{pid}"
    return key


def _served(directory: str) -> bool:
    """A live daemon holds the lock of `directory` (see hold_lock)."""
    try:
        fd = os.open(os.path.join(directory, "daemon.lock"),
                     os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False  # taken at once: nobody holds it
    except BlockingIOError:
        return True
    finally:
        os.close(fd)


def _ancestors(limit: int = 64) -> list[int]:
    """This process's parent, its parent, ... (Linux /proc); [] where that cannot be read."""
    found, pid = [], os.getppid()
    while pid > 1 and len(found) < limit:
        found.append(pid)
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                pid = int(handle.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return found


def is_private(directory: str) -> bool:
    """A directory of this user's that no one else may enter, as a daemon's is (not a
    symbolic link to one: the link's owner could point it elsewhere)."""
    try:
        info = os.lstat(directory)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == os.getuid() and \
        not info.st_mode & 0o077


def _private_path(path: str) -> str:
    """`path` and its parent made 0700 where missing; UsageError if either is not a private
    directory of ours, or is a symbolic link: another user may plant `/tmp/scrtune-<uid>` as a
    link to a directory of ours (`~/.ssh`), then swap it for one holding a fake daemon."""
    try:  # the root: the temp dir, or ~/.scrtune for the fallback
        os.makedirs(os.path.dirname(os.path.dirname(path)), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{path}: cannot create its parents: {exc.strerror or exc}") from None
    for directory in (os.path.dirname(path), path):
        _make_private(directory)
        _check_private(directory, follow=False)
    return path


def _make_private(directory: str) -> None:
    """mkdir 0700 (the umask can only take bits away); one that exists is checked after."""
    try:
        os.mkdir(directory, 0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        raise UsageError(f"{directory}: cannot create it: {exc.strerror or exc}") from None


def hold_lock(directory: str) -> int:
    """One daemon per directory: an exclusive lock on DIR/daemon.lock, held for the process's
    life (the returned descriptor stays open), with the holder's pid inside. A second daemon
    would otherwise take over the IPC sockets and overwrite the first one's state."""
    path = os.path.join(directory, "daemon.lock")
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        raise UsageError(f"{path}: cannot open it: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        raise UsageError(f"{directory}: another scrtune daemon (pid {holder}) serves it; stop "
                         "it, or give this one another --dir") from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


def tcp_endpoint(host: str, port: int) -> str:
    """ZeroMQ's form: IPv6 addresses in brackets."""
    return f"tcp://[{host}]:{port}" if ":" in host else f"tcp://{host}:{port}"


def parse_tcp(text: str) -> tuple[str, int]:
    """`PORT`, `HOST:PORT`, `[V6]:PORT` or `V6:PORT` (the last colon ends the host)."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") or "127.0.0.1"
    try:
        number = int(port)
    except ValueError:
        raise UsageError(f"--tcp {text}: expected PORT, HOST:PORT or [IPV6]:PORT") from None
    if not 1 <= number < 65535:  # events listen on PORT+1
        raise UsageError(f"--tcp {text}: PORT must be 1-65534 (events use PORT+1)")
    return host, number


def check_event_endpoint(text: str, option: str = "--dftracer-endpoint") -> str:
    """An extra address to take events on: tcp://HOST:PORT or ipc://PATH."""
    scheme, sep, rest = text.partition("://")
    if scheme == "ipc" and sep and rest:
        return text
    if scheme == "tcp" and sep:
        host, _, port = rest.rpartition(":")
        if host and port.isdigit() and 1 <= int(port) <= 65535:
            return text
    raise UsageError(f"{option} {text}: expected tcp://HOST:PORT or ipc://PATH")


def _own_directory(directory: str) -> str:
    """An explicit --dir / $SCRTUNE_DIR: created 0700, and refused when someone else owns it or
    others may enter it (its sockets accept records, its store holds the job's history).
    Missing parents are made 0700 too, whatever the umask (os.makedirs would make them
    0777 minus the umask: group- or world-writable under umask 002 or 000), but never at the
    root: `--dir /nonexistent/d` is a typo, not a request for /nonexistent (issue 49)."""
    if not os.path.isdir(directory):
        missing = []
        level = os.path.abspath(directory)
        while not os.path.lexists(level) and level != os.path.dirname(level):
            missing.append(level)
            level = os.path.dirname(level)
        if level == os.path.dirname(level) and missing:  # a top-level directory is a typo
            raise UsageError(f"--dir {directory}: {missing[-1]} does not exist, and scrtune "
                             "makes no directory at the file system's root")
        for level in reversed(missing):
            _make_private(level)
    _check_private(directory)
    return directory


def _check_private(directory: str, follow: bool = True) -> None:
    info = os.stat(directory) if follow else os.lstat(directory)
    mode = stat.S_IMODE(info.st_mode)
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"{directory}: a symbolic link (uid {info.st_uid}'s), never followed "
                         "there: remove it, or give a directory of your own (--dir or "
                         "SCRTUNE_DIR)")
    if not stat.S_ISDIR(info.st_mode):
        raise UsageError(f"{directory}: not a directory")
    if info.st_uid != os.getuid():
        raise UsageError(f"{directory}: owned by uid {info.st_uid}, not you: give a directory "
                         "of your own (--dir or SCRTUNE_DIR)")
    if mode & 0o077:
        raise UsageError(f"{directory}: mode {mode:04o} lets others in: chmod 700 it, or give "
                         "another directory")


def default_endpoints(directory: str | None = None, tcp: str | None = None,
                      extra_events: tuple[str, ...] = (), serving: bool = False) -> Endpoints:
    """IPC in `directory` (default: runtime_dir(); `serving` for the daemon), or TCP at `tcp`
    (see parse_tcp; requests on PORT, events on PORT+1). The directory holds state and the
    log in both cases."""
    extra_events = tuple(check_event_endpoint(e) for e in extra_events)
    directory = _own_directory(directory) if directory else runtime_dir(serving=serving)
    if not tcp and not serving:  # a daemon serving this directory on TCP says where
        tcp = _tcp_of(directory)
    if tcp:
        host, port = parse_tcp(tcp)
        return Endpoints(tcp_endpoint(host, port), (tcp_endpoint(host, port + 1), *extra_events),
                         directory)
    return Endpoints(f"ipc://{directory}/requests.sock",
                     (f"ipc://{directory}/events.sock", *extra_events), directory)


TCP_FILE = "tcp"  # in a daemon's directory: the [HOST:]PORT it serves on, with --tcp


def _tcp_of(directory: str) -> str | None:
    """The [HOST:]PORT a daemon on TCP wrote in its (private) directory: a regular file of
    ours, one short line, or nothing (issue 49: `status --dir D` of a --tcp daemon waited
    on an IPC socket that was never there)."""
    path = os.path.join(directory, TCP_FILE)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid() or info.st_size > 300:
            return None
        text = os.read(fd, 300).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    try:
        parse_tcp(text)
    except UsageError:
        return None
    return text


def announce_tcp(endpoints: Endpoints, tcp: str | None) -> None:
    """Write where a daemon on TCP serves, for clients given only its directory."""
    if tcp:
        from scrtune.daemon.state import replace_file

        replace_file(os.path.join(endpoints.directory, TCP_FILE), tcp + "\n")


def remove_socket_files(endpoints: Endpoints) -> None:
    """Unlink the IPC socket files a stopping daemon bound: libzmq (since 4.2) leaves them
    behind on close and on unbind. Called under the directory's lock, so no other daemon can
    have bound them since; only sockets are removed, never a file put in their place."""
    if not endpoints.requests.startswith("ipc://"):  # the TCP announcement goes with it
        with contextlib.suppress(OSError):
            os.unlink(os.path.join(endpoints.directory, TCP_FILE))
    for endpoint in (endpoints.requests, *endpoints.events):
        if not endpoint.startswith("ipc://"):
            continue
        path = endpoint.removeprefix("ipc://")
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):
                os.unlink(path)
        except OSError as exc:  # gone already, or not ours to remove: harmless either way
            logging.getLogger("scrtune.daemon").debug("left %s: %s", path, exc)
