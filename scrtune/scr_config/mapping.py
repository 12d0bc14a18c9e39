"""Intents to one SCR configuration and the runtime actions around each output.

SCR reads its parameters once, in SCR_Init: the configuration is for the next SCR_Init (the next
job, or the next run of scr_run). What can change while a job runs is the client's business:
the runtime actions (transfer-thread affinity, striping, when to checkpoint). Everything emitted
is checked by `scrtune lint` first; an error there is a bug, never output.
"""

from __future__ import annotations

import msgspec

from scrtune.errors import ScrtuneError
from scrtune.intents import derive_all
from scrtune.intents.cache import CacheChoice
from scrtune.intents.core_affinity import CoreAffinity
from scrtune.intents.inputs import SystemProfile, WorkloadStats
from scrtune.intents.interval import Cadence
from scrtune.intents.model import Intent
from scrtune.intents.redundancy import Redundancy
from scrtune.intents.retention import Retention
from scrtune.intents.striping import Striping
from scrtune.intents.write_sizes import WriteSizes
from scrtune.scr_config.catalogue import BY_NAME
from scrtune.scr_config.config import Descriptor, ScrConfig
from scrtune.scr_config.lint import lint_text
from scrtune.scr_config.servable import action_problem, out_of_bounds
from scrtune.scr_config.values import format_bytes
from scrtune.units import human_seconds, ordinal, ranges

TAKES_EFFECT = "at the next SCR_Init (SCR reads its parameters once, when it starts)"


class RuntimeAction(msgspec.Struct, frozen=True, kw_only=True):
    """Something the client does around SCR_Start_output, since SCR's parameters are fixed."""

    kind: str  # transfer_thread_affinity, stripe, checkpoint_every_s, flush_every
    detail: str
    cores: tuple[int, ...] = ()
    command: str = ""
    seconds: int = 0
    every: int = 0
    stripe_count: int = 0  # for "stripe": the client builds `lfs setstripe` from these itself
    stripe_size_bytes: int = 0

    def value_text(self) -> str:
        """The action's value in words, whatever its kind."""
        if self.kind == "flush_every":
            return "every checkpoint" if self.every == 1 else \
                f"every {ordinal(self.every)} checkpoint"
        if self.kind == "checkpoint_every_s":
            return human_seconds(self.seconds)
        if self.kind == "transfer_thread_affinity":
            return f"cores {ranges(self.cores)}"
        return self.command


class Recommendation(msgspec.Struct, frozen=True, kw_only=True):
    target_version: str
    takes_effect: str
    profile: str
    intents: tuple[Intent, ...]
    config: ScrConfig
    runtime_actions: tuple[RuntimeAction, ...]

    def as_json(self) -> dict[str, object]:
        scr: dict[str, object] = dict(self.config.params)
        scr["descriptors"] = self.config.as_json()["descriptors"]
        return {
            "target_version": self.target_version,
            "takes_effect": self.takes_effect,
            "profile": self.profile,
            "intents": [msgspec.to_builtins(i) for i in self.intents],
            "scr": scr,
            "runtime_actions": [msgspec.to_builtins(a) for a in self.runtime_actions],
        }


def recommend(stats: WorkloadStats, profile: SystemProfile) -> Recommendation:
    intents = derive_all(stats, profile)
    params: dict[str, str] = {}
    descriptors: tuple[Descriptor, ...] = ()
    actions: list[RuntimeAction] = []
    cache: CacheChoice = intents["cache_or_bypass"].value  # type: ignore[assignment]
    params["SCR_CACHE_BYPASS"] = "1" if cache.bypass else "0"
    if not cache.bypass:
        descriptors = _cached(intents, params, actions, cache)
    cadence: Cadence = intents["interval"].value  # type: ignore[assignment]
    if cadence.checkpoint_seconds:
        params["SCR_CHECKPOINT_SECONDS"] = str(cadence.checkpoint_seconds)
        actions.append(RuntimeAction(kind="checkpoint_every_s", seconds=cadence.checkpoint_seconds,
                                     detail="need_checkpoint() answers yes after this much time"))
    retention: Retention = intents["retention"].value  # type: ignore[assignment]
    params["SCR_PREFIX_SIZE"] = str(retention.prefix_size)
    striping: Striping = intents["striping"].value  # type: ignore[assignment]
    actions.append(RuntimeAction(kind="stripe", command=striping.command,
                                 stripe_count=striping.stripe_count,
                                 stripe_size_bytes=striping.stripe_size_bytes,
                                 detail="stripe SCR's prefix directory before the first output"))
    if striping.flush_width:  # SCR v2 only: v3 parses SCR_FLUSH_WIDTH and ignores it
        params["SCR_FLUSH_WIDTH"] = str(striping.flush_width)
    config = ScrConfig.build(_without_defaults(params), descriptors, profile.scr_version)
    report = lint_text(config.conf(), "recommendation")
    if report.errors:  # pragma: no cover - the property test keeps this unreachable
        raise ScrtuneError("internal error: the recommendation does not lint: "
                           + "; ".join(f.render() for f in report.findings))
    unservable = out_of_bounds(config) + [p for a in actions if (p := action_problem(
        msgspec.to_builtins(a)))]
    if unservable:  # pragma: no cover - the property test keeps this unreachable
        raise ScrtuneError("internal error: clients would refuse the recommendation: "
                           + "; ".join(unservable))
    return Recommendation(target_version=profile.scr_version, takes_effect=TAKES_EFFECT,
                          profile=profile.source, intents=tuple(intents.values()), config=config,
                          runtime_actions=tuple(actions))


def _cached(intents: dict[str, Intent], params: dict[str, str], actions: list[RuntimeAction],
            cache: CacheChoice) -> tuple[Descriptor, ...]:
    """The settings that matter only with a cache (SCR_CACHE_BYPASS=0)."""
    if cache.cache_base:
        params["SCR_CACHE_BASE"] = cache.cache_base
    redundancy: Redundancy = intents["redundancy"].value  # type: ignore[assignment]
    descriptors = redundancy_settings(redundancy, params)
    sizes: WriteSizes = intents["write_sizes"].value  # type: ignore[assignment]
    cores: CoreAffinity = intents["core_affinity"].value  # type: ignore[assignment]
    # the buffer by the flush's kind: a synchronous one's, an asynchronous one's on the ranks'
    # cores, or SCR's own for transfer threads on idle cores
    if not cores.async_flush_pays:
        file_buf = sizes.file_buf_bytes
    elif not cores.idle_cores:
        file_buf = sizes.shared_core_file_buf_bytes
    else:
        file_buf = None
    if file_buf:
        params["SCR_FILE_BUF_SIZE"] = format_bytes(file_buf)
    if sizes.mpi_buf_bytes:
        params["SCR_MPI_BUF_SIZE"] = format_bytes(sizes.mpi_buf_bytes)
    cadence: Cadence = intents["interval"].value  # type: ignore[assignment]
    params["SCR_FLUSH"] = str(cadence.flush_every)
    actions.append(RuntimeAction(
        kind="flush_every", every=cadence.flush_every,
        detail="SCR_FLUSH is fixed at SCR_Init: when the cadence learned since differs, add "
               "FLAG_OUTPUT to every k-th checkpoint so that it is flushed"))
    if cores.async_flush_pays:  # only where the build offers PTHREAD (core_affinity)
        params["SCR_FLUSH_TYPE"] = "PTHREAD"
        params["SCR_FLUSH_ASYNC"] = "1"
        params["SCR_CACHE_SIZE"] = str(max(2, cadence.cache_size,
                                           int(params.get("SCR_CACHE_SIZE", 0))))
        if cores.idle_cores:  # else they share the ranks' cores (core_affinity weighed it)
            actions.append(RuntimeAction(
                kind="transfer_thread_affinity", cores=cores.idle_cores,
                detail="pin the thread calling complete_output to these cores, so the "
                       "transfer threads SCR starts inherit them; restore afterwards"))
    return descriptors


def redundancy_settings(redundancy: Redundancy, params: dict[str, str]
                        ) -> tuple[Descriptor, ...]:
    """The copy type, set size and failures of `redundancy` into `params`; its CKPT lines.

    A multi-level pattern (SINGLE every checkpoint, XOR every k-th) keeps k+1 checkpoints in
    the cache: SCR drops the oldest cached checkpoints whatever their redundancy once
    SCR_CACHE_SIZE is reached (and one more while writing the next), so with fewer the last
    XOR level is gone by the time a node is lost (issue 46: "Failed to rebuild dataset")."""
    if redundancy.scheme != "SINGLE+XOR":
        params["SCR_COPY_TYPE"] = redundancy.scheme
        descriptors: tuple[Descriptor, ...] = ()
    else:
        params["SCR_COPY_TYPE"] = "FILE"
        params["SCR_CACHE_SIZE"] = str(redundancy.xor_every + 1)
        descriptors = (
            Descriptor("CKPT", "0", (("INTERVAL", "1"), ("TYPE", "SINGLE"))),
            Descriptor("CKPT", "1", (("INTERVAL", str(redundancy.xor_every)), ("TYPE", "XOR"))),
        )
    params["SCR_SET_SIZE"] = str(redundancy.set_size)
    if redundancy.scheme == "RS":  # redset aborts unless k is below the set size it forms
        params["SCR_SET_FAILURES"] = str(min(redundancy.set_failures, redundancy.set_size - 1))
    return descriptors


def _without_defaults(params: dict[str, str]) -> dict[str, str]:
    """Leave out values equal to SCR's compiled default, except the bypass choice, which is
    always stated (it decides what every other setting means)."""
    return {k: v for k, v in params.items()
            if k == "SCR_CACHE_BYPASS" or v != BY_NAME[k].default}
