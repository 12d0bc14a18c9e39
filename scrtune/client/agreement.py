"""Every rank must pass identical SCR_Config strings (SCR compares them and aborts on a
mismatch). Each node's first rank asks its node's daemon; world rank 0 merges the job-scope
parameters from every node and broadcasts one configuration. Bytes only: no pickle."""

from __future__ import annotations

import os
import socket

import msgspec
import numpy as np

# Job-scope parameters that nodes may see differently, and how their values combine.
MERGE_MIN = ("SCR_CHECKPOINT_SECONDS",)  # the most failure-prone node sets the pace
MERGE_MAX = ("SCR_FLUSH", "SCR_CACHE_SIZE", "SCR_PREFIX_SIZE")


def node_key() -> str:
    return os.environ.get("SCRTUNE_NODE") or socket.gethostname()


def agree(comm, ask_daemon) -> dict[str, object] | None:
    """The recommendation every rank uses (None: keep SCR's settings). `ask_daemon()` is
    called on one rank per node and returns the node's recommendation or None."""
    if comm is None or comm.Get_size() == 1:
        return ask_daemon()
    nodes = _split_by_node(comm)
    mine = b""
    if nodes.Get_rank() == 0:
        answer = ask_daemon()
        mine = msgspec.json.encode(answer) if answer else b""
    gathered = _gather_all(comm, mine)
    merged = b""
    if comm.Get_rank() == 0:
        answers = [msgspec.json.decode(p) for p in gathered if p]
        merged = msgspec.json.encode(merge(answers)) if answers else b""
    merged = _bcast_bytes(comm, merged)
    nodes.Free()
    return msgspec.json.decode(merged) if merged else None


def merge(answers: list[dict]) -> dict:
    """The first node's recommendation, with job-scope parameters combined across nodes."""
    base = dict(answers[0])
    scr = dict(base["scr"])
    for name, pick in [(n, min) for n in MERGE_MIN] + [(n, max) for n in MERGE_MAX]:
        values = [int(a["scr"][name]) for a in answers if name in a.get("scr", {})]
        if values and name in scr:
            scr[name] = str(pick(values))
    base["scr"] = scr
    return base


def _split_by_node(comm):
    """Ranks that share a node key (colors may collide: the keys themselves decide)."""
    key = node_key()
    keys = sorted(set(_gather_all(comm, key.encode())))
    return comm.Split(color=keys.index(key.encode()), key=comm.Get_rank())


def _gather_all(comm, data: bytes) -> list[bytes]:
    sizes = np.zeros(comm.Get_size(), dtype=np.int64)
    comm.Allgather(np.array([len(data)], dtype=np.int64), sizes)
    out = np.empty(int(sizes.sum()), dtype=np.uint8)
    comm.Allgatherv(np.frombuffer(data, dtype=np.uint8), (out, sizes))
    offsets = np.r_[0, np.cumsum(sizes)]
    return [out[a:b].tobytes() for a, b in zip(offsets[:-1], offsets[1:])]


def _bcast_bytes(comm, data: bytes) -> bytes:
    size = np.array([len(data)], dtype=np.int64)
    comm.Bcast(size, root=0)
    buffer = np.frombuffer(data, dtype=np.uint8).copy() if comm.Get_rank() == 0 else \
        np.empty(int(size[0]), dtype=np.uint8)
    comm.Bcast(buffer, root=0)
    return buffer.tobytes()
