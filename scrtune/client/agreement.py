"""Every rank must pass identical SCR_Config strings (SCR compares them and aborts on a
mismatch). Each node's first rank asks its node's daemon; world rank 0 merges the job-scope
parameters from every node and broadcasts one configuration. Bytes only: no pickle."""

from __future__ import annotations

import logging
import os
import socket
from collections import Counter

import msgspec

from scrtune.daemon.state import config_id
from scrtune.mpibytes import allgather_bytes, bcast_bytes, gather_bytes

log = logging.getLogger("scrtune.client")

# Job-scope parameters that nodes may see differently, and how their values combine.
MERGE_MIN = ("SCR_CHECKPOINT_SECONDS",)  # the most failure-prone node sets the pace
MERGE_MAX = ("SCR_FLUSH", "SCR_CACHE_SIZE")
# SCR_PREFIX_SIZE: keeping every checkpoint (0, or not set) wins over any window, since a node
# that recommends no retention may have seen checkpoints reuse file names
KEEP_ALL_WINS = ("SCR_PREFIX_SIZE",)


def node_key() -> str:
    return os.environ.get("SCRTUNE_NODE") or socket.gethostname()


class NodeAgreement:
    """The job's ranks grouped by node, made once (an allgather and a split), then used at
    SCR_Init and at every output."""

    def __init__(self, comm) -> None:
        self.comm = comm if comm is not None and comm.Get_size() > 1 else None
        self.node_count = 1  # the nodes the job's ranks run on (by node_key())
        # ranks in SCR's smallest redundancy set: sets span one rank per node, by the rank's
        # index on its node, so the nodes with the most ranks form the smallest (uneven
        # layouts: 2, 1, 1 ranks form a set of one, and XOR, PARTNER and RS abort SCR_Init)
        self.smallest_set = 1
        self._nodes = None
        if self.comm is not None:
            self._nodes, self.node_count, self.smallest_set = _split_by_node(self.comm)

    @property
    def asks(self) -> bool:
        """True on the rank that asks its node's daemon."""
        return self._nodes is None or self._nodes.Get_rank() == 0

    def agree(self, ask_daemon) -> dict[str, object] | None:
        """The recommendation every rank uses (None: keep SCR's settings). `ask_daemon()` is
        called on one rank per node and returns the node's recommendation or None."""
        if self.comm is None or self._nodes is None:
            return ask_daemon()
        mine = b""
        if self._nodes.Get_rank() == 0:
            answer = ask_daemon()
            mine = msgspec.json.encode(answer) if answer else b""
        gathered = gather_bytes(self.comm, mine)
        merged = b""
        if gathered is not None:  # rank 0: the others wait in the broadcast, so never raise
            merged = _merged(gathered)
        merged = bcast_bytes(self.comm, merged)
        return msgspec.json.decode(merged) if merged else None

    def rank_zeros(self, strings: list[str]) -> list[str]:
        """World rank 0's `strings` on every rank (values each rank derives from its own
        environment and working directory, which SCR needs identical everywhere)."""
        if self.comm is None:
            return strings
        data = bcast_bytes(self.comm, msgspec.json.encode(strings))
        return msgspec.json.decode(data, type=list[str])

    def close(self) -> None:
        if self._nodes is not None:
            self._nodes.Free()
            self._nodes = None


def merge(answers: list[dict]) -> dict:
    """The first node's recommendation, with job-scope parameters combined across nodes."""
    base = dict(answers[0])
    scr = dict(base["scr"])
    for name, pick in [(n, min) for n in MERGE_MIN] + [(n, max) for n in MERGE_MAX]:
        values = [int(a["scr"][name]) for a in answers if name in a.get("scr", {})]
        if values and name in scr:
            scr[name] = str(pick(values))
    for name in KEEP_ALL_WINS:
        values = [int(a.get("scr", {}).get(name) or 0) for a in answers]
        if name in scr and min(values) > 0:
            scr[name] = str(min(values))
        else:
            scr.pop(name, None)
    if scr != base["scr"]:  # the job runs the merged configuration: its id, as a daemon's
        base["config_id"] = config_id(scr)
    base["scr"] = scr
    return base


def _merged(gathered: list[bytes]) -> bytes:
    """The merged recommendation of the vetted answers each node sent, encoded; b"" (keep
    SCR's settings) when there is none, or they cannot be merged."""
    try:
        answers = [msgspec.json.decode(p) for p in gathered if p]
        return msgspec.json.encode(merge(answers)) if answers else b""
    except (msgspec.DecodeError, KeyError, TypeError, ValueError) as exc:
        log.warning("scrtune: the nodes' recommendations cannot be merged (%s); the job keeps "
                    "its current settings", exc)
        return b""


def _split_by_node(comm):
    """Ranks that share a node key (colors may collide: the keys themselves decide), how many
    nodes there are, and how many nodes have the most ranks."""
    key = node_key()
    per_node = Counter(allgather_bytes(comm, key.encode()))
    keys = sorted(per_node)
    most = max(per_node.values())
    smallest_set = sum(1 for count in per_node.values() if count == most)
    return comm.Split(color=keys.index(key.encode()), key=comm.Get_rank()), len(keys), \
        smallest_set
