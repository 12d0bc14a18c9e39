"""Tests run on every CPU (pytest-xdist, setup.cfg's `-n auto --dist loadfile`), in three kinds:

- *alone* (mark `alone`): nothing else of the run beside it. The tests whose figures are the
  machine's speed: real SCR jobs timed against each other, a core's busy share, a call's
  slowest wait, the system profile.
- *one at a time* (mark `mpi`, or a real part's fixture or mark: `real_scr`, `slurm`,
  `dftracer_zmq`): never beside another of its kind or an alone one, but beside plain tests.
  They launch MPI jobs (each test removes the MPICH segments that no live process maps, and a
  segment being made is mapped by nobody yet) or use one shared part (the Slurm cluster and
  its nodes' /dev/shm, SCR's default cache base).
- plain: beside anything but an alone test.

The workers share locks on files in a folder that the main process makes for the run (and
names to its workers in LOCKS_ENV): a readers-writer lock on the machine (a plain or one-at-a-
time test holds it shared, an alone test exclusively), a turnstile that every test passes on
its way in and that an alone test holds while it waits and runs (so that a stream of shared
holders cannot starve it), and a mutex of the one-at-a-time tests, taken first. The kernel
drops a dead worker's locks."""

from __future__ import annotations

import contextlib
import enum
import fcntl
import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

SHARED_PART_FIXTURES = frozenset({"real_scr", "slurm_nodes", "dftracer_zmq"})
SHARED_PART_MARKS = ("mpi", "real_scr", "slurm", "dftracer_zmq")
LOCKS_ENV = "SCRTUNE_TESTS_LOCKS"


class Kind(enum.Enum):
    PLAIN = "plain"
    ONE_AT_A_TIME = "one at a time"
    ALONE = "alone"


def kind_of(item: pytest.Item) -> Kind:
    if item.get_closest_marker("alone") is not None:
        return Kind.ALONE
    if SHARED_PART_FIXTURES & set(getattr(item, "fixturenames", ())) or \
            any(item.get_closest_marker(mark) is not None for mark in SHARED_PART_MARKS):
        return Kind.ONE_AT_A_TIME
    return Kind.PLAIN


def make_locks() -> str:
    """The run's lock folder, named to the workers it starts (they inherit the environment)."""
    folder = tempfile.mkdtemp(prefix="scrtune-tests-locks-")
    os.environ[LOCKS_ENV] = folder
    return folder


def remove_locks(folder: str) -> None:
    shutil.rmtree(folder, ignore_errors=True)


class MachineShare:
    """The locks of one worker: their files stay open for the worker's life."""

    def __init__(self, folder: str) -> None:
        self._files = {name: open(os.path.join(folder, name), "a")  # noqa: SIM115 - kept open
                       for name in ("parts", "turnstile", "machine")}

    def _lock(self, name: str, how: int) -> None:
        fcntl.flock(self._files[name], how)

    @contextlib.contextmanager
    def held(self, kind: Kind) -> Iterator[None]:
        taken: list[str] = []
        try:
            if kind is Kind.ONE_AT_A_TIME:  # first, so that its wait holds nothing else
                self._lock("parts", fcntl.LOCK_EX)
                taken.append("parts")
            self._lock("turnstile", fcntl.LOCK_EX)
            taken.append("turnstile")
            self._lock("machine", fcntl.LOCK_EX if kind is Kind.ALONE else fcntl.LOCK_SH)
            taken.append("machine")
            if kind is not Kind.ALONE:
                self._lock("turnstile", fcntl.LOCK_UN)
                taken.remove("turnstile")
            yield
        finally:
            for name in reversed(taken):
                self._lock(name, fcntl.LOCK_UN)


_share: MachineShare | None = None


def _in_worker() -> bool:
    return bool(os.environ.get("PYTEST_XDIST_WORKER"))


def held_for(item: pytest.Item, last: bool) -> contextlib.AbstractContextManager[None]:
    """What a test holds from its setup to its teardown; nothing without workers. A worker's
    last test is alone: the session's fixtures end in its teardown, and they remove what the
    session's jobs left (SCR caches, MPICH segments) that may still be another test's."""
    global _share
    folder = os.environ.get(LOCKS_ENV)
    if not folder or not _in_worker():
        return contextlib.nullcontext()
    if _share is None:
        _share = MachineShare(folder)
    return _share.held(Kind.ALONE if last else kind_of(item))


def removes_segments(item: pytest.Item) -> bool:
    """Whether the test removes the MPICH segments made while it ran that no live process maps:
    every test without workers; with them, only a test that may launch MPI (the others run
    beside such a test and would take its segment while it is being made)."""
    return not _in_worker() or kind_of(item) is not Kind.PLAIN
