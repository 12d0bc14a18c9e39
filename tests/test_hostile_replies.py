"""Issue 45, "a reply from a daemon": a daemon's answer is hostile until checked. A fake daemon
on a real ZeroMQ socket answers TunedSCR with hostile shapes and values; nothing may raise into
the training loop, and nothing may reach SCR that scrtune's intents do not produce within their
ranges. The oracle is this file's own list of what a recommendation may set, not the client's.
"""

from __future__ import annotations

import copy
import math
import random
import subprocess
import sys
import threading

import msgspec
import pytest
import zmq

from scrtune.client import DaemonClient, TunedSCR
from scrtune.daemon.protocol import Reply, encode
from tests.scr_double import ScrDouble

# What the intents set (scr_config/mapping.py), with the ranges this test holds them to.
MAY_SET = {"SCR_CACHE_BYPASS": (0, 1), "SCR_COPY_TYPE": None, "SCR_SET_SIZE": (1, 1024),
           "SCR_SET_FAILURES": (1, 1024), "SCR_FILE_BUF_SIZE": None, "SCR_MPI_BUF_SIZE": None,
           "SCR_FLUSH": (1, 10), "SCR_FLUSH_TYPE": None, "SCR_FLUSH_ASYNC": (0, 1),
           "SCR_CACHE_SIZE": (1, 64), "SCR_CHECKPOINT_SECONDS": (1, 86400),
           "SCR_PREFIX_SIZE": (0, 64), "SCR_CACHE_BASE": None}
GOOD = {"config_id": "abc123", "scr": {"SCR_CACHE_BYPASS": "0", "SCR_FLUSH": "4",
                                       "SCR_CHECKPOINT_SECONDS": "30", "descriptors": []},
        "runtime_actions": [{"kind": "flush_every", "every": 2},
                            {"kind": "checkpoint_every_s", "seconds": 30},
                            {"kind": "transfer_thread_affinity", "cores": [0]}]}


def _with(**changes) -> dict:
    answer = copy.deepcopy(GOOD)
    for key, value in changes.items():
        if key == "scr":
            answer["scr"].update(value)
        else:
            answer[key] = value
    return answer


def _action(**fields) -> dict:
    return _with(runtime_actions=[fields])


NAN, INF = math.nan, math.inf
HOSTILE = {
    "scalar": 1, "string": "x", "list": [], "scr-null": {**GOOD, "scr": None},
    "scr-list": {"scr": [], "runtime_actions": []},
    "scr-int-value": _with(scr={"SCR_FLUSH": 4}),
    "scr-nan-value": _with(scr={"SCR_CHECKPOINT_SECONDS": NAN}),
    "user-name-path": _with(scr={"SCR_USER_NAME": "../../../root/x"}),
    "job-name-path": _with(scr={"SCR_JOB_NAME": "../../etc"}),
    "enable-off": _with(scr={"SCR_ENABLE": "0"}),
    "flush-off": _with(scr={"SCR_FLUSH": "0"}),
    "cadence-31-years": _with(scr={"SCR_CHECKPOINT_SECONDS": "999999999"}),
    "prefix-size-1": _with(scr={"SCR_PREFIX_SIZE": "1"}),
    "store-descriptor": _with(scr={"descriptors": [{"kind": "STORE", "value": "/dev/shm",
                                                     "keys": {"COUNT": "9"}}]}),
    "descriptors-string": _with(scr={"descriptors": "CKPT=0"}),
    "descriptor-no-value": _with(scr={"descriptors": [{"kind": "CKPT"}]}),
    "many-params": _with(scr={f"SCR_X{i}": "1" for i in range(500)}),
    "actions-dict": _with(runtime_actions={"kind": "flush_every"}),
    "action-int": _with(runtime_actions=[1]),
    "every-string": _action(kind="flush_every", every="2"),
    "every-nan": _action(kind="flush_every", every=NAN),
    "every-inf": _action(kind="flush_every", every=INF),
    "every-huge": _action(kind="flush_every", every=2 ** 64 - 1),
    "seconds-nan": _action(kind="checkpoint_every_s", seconds=NAN),
    "seconds-negative": _action(kind="checkpoint_every_s", seconds=-5),
    "seconds-float": _action(kind="checkpoint_every_s", seconds=1e308),
    "cores-string": _action(kind="transfer_thread_affinity", cores="0-3"),
    "cores-nan": _action(kind="transfer_thread_affinity", cores=[NAN]),
    "cores-negative": _action(kind="transfer_thread_affinity", cores=[-1]),
    "stripe-nan": _action(kind="stripe", stripe_count=NAN, stripe_size_bytes=1 << 20),
    "unknown-action": _action(kind="run", command="id"),
    "config-id-dict": _with(config_id={"a": 1}),
    "config-id-long": _with(config_id="x" * 10_000),
    "nested": _with(scr={"descriptors": [[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]}),
}


class FakeDaemon:
    """A ROUTER on a real IPC socket answering every request with `answer` (the Reply's
    result), or with `raw` bytes when set."""

    def __init__(self, path: str, answer: object = None, raw: bytes | None = None) -> None:
        self.endpoint = f"ipc://{path}"
        self.answer, self.raw = answer, raw
        self.received = 0
        self._socket = zmq.Context.instance().socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(self.endpoint)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self._socket.poll(50):
                continue
            identity, data = self._socket.recv_multipart()
            self.received += 1
            request_id = msgspec.msgpack.decode(data).get("request_id", 0)
            reply = self.raw if self.raw is not None else \
                encode(Reply(request_id=request_id, ok=True, result=self.answer))
            self._socket.send_multipart([identity, reply])

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._socket.close()


def _run_job(tmp_path, daemon: FakeDaemon) -> tuple[TunedSCR, ScrDouble]:
    """What a training loop does: init, steps, three checkpoints, finalize."""
    double = ScrDouble(prefix=str(tmp_path))
    scr = TunedSCR(double, client=DaemonClient(daemon.endpoint, timeout_s=2, spool_dir=""))
    scr.init()
    for step in range(1, 4):
        scr.need_checkpoint()
        scr.start_output(f"ckpt.{step}", scr.FLAG_CHECKPOINT)
        scr.complete_output(True)
    scr.finalize()
    return scr, double


def _reached_scr_as_meant(double: ScrDouble) -> None:
    """Every parameter SCR got is one the intents set, within this test's ranges."""
    for name, value in double.params.items():
        if name == "SCR_JOB_ID":  # the client's own (scr_job.py), never a reply's
            continue
        assert name in MAY_SET or name == "CKPT", (name, value)
        bounds = MAY_SET.get(name)
        if bounds:
            assert value.isdigit() and bounds[0] <= int(value) <= bounds[1], (name, value)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_reply_is_logged_counted_and_ignored(tmp_path, name) -> None:
    """11 of 23 such shapes once raised from init() or start_output(); others reached SCR
    (SCR_USER_NAME made the real SCR create directories under ../../../root and crash)."""
    daemon = FakeDaemon(str(tmp_path / "sock"), HOSTILE[name])
    try:
        scr, double = _run_job(tmp_path, daemon)
    finally:
        daemon.close()
    _reached_scr_as_meant(double)
    assert scr.refused.count >= 1
    assert scr.applied == [a for a in scr.applied if a.startswith("SCR_JOB_ID=")]
    assert [flags for _, flags in double.outputs] == [1, 1, 1]  # the job's own, unchanged


@pytest.mark.parametrize("raw", [b"", b"\xc1", b"\x91" * 100_000, encode(Reply(
    request_id=999_999, ok=True, result=GOOD))], ids=["empty", "invalid", "deep", "other-id"])
def test_a_reply_that_is_not_one_is_no_answer(tmp_path, raw) -> None:
    daemon = FakeDaemon(str(tmp_path / "sock"), raw=raw)
    try:
        scr, double = _run_job(tmp_path, daemon)
    finally:
        daemon.close()
    assert double.params.keys() <= {"SCR_JOB_ID"}


def test_a_good_reply_over_the_same_socket_is_applied(tmp_path) -> None:
    """The control: the fake daemon's good answer reaches SCR, so the refusals above are the
    checks', not the harness's."""
    daemon = FakeDaemon(str(tmp_path / "sock"), GOOD)
    try:
        scr, double = _run_job(tmp_path, daemon)
    finally:
        daemon.close()
    assert scr.refused.count == 0
    assert double.params["SCR_FLUSH"] == "4" and double.params["SCR_CHECKPOINT_SECONDS"] == "30"
    assert [flags for _, flags in double.outputs] == [1, 3, 1]  # flush_every 2 after SCR_FLUSH 4


def _mutated(rng: random.Random) -> object:
    """GOOD with one part replaced by a value of another type or an extreme one."""
    extremes = [None, True, -1, 0, 2 ** 63, -2 ** 63, NAN, INF, -INF, 1e-300, "", "0",
                "../x", "x" * 5000, [], {}, [None], {"": None}, "SCR_ENABLE=0"]
    answer = copy.deepcopy(GOOD)
    where = rng.choice(["top", "scr", "action"])
    if where == "top":
        answer[rng.choice(["config_id", "scr", "runtime_actions", "extra"])] = rng.choice(extremes)
    elif where == "scr":
        key = rng.choice([*GOOD["scr"], "SCR_ENABLE", "SCR_USER_NAME", "SCR_CACHE_BASE",
                          "SCR_CACHE_SIZE", "SCR_PREFIX"])
        answer["scr"][key] = rng.choice(extremes + ["0", "1", "99999999", "/etc"])
    else:
        action = rng.choice(answer["runtime_actions"])
        action[rng.choice(["kind", "every", "seconds", "cores", "stripe_count"])] = \
            rng.choice(extremes + [[NAN], [-1], [2 ** 40]])
    return answer


def test_fuzzed_replies_never_raise_and_never_reach_scr_unchecked(tmp_path) -> None:
    """300 seeded mutations of a good reply, over one real socket: no call raises, and what
    reaches SCR is only what the intents may set, within range."""
    rng = random.Random(45)
    daemon = FakeDaemon(str(tmp_path / "sock"), GOOD)
    refused = 0
    try:
        for case in range(300):
            daemon.answer = _mutated(rng)
            scr, double = _run_job(tmp_path / str(case % 4), daemon)
            _reached_scr_as_meant(double)
            refused += scr.refused.count
    finally:
        daemon.close()
    assert refused > 100  # most mutations are refused; some (an extra key) are harmless


def test_a_job_script_evals_nothing_a_daemon_may_not_set(tmp_path) -> None:
    """`eval "$(scrtune query)"` in a job script: a daemon's SCR_ENABLE=0 is refused, exit 2,
    and nothing is printed to eval."""
    daemon = FakeDaemon(str(tmp_path / "sock"), _with(scr={"SCR_ENABLE": "0"}))
    try:
        query = subprocess.run([sys.executable, "-m", "scrtune", "query", "--format", "env"],
                               env={"SCRTUNE_REQUESTS": daemon.endpoint, "PATH": "/usr/bin"},
                               capture_output=True, text=True, timeout=60)
    finally:
        daemon.close()
    assert query.returncode == 2 and query.stdout == "", query
    assert "SCR_ENABLE=0" in query.stderr and len(query.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("result", [None, [], {"offsets": []}, {"offsets": {"a": "x"}},
                                    {"offsets": {"a": NAN}}, {"offsets": {"a": -1}}])
def test_a_hostile_offsets_reply_does_not_stop_the_forwarder(tmp_path, result) -> None:
    """`forward` once indexed a reply's `offsets` without looking: a TypeError ended it."""
    from scrtune.client.forward import Forwarder

    trace = tmp_path / "a.pfw"
    trace.write_text('[\n{"id":1,"name":"x","cat":"POSIX","pid":1,"tid":1,"ts":1,"dur":1}\n')
    daemon = FakeDaemon(str(tmp_path / "sock"), result)
    forwarder = Forwarder([str(trace)], f"ipc://{tmp_path / 'events'}",
                          requests=daemon.endpoint)
    try:
        forwarder.pump()
        assert forwarder.acknowledged(every_s=0) is False  # no usable answer: not acknowledged
    finally:
        forwarder.close()
        daemon.close()


def test_a_client_keeps_the_directory_it_opened_when_its_path_is_swapped(tmp_path) -> None:
    """Issue 45: the client's retry after a stall once connected to whatever the path named
    by then (a link swapped to another user's fake daemon). It reaches the daemon socket
    through the directory it opened (/proc/self/fd/N) for its life."""
    import os

    real_dir, evil_dir = tmp_path / "run", tmp_path / "evil"
    real_dir.mkdir(mode=0o700)
    evil_dir.mkdir(mode=0o700)
    real = FakeDaemon(str(real_dir / "requests.sock"), {"who": "real"})
    evil = FakeDaemon(str(evil_dir / "requests.sock"), {"who": "evil"})
    client = DaemonClient(f"ipc://{real_dir}/requests.sock", timeout_s=2, spool_dir="")
    try:
        assert client.status().result == {"who": "real"}
        os.rename(real_dir, tmp_path / "moved")  # the path now names the other directory
        os.symlink(evil_dir, real_dir)
        client._discard()  # as after a stall: the retry makes a fresh socket
        assert client.status().result == {"who": "real"}
        assert evil.received == 0 and real.received == 2
    finally:
        real.close()
        evil.close()
