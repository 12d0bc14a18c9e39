"""benchmarks/forked.py: model_holdout's fits side by side in forked workers, each result the
same bytes whichever process made it, and the parent making what a worker did not return."""

from __future__ import annotations

import os

from tests.grid_reports import benchmark_module

forked = benchmark_module("forked")


def _pid() -> bytes:
    return str(os.getpid()).encode()


def test_each_worker_takes_every_nth_task_and_the_results_come_back_in_order():
    here = _pid()
    results = forked.each([_pid] * 7, 3)
    assert len(results) == 7
    assert results[0] == results[3] == results[6] == here  # worker 0 is this process
    assert results[1] == results[4] and results[2] == results[5]
    assert len({here, results[1], results[2]}) == 3  # two other processes
    assert forked.each([_pid] * 4, 1) == [here] * 4


def test_results_larger_than_a_pipe_holds_arrive_whole():
    def big(index: int):
        return lambda: bytes([index]) * (3 << 20)  # 3 MiB: a pipe holds 64 KiB

    results = forked.each([big(index) for index in range(5)], 2)
    assert results == [bytes([index]) * (3 << 20) for index in range(5)]


def test_a_worker_that_dies_leaves_its_tasks_to_the_parent():
    parent = os.getpid()

    def dies_in_a_worker() -> bytes:
        if os.getpid() != parent:
            os._exit(3)
        return b"made here"

    def killed_in_a_worker() -> bytes:
        if os.getpid() != parent:
            os.kill(os.getpid(), 9)
        return b"made here too"

    assert forked.each([dies_in_a_worker] * 4, 2) == [b"made here"] * 4
    assert forked.each([killed_in_a_worker] * 3, 3) == [b"made here too"] * 3


def test_a_worker_whose_task_raises_leaves_its_tasks_to_the_parent():
    parent = os.getpid()

    def raises_in_a_worker() -> bytes:
        if os.getpid() != parent:
            raise RuntimeError("in the worker")
        return b"ok"

    assert forked.each([raises_in_a_worker] * 2, 2) == [b"ok", b"ok"]
