"""What a recommendation may make a job do, checked on the client: the paths it names, the
stripe layout it asks for; and the recommendation for the next checkpoint, asked ahead."""

from __future__ import annotations

import logging
import math
from concurrent.futures import Future

from scrtune.daemon.state import config_id
from scrtune.scr_config.catalogue import BY_NAME, Kind
from scrtune.scr_config.config import ScrConfig

log = logging.getLogger("scrtune.client")

MAX_STRIPE_COUNT = 2000  # Lustre's limit on OSTs per file
STRIPE_ALIGN = 64 << 10  # Lustre stripe sizes are multiples of 64 KiB


def stripe_layout(action: dict) -> tuple[int, int] | None:
    """(stripe count, stripe size) from a stripe action, or None when they are not sane."""
    count, size = action.get("stripe_count"), action.get("stripe_size_bytes")
    if not (isinstance(count, int) and isinstance(size, int)) or isinstance(count, bool):
        return None
    if not (1 <= count <= MAX_STRIPE_COUNT and STRIPE_ALIGN <= size <= 4 << 30
            and size % STRIPE_ALIGN == 0):
        log.warning("scrtune: stripe layout %r x %r refused", count, size)
        return None
    return count, size


class AskAhead:
    """The recommendation for the next checkpoint, asked on the client's background thread
    after the records queued before it. A synchronous ask at every checkpoint costs the
    training thread a round trip to a sleeping daemon (about 1 ms to wake it) plus a
    recompute; asked ahead, it overlaps the compute."""

    def __init__(self, client) -> None:
        self._client = client
        self._pending: Future | None = None
        self._known: dict | None = None  # an answer nothing has been recorded since

    def know(self, answer: dict | None) -> None:
        self._known, self._pending = answer, None

    def start(self) -> None:
        if self._pending is None:
            self._known = None
            self._pending = self._client.recommend_later()

    def take(self) -> dict | None:
        """The answer asked ahead, waiting at most one request's bound while it is in flight
        and not at all while the daemon is not answering (None then: keep the current
        settings); the known answer when nothing was asked."""
        pending, self._pending = self._pending, None
        if pending is None:
            return self._known
        reply = self._client.reply_to(pending)
        return reply.result if reply is not None and reply.ok else None


def config_paths(config: ScrConfig) -> list[str]:
    """Every file-system path a configuration makes SCR use: path parameters, STORE lines and
    the STORE keys of CKPT lines."""
    paths = [value for name, value in config.params
             if (param := BY_NAME.get(name)) is not None and param.kind is Kind.PATH]
    for descriptor in config.descriptors:
        if descriptor.kind == "STORE":
            paths.append(descriptor.value)
        paths += [value for key, value in descriptor.keys if key == "STORE"]
    return paths


CADENCE = "SCR_CHECKPOINT_SECONDS"


def cadence_only_change(init_scr: dict, recommendation: dict, resolved) -> bool:
    """Whether `recommendation` differs from the SCR parameters a run started with only in a
    shorter checkpoint interval, nothing shadowed: the client's timer then runs it whole (SCR
    ORs its own interval with it, so a longer one would not take effect before a relaunch)."""
    scr = recommendation.get("scr")
    if not isinstance(scr, dict) or not init_scr or resolved.shadowed or \
            not recommendation.get("config_id"):
        return False
    if {k: v for k, v in scr.items() if k != CADENCE} != \
            {k: v for k, v in init_scr.items() if k != CADENCE}:
        return False
    try:
        new, old = float(scr.get(CADENCE) or 0), float(init_scr.get(CADENCE) or 0)
    except (TypeError, ValueError):
        return False
    return math.isfinite(new) and new > 0 and (old == 0 or new < old)


def fit_to_nodes(recommendation: dict | None, nodes: int, smallest_set: int) -> dict | None:
    """`recommendation` as the job's real layout allows (known before SCR_Init, unlike the
    daemon's plan). SCR's redundancy sets span one rank per node, and SCR_Init aborts when a
    set is too small for its scheme: XOR, PARTNER and RS need 2 ranks (a layout of 2, 1 and 1
    ranks forms a set of one), RS more than its k parity blocks (a 4-node job relaunched on its
    2 surviving nodes aborted every time). There SINGLE, or XOR instead of RS, is run, said
    once, under the id of what runs. Every rank computes the same."""
    if not recommendation or nodes == 1:
        return recommendation
    scr = dict(recommendation["scr"])
    copy_type = str(scr.get("SCR_COPY_TYPE", "XOR")).upper()  # XOR: SCR's default
    types = {copy_type} if copy_type != "FILE" else \
        {str(d.get("keys", {}).get("TYPE", "")).upper() for d in scr.get("descriptors", [])}
    parity = int(scr.get("SCR_SET_FAILURES") or BY_NAME["SCR_SET_FAILURES"].default)
    if smallest_set < 2 and types - {"SINGLE"}:
        scr.update(SCR_COPY_TYPE="SINGLE", descriptors=[])
        instead = "SINGLE"
    elif "RS" in types and smallest_set <= parity:
        scr["SCR_COPY_TYPE"] = "XOR"
        instead = "XOR"
    else:
        return recommendation
    scr.pop("SCR_SET_FAILURES", None)
    log.warning("scrtune: %s needs sets of more ranks than this run forms (%d nodes, the smallest "
                "set %d: SCR_Init would abort): %s instead", "/".join(sorted(types)), nodes,
                smallest_set, instead)
    return {**recommendation, "scr": scr, "config_id": config_id(scr)}
