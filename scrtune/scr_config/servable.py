"""What a daemon may serve a job: the SCR parameters the intents produce, each within its
intent's range, and the runtime actions, typed and bounded.

A recommendation arrives over a socket, so the client checks it against this table before
anything reaches SCR (issue 45): a daemon cannot make SCR write under another user's name
(`SCR_USER_NAME` and `SCR_JOB_NAME` become directory names), switch off checkpointing or its
flushes (`SCR_ENABLE=0`, `SCR_FLUSH=0`), or stretch the cadence past what any intent emits.
The mapping checks its own output against the same table, so what it emits always passes.
"""

from __future__ import annotations

from dataclasses import dataclass

from scrtune.intents.model import (
    MAX_FLUSH_EVERY,
    MAX_SECONDS,  # the client refuses a longer interval
)
from scrtune.scr_config.catalogue import COPY_TYPES
from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.values import byte_count

MIB = 1 << 20
MAX_CORE = 1 << 16  # sched_setaffinity's CPU numbers: no machine has more
MAX_CORES = 4096
MAX_SET_SIZE = 1024
MAX_CACHED = 64  # SCR_CACHE_SIZE, SCR_PREFIX_SIZE: checkpoints kept
MAX_FILE_BUF = 4 << 30
MAX_MPI_BUF = 128 * MIB  # an int for SCR; scrtune keeps SCR's 1 MiB, a reply may not ask more
MAX_ID_CHARS = 64


@dataclass(frozen=True)
class Bound:
    """An integer range, or (with `words`) a set of words; `paths`: a directory the client
    checks against the job's own."""

    low: int = 0
    high: int = 0
    words: tuple[str, ...] = ()
    bytes_: bool = False  # a byte count as SCR parses it (`64MB`)
    path: bool = False
    also: tuple[int, ...] = ()  # values outside low..high that the intent emits too


SERVABLE: dict[str, Bound] = {
    "SCR_CACHE_BYPASS": Bound(0, 1),
    "SCR_CACHE_BASE": Bound(path=True),
    "SCR_COPY_TYPE": Bound(words=(*COPY_TYPES, "FILE")),
    "SCR_SET_SIZE": Bound(1, MAX_SET_SIZE),
    "SCR_SET_FAILURES": Bound(1, MAX_SET_SIZE),
    "SCR_FILE_BUF_SIZE": Bound(MIB, MAX_FILE_BUF, bytes_=True),
    "SCR_MPI_BUF_SIZE": Bound(MIB, MAX_MPI_BUF, bytes_=True),
    "SCR_FLUSH": Bound(1, MAX_FLUSH_EVERY),  # 0 would never flush: the job's only copy local
    "SCR_FLUSH_TYPE": Bound(words=("SYNC", "PTHREAD")),
    "SCR_FLUSH_ASYNC": Bound(0, 1),
    "SCR_CACHE_SIZE": Bound(1, MAX_CACHED),
    "SCR_CHECKPOINT_SECONDS": Bound(1, MAX_SECONDS),
    "SCR_PREFIX_SIZE": Bound(2, MAX_CACHED, also=(0,)),  # 1 leaves nothing to fall back to
    "SCR_FLUSH_WIDTH": Bound(1, 1 << 20),
}
CKPT_KEYS: dict[str, Bound] = {"INTERVAL": Bound(1, MAX_CACHED), "TYPE": Bound(words=COPY_TYPES)}
ACTIONS: dict[str, tuple[str, Bound]] = {
    "flush_every": ("every", Bound(1, MAX_FLUSH_EVERY)),
    "checkpoint_every_s": ("seconds", Bound(1, MAX_SECONDS)),
}


def out_of_bounds(config: ScrConfig) -> list[str]:
    """What in `config` no intent produces, in words ([] when a daemon may serve it all)."""
    problems = [f"{name}={value}: {why}" for name, value in config.params
                if (why := _param_problem(name, value))]
    for descriptor in config.descriptors:
        if descriptor.kind != "CKPT" or not descriptor.value.isdigit() or \
                int(descriptor.value) > 9:
            problems.append(f"{descriptor.line()}: scrtune serves CKPT=0..9 lines only")
            continue
        for key, value in descriptor.keys:
            bound = CKPT_KEYS.get(key)
            if bound is None or (why := _value_problem(bound, value)):
                problems.append(f"{descriptor.line()}: {key}={value} "
                                f"{why if bound else 'is not served'}")
    return problems


def action_problem(action: dict) -> str:
    """Why a runtime action (its JSON form) may not be applied, or ""."""
    kind = action.get("kind")
    if kind in ACTIONS:
        field, bound = ACTIONS[kind]
        value = action.get(field)
        if not _is_int(value) or not bound.low <= value <= bound.high:
            return f"{kind}: {field} {value!r} is not an integer in {bound.low}..{bound.high}"
        return ""
    if kind == "transfer_thread_affinity":
        cores = action.get("cores")
        if not isinstance(cores, (list, tuple)) or len(cores) > MAX_CORES or \
                not all(_is_int(c) and 0 <= c < MAX_CORE for c in cores):
            return f"{kind}: cores must be a list of CPU numbers"
        return ""
    if kind == "stripe":
        count, size = action.get("stripe_count"), action.get("stripe_size_bytes")
        if not (_is_int(count) and _is_int(size)):
            return f"{kind}: count and size must be integers"
        return ""
    return f"unknown runtime action {str(kind)[:40]!r}"


def config_id_problem(value: object) -> str:
    """A configuration id labels records: short, printable, one token."""
    if not isinstance(value, str) or len(value) > MAX_ID_CHARS or \
            not all(c.isalnum() or c in "-_.:" for c in value):
        return f"config_id {str(value)[:40]!r} is not an id"
    return ""


def _param_problem(name: str, value: str) -> str:
    bound = SERVABLE.get(name)
    if bound is None:
        return "not a parameter scrtune's intents set"
    return _value_problem(bound, value)


def _value_problem(bound: Bound, value: str) -> str:
    if bound.path:
        return "" if value.startswith("/") else "not an absolute path"
    if bound.words:
        return "" if value.upper() in bound.words else f"not one of {', '.join(bound.words)}"
    try:
        number = byte_count(value) if bound.bytes_ else int(value)
    except ValueError:
        return "not a number"
    if number in bound.also or bound.low <= number <= bound.high:
        return ""
    return f"outside {bound.low}..{bound.high}"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
