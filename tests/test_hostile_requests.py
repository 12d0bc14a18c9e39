"""Issue 45's fuzz campaign, the requests that are well formed: every op of the protocol as
valid msgpack, its fields replaced by wrong types and extreme values, and goodput records whose
details carry extreme numbers into the loop's decisions. A real daemon subprocess answers each
with the envelope (ok, or an error naming the request id), stays up, and answers right after;
the goodput report of its store still runs."""

from __future__ import annotations

import json
import math
import random
import subprocess

import msgspec
import pytest
import zmq

from scrtune.daemon.endpoints import default_endpoints
from scrtune.daemon.protocol import COMMANDS, PROTOCOL_VERSION, decode_reply
from tests.conftest import SCRTUNE
from tests.test_daemon import client_for

EXTREMES = [None, True, False, -1, 0, 1, 2 ** 63 - 1, -2 ** 63, 2 ** 64 - 1, 1e308, -1e308,
            math.nan, math.inf, -math.inf, 5e-324, "", "x" * 100_000, "\u0000", "../../etc",
            [], [1] * 10_000, {}, {"a": {"b": [None]}}, b"\xff" * 64]
FIELDS = {"hello": ["client"], "status": [], "recommend": ["starting"], "relaunch": [],
          "record": ["job", "run", "kind", "wall_s", "step", "detail", "record_id"],
          "offsets": ["sources"]}
KINDS = ["job_started", "checkpoint_save_started", "checkpoint_save_finished",
         "checkpoint_restore_started", "checkpoint_restore_finished", "step_finished",
         "job_terminated"]
BIG = [1e308, 5e-324, 0, 2 ** 63 - 1, -1, 1e18]


def _valid_record(rng: random.Random) -> dict:
    detail = {"config": rng.choice(["abc", "", "x" * 200]), "save_s": rng.choice(BIG),
              "compute_s": rng.choice(BIG), "steps": rng.choice([0, 2 ** 63 - 1, -5, 10]),
              "due": rng.choice([0, 1, -1, 7]), "interval_s": rng.choice(BIG),
              "flush_every": rng.choice([0, 10 ** 18])}
    return {"job": rng.choice(["j", "k" * 200]), "run": rng.choice([0, 2 ** 63 - 1]),
            "kind": rng.choice(KINDS), "wall_s": rng.choice([1.7e9, 1.7e9 + 1e6, 1e9, 4e9]),
            "step": rng.choice([-1, 0, 2 ** 63 - 1, 7]), "record_id": f"h-{rng.random()}",
            "detail": json.dumps(detail) if rng.random() < 0.8 else rng.choice(["{", "[]", ""])}


def _request(rng: random.Random, number: int) -> dict:
    op = rng.choice(COMMANDS)
    message = {"type": op, "version": PROTOCOL_VERSION, "request_id": number}
    if op == "record":
        message.update(_valid_record(rng))
    elif op == "offsets":
        message["sources"] = ["a"]
    fields = FIELDS[op] + ["request_id", "version"] * (rng.random() < 0.1)
    if fields and rng.random() < 0.6:  # one field of a wrong type or an extreme value
        message[rng.choice(fields)] = rng.choice(EXTREMES)
    return message


def _encode(message: dict) -> bytes:
    return msgspec.msgpack.encode(message)


@pytest.mark.parametrize("seed", [45, 46])
def test_well_formed_hostile_requests_are_answered_and_never_stop_the_daemon(daemon, seed):
    directory, proc = daemon
    rng = random.Random(seed)
    dealer = zmq.Context.instance().socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 0)
    dealer.connect(default_endpoints(directory).requests)
    errors: dict[str, int] = {}
    stored = 0  # records of valid types and extreme values: into the store and the loop
    try:
        for number in range(1, 1501):
            message = _request(rng, number)
            try:
                data = _encode(message)
            except (OverflowError, TypeError):
                continue  # msgpack cannot carry it: no peer can send it either
            dealer.send(data)
            assert dealer.poll(30_000), (number, message)  # answered, even when refused
            reply = decode_reply(dealer.recv())
            if isinstance(message.get("request_id"), int) and \
                    not isinstance(message["request_id"], bool) and \
                    0 <= message["request_id"] < 2 ** 63:
                assert reply.request_id in (message["request_id"], 0), (reply, message)
            if not reply.ok:
                errors[reply.error.code] = errors.get(reply.error.code, 0) + 1
            elif message["type"] == "record":
                stored += 1
            assert proc.poll() is None, message
    finally:
        dealer.close()
    print("errors by code:", errors, "records stored:", stored)
    assert stored > 100, stored
    assert "internal" not in errors, errors  # refused as bad input, never a daemon fault
    client = client_for(directory)
    assert client.status().ok and client.recommend().ok
    status = subprocess.run([*SCRTUNE, "status", "--dir", directory], capture_output=True,
                            text=True, timeout=120)
    assert status.returncode == 0, status.stderr
    report = subprocess.run([*SCRTUNE, "goodput", "--db", f"{directory}/state.sqlite"],
                            capture_output=True, text=True, timeout=300)
    assert report.returncode in (0, 2) and "Traceback" not in report.stderr, report.stderr
    assert len(report.stderr.strip().splitlines()) <= 1 or report.returncode == 0, report.stderr
