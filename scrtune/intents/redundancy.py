"""Intent 3: which redundancy scheme, by expected waste (scr-facts.md §5).

Per node writing B bytes with node-local bandwidth L and network bandwidth W, the encode cost
added to the measured checkpoint cost is: SINGLE 0; PARTNER a copy sent and written (B/W + B/L);
XOR read, reduce-scatter and parity write (B/L + B/W + B/((N-1)L)); RS with k parity blocks
(B/L + kB/W + kB/((N-k)L)). SINGLE does not survive failures that lose a node's storage; such a
failure costs a restart from the parallel file system. A multi-level pattern (SINGLE every
checkpoint, XOR every k-th) pays XOR's encode once in k, and loses up to k-1 intervals when a
node is lost. Each candidate runs at its own Daly interval; the least expected waste wins.
"""

from __future__ import annotations

import msgspec

from scrtune.goodput.intervals import daly
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.model import Intent, nodes
from scrtune.units import human_bytes, human_rate, human_seconds

DEFAULT_LOCAL_BPS = 2e9  # when the profile gives no node-local bandwidth
PFS_RESTART_INTERVALS = 1.0  # untolerated failure: about one more interval of work lost


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    scheme: str
    encode_s: float
    interval_s: float
    waste_share: float


class Redundancy(msgspec.Struct, frozen=True, kw_only=True):
    scheme: str  # SINGLE, PARTNER, XOR, RS, or SINGLE+XOR (multi-level)
    set_size: int
    set_failures: int
    xor_every: int  # for SINGLE+XOR: XOR on every k-th checkpoint
    candidates: tuple[Candidate, ...]


def _waste(cost: float, encode: float, mtbf: float, restart: float, lost_share: float,
           extra_intervals: float) -> tuple[float, float]:
    total = cost + encode
    interval = daly(total, mtbf)
    segment = interval + total
    waste = total / segment + (segment / 2 + restart) / mtbf \
        + lost_share * extra_intervals * segment / mtbf
    return interval, waste


def derive(stats: WorkloadStats, profile: SystemProfile) -> Intent:
    count = nodes(stats, profile)
    if count == 1:
        return Intent(name="redundancy", scope="job", confidence=1.0,
                      evidence=("one node: SCR forces SINGLE (there is no other node to hold "
                                "redundancy)",),
                      value=Redundancy(scheme="SINGLE", set_size=8, set_failures=2, xor_every=1,
                                       candidates=()))
    per_node = stats.ckpt_bytes / max(stats.hosts, 1)
    local = profile.node_local.write_bytes_per_s if profile.node_local else DEFAULT_LOCAL_BPS
    net = profile.network_bytes_per_s
    set_size = min(8, count)
    cost = max(stats.ckpt_dur_s, 1e-3)
    mtbf = profile.node_mtbf_s / count
    loss = profile.node_loss_share
    xor = per_node / local + per_node / net + per_node / ((set_size - 1) * local)
    options: list[tuple[str, float, float, float]] = [  # name, encode, lost share, extra
        ("SINGLE", 0.0, loss, PFS_RESTART_INTERVALS),
        ("PARTNER", per_node / net + per_node / local, 0.0, 0.0),
        ("XOR", xor, 0.0, 0.0),
    ]
    if set_size >= 4:
        k = 2
        rs = per_node / local + k * per_node / net + k * per_node / ((set_size - k) * local)
        options.append(("RS", rs, 0.0, 0.0))
    for every in (2, 4, 8):
        options.append((f"SINGLE+XOR/{every}", xor / every, loss, (every - 1) / 2))
    candidates = []
    for name, encode, lost, extra in options:
        interval, waste = _waste(cost, encode, mtbf, stats.restore_dur_s, lost, extra)
        candidates.append(Candidate(scheme=name, encode_s=encode, interval_s=interval,
                                    waste_share=waste))
    best = min(candidates, key=lambda c: c.waste_share)
    scheme, _, every = best.scheme.partition("/")
    evidence = (
        f"{count} nodes, {human_bytes(per_node)} per node per checkpoint, measured cost "
        f"{cost:.3f} s, job MTBF {human_seconds(mtbf)}, {100 * loss:.0f}% of failures lose a node",
        f"node-local {human_rate(local)}"
        + ("" if profile.node_local else " (assumed: not in the profile)")
        + f", network {human_rate(net)}, sets of {set_size}",
        "expected waste: " + ", ".join(f"{c.scheme} {100 * c.waste_share:.3g}%"
                                       for c in sorted(candidates, key=lambda c: c.waste_share)),
        f"chosen: {best.scheme}",
        *(("RS: sets span one rank per node, and redset aborts SCR_Init when a set has no "
           "more ranks than its 2 parity blocks: on 2 nodes or fewer, run recommend again",)
          if best.scheme == "RS" else ()),
    )
    return Intent(name="redundancy", scope="job", confidence=0.5 if profile.node_local else 0.3,
                  evidence=evidence,
                  value=Redundancy(scheme=scheme, set_size=set_size, set_failures=2,
                                   xor_every=int(every) if every else 1,
                                   candidates=tuple(candidates)))
