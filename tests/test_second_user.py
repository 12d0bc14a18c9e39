"""Issue 45, "another local user": a second user plants `/tmp/scrtune-<uid>` as a symbolic link
to a private directory of the victim's (`~/.ssh`), then swaps it for a directory holding a fake
daemon. Run for real: the attacker is uid 65534 (its own processes, `ln` and `mkdir`), the
victim this test's user with a real daemon and real clients, no XDG_RUNTIME_DIR (as under
Slurm). Needs root to act as two users: CI runs as root."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
import zmq

from tests.conftest import SCRTUNE, ChildLog

ATTACKER = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="acting as a second user needs root")


def as_attacker(*argv: str) -> None:
    def drop() -> None:
        os.setgroups([])
        os.setgid(ATTACKER)
        os.setuid(ATTACKER)

    subprocess.run(argv, preexec_fn=drop, check=True, timeout=30)


@pytest.fixture
def shared_tmp():
    """A sticky world-writable directory, as /tmp is, that both users can reach."""
    base = tempfile.mkdtemp(prefix="scrtune-2nd-", dir="/tmp")
    os.chmod(base, 0o1777)
    yield base
    shutil.rmtree(base, ignore_errors=True)


class Fake:
    """The attacker's daemon: counts what reaches it."""

    def __init__(self, path: str) -> None:
        self.received = 0
        self._socket = zmq.Context.instance().socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(f"ipc://{path}")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if self._socket.poll(50):
                self._socket.recv_multipart()
                self.received += 1

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._socket.close()


CLIENT = """
import json, sys
from scrtune.client import DaemonClient
client = DaemonClient(timeout_s=2, retries=1, spool_dir="")
status = client.status()
recorded = client.record("job", "job_started", 1.0)
print(json.dumps({"endpoint": client.endpoint, "pid": status.result["pid"] if status else None,
                  "recorded": bool(recorded and recorded.ok)}))
"""


def test_a_planted_link_and_its_swap_never_reach_the_victims_daemon_or_clients(
        shared_tmp, short_tmp) -> None:
    secret = tempfile.mkdtemp(prefix="victim-ssh-")  # the victim's own 0700 directory
    home = Path(short_tmp) / "home"  # its daemon's sockets go below it
    home.mkdir(mode=0o700)
    link = os.path.join(shared_tmp, f"scrtune-{os.getuid()}")
    as_attacker("ln", "-s", secret, link)
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SCRTUNE_", "SLURM_", "XDG_", "SCR_"))}
    env.update(TMPDIR=shared_tmp, HOME=str(home))
    log = ChildLog()
    daemon = subprocess.Popen([*SCRTUNE, "daemon", "--foreground"], env=env, stderr=log.file,
                              text=True)
    fake = None
    try:
        served = home / ".scrtune" / "run" / "nojob" / "requests.sock"
        deadline = time.monotonic() + 60
        while not served.exists() and daemon.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert served.exists(), log.read()
        assert os.listdir(secret) == []  # nothing of the daemon's in the victim's ~/.ssh
        assert "symbolic link" in log.read()
        # the swap: the link now names the attacker's directory, with a daemon of theirs
        evil = os.path.join(shared_tmp, "evil")
        as_attacker("mkdir", "-p", "-m", "0777", os.path.join(evil, "nojob"))
        fake = Fake(os.path.join(evil, "nojob", "requests.sock"))
        as_attacker("ln", "-sfn", evil, link)
        client = subprocess.run([sys.executable, "-c", CLIENT], env=env, capture_output=True,
                                text=True, timeout=120)
        assert client.returncode == 0, client.stderr
        answer = __import__("json").loads(client.stdout)
        assert answer == {"endpoint": f"ipc://{served}", "pid": daemon.pid, "recorded": True}
        assert fake.received == 0
    finally:
        if fake is not None:
            fake.close()
        daemon.terminate()
        daemon.wait(timeout=30)
        log.close()
        shutil.rmtree(secret, ignore_errors=True)


def test_a_daemon_directory_made_under_a_loose_umask_has_private_parents(tmp_path) -> None:
    """`--dir a/x/y` under umask 000 once made a/ and a/x world-writable (os.makedirs gives its
    mode to the last level only): another user could replace y's parent."""
    target = tmp_path / "a" / "x" / "y"
    code = ("import os; os.umask(0); from scrtune.daemon.endpoints import default_endpoints; "
            f"default_endpoints({str(target)!r})")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
    for level in (tmp_path / "a", tmp_path / "a" / "x", target):
        assert oct(level.stat().st_mode & 0o777) == oct(0o700), level
