from __future__ import annotations

import contextlib
import glob
import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable

import pytest

from tests.alone import held_for, make_locks, remove_locks, removes_segments

DATA = os.path.join(os.path.dirname(__file__), "data")

# The installed console script, as a user runs it. `python -m scrtune` from the source tree would
# import the tree's `scrtune/` and hide what the installed wheel lacks.
_SCRIPT = os.path.join(os.path.dirname(sys.executable), "scrtune")
SCRTUNE: tuple[str, ...] = \
    (_SCRIPT,) if os.path.exists(_SCRIPT) else (sys.executable, "-m", "scrtune")


def data(*parts: str) -> str:
    return os.path.join(DATA, *parts)


class ChildLog:
    """A child process's stderr in a file the child appends to (O_APPEND) and the test reads
    through a descriptor of its own. Reading through the child's (`seek(0)`, `read()`) moved
    the offset the child writes at: a line the daemon wrote next overwrote the log's start and
    the read began mid-line (a CI failure of test_second_user)."""

    def __init__(self) -> None:
        self.file = tempfile.NamedTemporaryFile("a", prefix="scrtune-child-", suffix=".log")

    def read(self) -> str:
        with open(self.file.name, errors="replace") as handle:
            return handle.read()

    def close(self) -> None:
        self.file.close()


def wait_until(ready: Callable[[], bool], timeout_s: float, failure: Callable[[], str],
               possible: Callable[[], bool] = lambda: True, poll_s: float = 0.05) -> None:
    """Poll until `ready()`; fail with `failure()` once `possible()` says it cannot come true
    (a child that exited, a job that ended) or after `timeout_s`. A bound on a wait, not a
    speed goal: callers give minutes where seconds do, so a busy machine does not fail it."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if not possible():
            pytest.fail(failure())
        if time.monotonic() >= deadline:
            pytest.fail(f"not ready after {timeout_s:.0f} s: {failure()}")
        time.sleep(poll_s)


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now: the kernel's choice, not one derived from the pid,
    which could fall in the ephemeral range and meet a port another test's connection holds."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def only_file(folder: str) -> str:
    files = sorted(os.listdir(data(folder)))
    return data(folder, [f for f in files if ".pfw" in f][0])


@pytest.fixture(scope="session")
def workload():
    """The seed grid's (tests/data/real_scr_grid) profile, its trace's workload, its tiers'
    costs and its metadata call's seconds: what the calibration tests fit to."""
    from tests.grid_reports import seed_workload  # it reads data() from this module

    return seed_workload()


@pytest.fixture
def run_cli():
    """Run the real `scrtune` command in a subprocess; returns CompletedProcess."""
    import subprocess

    def run(*args: str, env: dict | None = None, timeout: float = 120):
        return subprocess.run(
            [*SCRTUNE, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
        )

    return run


# The real SCR library (issue 11): an install prefix with lib/libscr.so and SCR's Python module
# under share/scr/python, built with the MPI that mpi4py uses. .ci/run builds the vendored
# v3.1.0 and sets both variables; on a cluster, point SCRTUNE_SCR_PREFIX at its SCR
# (`spack location -i scr`). Where SCRTUNE_REQUIRE_REAL_SCR=1, a missing SCR fails the test
# instead of skipping it, so CI cannot pass without running them.
SCR_PREFIX_ENV = "SCRTUNE_SCR_PREFIX"


def real_scr_prefix() -> str | None:
    prefix = os.environ.get(SCR_PREFIX_ENV, "")
    if prefix and os.path.exists(os.path.join(prefix, "lib", "libscr.so")) and \
            os.path.exists(os.path.join(prefix, "share", "scr", "python", "scr.py")):
        return prefix
    return None


def require_real_scr() -> str:
    """The real SCR's install prefix, or a skip (a failure where it is required). For tests
    that cannot take the fixture (inside @given)."""
    prefix = real_scr_prefix()
    if prefix is None:
        part_missing(f"no real SCR: set {SCR_PREFIX_ENV} to an SCR v3 install prefix built "
                     "with the MPI mpi4py uses (.ci/run builds ../shared/vendor/scr)",
                     "SCRTUNE_REQUIRE_REAL_SCR")
    return prefix


def part_missing(why: str, required_by: str) -> None:
    """Skip for a real part that is absent, or fail where the environment variable
    `required_by` is 1 (CI, which builds or starts every part)."""
    if os.environ.get(required_by) == "1":
        pytest.fail(why)
    pytest.skip(why)


@pytest.fixture
def real_scr() -> str:
    """The real SCR's install prefix, or a skip (a failure where it is required)."""
    return require_real_scr()


def benchmark_job(real_scr: str, tmp_path, monkeypatch, *app_args: str,
                  trim_cache_s: float = 0.0, pfs_call_us: int = 2000):
    """The benchmark job of benchmarks/real_scr_tuning.py on the real SCR (2 ranks on 2 fake
    nodes, a `pfs_call_us` call to its parallel file system under tmp_path): (the module, its
    Bench). trim_cache_s: drop the clean page cache that often while a job runs (root). The
    caller removes bench.work."""
    import argparse
    import importlib

    monkeypatch.setenv("SCRTUNE_SCR_PREFIX", real_scr)
    root = os.path.dirname(os.path.dirname(os.path.abspath(DATA)))
    monkeypatch.syspath_prepend(os.path.join(root, "benchmarks"))
    tuning = importlib.import_module("real_scr_tuning")
    args = argparse.Namespace(pfs=str(tmp_path / "pfs"), pfs_call_us=pfs_call_us,
                              flush_ends=False,
                              trim_cache_s=trim_cache_s, calibrate_with=None,
                              app_args=list(app_args))
    os.makedirs(args.pfs)
    return tuning, tuning.Bench(args)


def scr_environment(scr_prefix: str, control_dir, **extra: str) -> dict[str, str]:
    """This process's environment for a job of the real SCR: none of the caller's SCR_*
    settings, a USER (SCR_Init aborts without one), a private control directory."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCR_")}
    env.update(USER=os.environ.get("USER") or "scrtune", SCRTUNE_SCR_PREFIX=scr_prefix,
               SCR_CNTL_BASE=str(control_dir), **extra)
    return env


@pytest.fixture
def short_tmp():
    """A folder of the test's own whose path leaves room for the Unix sockets a daemon makes
    in it (sockaddr_un holds 107 bytes): tmp_path under pytest-xdist's popen-gwN/ may not."""
    folder = tempfile.mkdtemp(prefix="scrtune-t-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def daemon(tmp_path):
    """A real daemon subprocess on its own directory: (directory, process)."""
    from tests.test_daemon import start_daemon, stop

    directory = str(tmp_path / "d")
    os.makedirs(directory, mode=0o700)
    proc = start_daemon(directory)
    yield directory, proc
    if proc.poll() is None:
        stop(proc)


# DFTracer's ZeroMQ writer (issue 47): an install prefix of ../shared/vendor/dftracer-zmq's
# build.sh (lib/libdftracer_preload.so, python-site/ for the Python module), and beside it
# PREFIX-stdio, the same sources with the file writer (WRITER=STDIO), whose traces are the
# ground truth (the released wheel intercepts fewer calls: no stat64). .ci/run builds both
# and sets both variables.
DFTRACER_ZMQ_PREFIX_ENV = "SCRTUNE_DFTRACER_ZMQ_PREFIX"


@pytest.fixture
def dftracer_zmq() -> str:
    """The ZeroMQ writer's install prefix, or a skip (a failure where it is required)."""
    prefix = os.environ.get(DFTRACER_ZMQ_PREFIX_ENV, "")
    if not (prefix and all(os.path.exists(os.path.join(built, "lib", "libdftracer_preload.so"))
                           for built in (prefix, f"{prefix}-stdio"))):
        part_missing(f"no DFTracer ZeroMQ writer: set {DFTRACER_ZMQ_PREFIX_ENV} to the prefix "
                     "../shared/vendor/dftracer-zmq/build.sh made, and PREFIX-stdio with "
                     "WRITER=STDIO (.ci/run builds both)",
                     "SCRTUNE_REQUIRE_DFTRACER_ZMQ")
    return prefix


# A running Slurm with several nodes (issue 42): on this machine the fake cluster of
# ../shared/slurm (start-slurm.sh: one slurmd per fake node, each with its own host name and
# /dev/shm), which .ci/run installs and starts. Where SCRTUNE_REQUIRE_SLURM=1 a missing cluster
# fails the test instead of skipping it.
SLURM_STATE = os.environ.get("SCRTUNE_SLURM_STATE", "/tmp/slurm-ci")


def slurm_idle_nodes() -> list[str]:
    import subprocess

    if shutil.which("sinfo") is None or shutil.which("sbatch") is None:
        return []
    try:
        listed = subprocess.run(["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"],
                                capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sorted(set(listed.stdout.split())) if listed.returncode == 0 else []


@pytest.fixture(scope="session")
def slurm_nodes() -> list[str]:
    """The idle nodes of a running Slurm (at least 2), or a skip (a failure where required)."""
    nodes = slurm_idle_nodes()
    if len(nodes) < 2:
        part_missing(f"no Slurm with 2 idle nodes (found {nodes or 'none'}): start one with "
                     "../shared/slurm/start-slurm.sh as root (.ci/run does)",
                     "SCRTUNE_REQUIRE_SLURM")
    return nodes


# MPICH keeps its node's shared-memory segment (/dev/shm/mpich_shm_*) until MPI_Finalize: the
# ranks these tests SIGKILL (a node's failure) leave theirs behind, 17 of 2 MiB a run of
# test_goodput_truth, about 25 a whole run: memory a developer's machine lost at every run.
MPICH_SEGMENTS = "/dev/shm/mpich_shm_*"


def mapped_segments() -> set[str]:
    """The MPICH segments some live process maps (its ranks attach them at MPI_Init)."""
    mapped: set[str] = set()
    for maps in glob.glob("/proc/[0-9]*/maps"):
        with contextlib.suppress(OSError):
            with open(maps) as handle:
                mapped.update(line.split(None, 5)[5].strip() for line in handle
                              if "/dev/shm/mpich_shm_" in line and len(line.split(None, 5)) > 5)
    return mapped


# Another test run on the machine (a developer's beside CI) removes orphans too: one that a
# test here is still looking at went missing (test_mpich_segments, 2026-11-28). A test that
# watches a killed job's segment holds this lock; removal waits for it, boundedly.
SEGMENTS_LOCK = os.path.join(tempfile.gettempdir(), "scrtune-tests-mpich-segments.lock")
SEGMENTS_LOCK_WAIT_S = 300.0


@contextlib.contextmanager
def segments_locked():
    """Hold the machine-wide lock on removing MPICH segments. After SEGMENTS_LOCK_WAIT_S
    without it, go on unlocked rather than hang the run."""
    import fcntl

    with open(SEGMENTS_LOCK, "a") as handle:
        deadline = time.monotonic() + SEGMENTS_LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() > deadline:
                    break
                time.sleep(0.1)
        yield  # closing the file releases the lock


def remove_orphan_segments(before: set[str]) -> list[str]:
    """Remove the MPICH segments made since `before` that no live process maps (a job's
    killed ranks': nothing will attach them again), under the lock; the removed ones."""
    if not set(glob.glob(MPICH_SEGMENTS)) - before:
        return []
    with segments_locked():
        return unlink_orphan_segments(before)


def unlink_orphan_segments(before: set[str]) -> list[str]:
    """remove_orphan_segments for a caller that holds segments_locked() already."""
    orphans = sorted(set(glob.glob(MPICH_SEGMENTS)) - before - mapped_segments())
    for path in orphans:
        with contextlib.suppress(OSError):
            os.unlink(path)
    return orphans


@pytest.fixture(autouse=True)
def _mpich_segments_of_killed_ranks(request):
    before = set(glob.glob(MPICH_SEGMENTS))
    yield
    if removes_segments(request.node):
        remove_orphan_segments(before)


# SCR's default cache base is /dev/shm/$USER; the client names a job without a resource manager
# by its prefix (SCR_JOB_ID=prefix-<hash>), so a real-SCR test's cache outlives it there
_CACHE_USERS = {os.environ.get("USER") or "scrtune", "scrtune"}  # as scr_environment sets it


def _scr_caches() -> set[str]:
    return {path for user in _CACHE_USERS for path in glob.glob(f"/dev/shm/{user}/scr.prefix-*")}


@pytest.fixture(autouse=True, scope="session")
def _leftovers_of_the_session():
    """The caches the session's jobs left in SCR's default cache base, removed at its end
    (those there before it are not the tests'); and the MPICH segments whose ranks outlived
    their test (still mapped when it ended: two a CI run) and have since died."""
    before = _scr_caches()
    segments = set(glob.glob(MPICH_SEGMENTS))
    yield
    remove_orphan_segments(segments)
    for path in sorted(_scr_caches() - before):
        shutil.rmtree(path, ignore_errors=True)
    for user in _CACHE_USERS:
        with contextlib.suppress(OSError):
            os.rmdir(f"/dev/shm/{user}")  # only when empty: nothing of anyone else's


# Parallel tests, and tests alone (tests/alone.py): the main process makes the run's locks
# before its workers start and removes them at its end; each test holds its share from its
# setup to its teardown.
_LOCKS = pytest.StashKey[str]()


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.stash[_LOCKS] = make_locks()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _LOCKS in config.stash:
        remove_locks(config.stash[_LOCKS])


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto`: the CPUs this process may use, at most 4 (each parallel test may start a
    daemon and commands of its own)."""
    return max(1, min(4, len(os.sched_getaffinity(0))))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    with held_for(item, last=nextitem is None):
        yield
