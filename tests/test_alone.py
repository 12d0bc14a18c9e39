"""The lock that lets tests run in parallel and keeps those marked `alone` alone
(tests/alone.py): holders are real processes on one folder, as xdist's workers are, and each
waits for its release by a file the test writes, so no assertion rests on a clock."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.alone import Kind, held_for, kind_of, make_locks, remove_locks, removes_segments
from tests.conftest import wait_until

HOLDER = """
import os, sys, time
from tests.alone import Kind, MachineShare
folder, kind, name, flags = sys.argv[1], Kind(sys.argv[2]), sys.argv[3], sys.argv[4]
with MachineShare(folder).held(kind):
    with open(os.path.join(flags, "events"), "a") as log:
        log.write(f"enter {name}\\n")
    deadline = time.monotonic() + 120
    while not os.path.exists(os.path.join(flags, "release-" + name)):
        if time.monotonic() > deadline:
            sys.exit(3)
        time.sleep(0.02)
    with open(os.path.join(flags, "events"), "a") as log:
        log.write(f"leave {name}\\n")
"""
PROC_LOCKS = pytest.mark.skipif(not os.path.exists("/proc/locks"),
                                reason="no /proc/locks on this machine")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def locks(monkeypatch):
    monkeypatch.delenv("SCRTUNE_TESTS_LOCKS", raising=False)  # make_locks sets it here
    folder = make_locks()
    yield folder
    remove_locks(folder)


class Holders:
    def __init__(self, folder: str, flags: Path) -> None:
        self.folder, self.flags, self.procs = folder, flags, {}

    def start(self, name: str, kind: Kind) -> subprocess.Popen:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (
            os.environ.get("PYTHONPATH"), ROOT)))}
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-c", HOLDER, self.folder, kind.value, name,
             str(self.flags)], env=env)
        return self.procs[name]

    def events(self) -> list[str]:
        path = self.flags / "events"
        return path.read_text().splitlines() if path.exists() else []

    def wait_entered(self, name: str) -> None:
        wait_until(lambda: f"enter {name}" in self.events(), 60,
                   lambda: f"{name} did not enter: {self.events()}",
                   possible=lambda: self.procs[name].poll() is None)

    def release(self, name: str) -> None:
        (self.flags / f"release-{name}").touch()
        assert self.procs[name].wait(timeout=60) == 0
        assert f"leave {name}" in self.events()

    def wait_blocked(self, name: str) -> None:
        wait_until(lambda: self.blocked(name), 60, lambda: f"{name} never waited: "
                   f"{self.events()}", possible=lambda: self.procs[name].poll() is None)

    def blocked(self, name: str) -> bool:
        """The holder waits in flock (the kernel lists it with `->` in /proc/locks)."""
        pid = str(self.procs[name].pid)
        with open("/proc/locks") as table:
            return any("->" in line and line.split()[5] == pid for line in table)

    def stop(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@pytest.fixture
def holders(locks, tmp_path):
    made = Holders(locks, tmp_path)
    yield made
    made.stop()


def test_parallel_holders_hold_at_once(holders):
    for name in ("a", "b"):
        holders.start(name, Kind.PLAIN)
    for name in ("a", "b"):
        holders.wait_entered(name)  # both in before either leaves
    holders.release("a")
    holders.release("b")


def test_a_one_at_a_time_holder_holds_beside_plain_ones(holders):
    holders.start("plain", Kind.PLAIN)
    holders.start("mpi", Kind.ONE_AT_A_TIME)
    for name in ("plain", "mpi"):
        holders.wait_entered(name)
    holders.release("plain")
    holders.release("mpi")


@PROC_LOCKS
def test_one_at_a_time_holders_hold_one_after_the_other(holders):
    holders.start("first", Kind.ONE_AT_A_TIME)
    holders.wait_entered("first")
    holders.start("second", Kind.ONE_AT_A_TIME)
    holders.wait_blocked("second")
    holders.start("plain", Kind.PLAIN)  # the second waits holding nothing that keeps it out
    holders.wait_entered("plain")
    assert "enter second" not in holders.events()
    holders.release("first")
    holders.wait_entered("second")
    holders.release("second")
    holders.release("plain")


@PROC_LOCKS
def test_an_alone_holder_waits_for_the_others_and_keeps_them_out(holders):
    holders.start("parallel", Kind.PLAIN)
    holders.wait_entered("parallel")
    holders.start("alone", Kind.ALONE)
    holders.wait_blocked("alone")
    assert "enter alone" not in holders.events()
    holders.release("parallel")
    holders.wait_entered("alone")
    holders.start("later", Kind.PLAIN)
    holders.wait_blocked("later")
    assert "enter later" not in holders.events()
    holders.release("alone")
    holders.wait_entered("later")
    holders.release("later")
    assert holders.events() == ["enter parallel", "leave parallel", "enter alone",
                                "leave alone", "enter later", "leave later"]


@PROC_LOCKS
def test_parallel_holders_that_come_later_do_not_starve_a_waiting_alone_one(holders):
    """Linux's flock gives a shared lock beside shared holders even with an exclusive one
    waiting: without the turnstile, a stream of parallel tests would keep an alone one out."""
    holders.start("first", Kind.PLAIN)
    holders.wait_entered("first")
    holders.start("alone", Kind.ALONE)
    holders.wait_blocked("alone")
    holders.start("second", Kind.PLAIN)
    holders.wait_blocked("second")
    holders.release("first")
    holders.wait_entered("alone")
    assert "enter second" not in holders.events()
    holders.release("alone")
    holders.wait_entered("second")
    holders.release("second")


def test_a_dead_holders_share_is_given_back(holders):
    """A worker that crashed mid-test: the kernel drops its locks with its descriptors."""
    holders.start("crashed", Kind.ALONE)
    holders.wait_entered("crashed")
    holders.procs["crashed"].kill()
    holders.procs["crashed"].wait()
    holders.start("next", Kind.ALONE)
    holders.wait_entered("next")
    holders.release("next")


@pytest.mark.parametrize(("fixtures", "marks", "kind"), [
    ((), (), Kind.PLAIN),
    (("tmp_path", "run_cli"), (), Kind.PLAIN),
    (("real_scr",), (), Kind.ONE_AT_A_TIME),
    (("slurm_nodes",), (), Kind.ONE_AT_A_TIME),
    ((), ("mpi",), Kind.ONE_AT_A_TIME),
    ((), ("dftracer_zmq",), Kind.ONE_AT_A_TIME),
    (("real_scr",), ("alone",), Kind.ALONE),
    ((), ("alone",), Kind.ALONE),
])
def test_a_test_s_kind_is_its_marks_and_its_real_parts(fixtures, marks, kind, monkeypatch):
    item = _Item(fixtures, marks)
    assert kind_of(item) is kind
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    assert removes_segments(item) is (kind is not Kind.PLAIN)  # a plain test launches no MPI
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert removes_segments(item)  # one by one, every test does


def test_without_workers_nothing_is_held(monkeypatch):
    """`-n 0` (one process): the hook holds nothing, whatever the test is."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert isinstance(held_for(_Item(("real_scr",), ("alone",)), last=True),
                      contextlib.nullcontext)


class _Item:
    def __init__(self, fixtures: tuple[str, ...], marks: tuple[str, ...]) -> None:
        self.fixturenames, self._marks = fixtures, marks

    def get_closest_marker(self, name: str):
        return name if name in self._marks else None
