"""A daemon's recommendation, checked before the job acts on any of it (issue 45).

A reply is hostile until checked: any JSON shape, any value. `vetted()` rebuilds from it the
only recommendation the client uses: a configuration id, SCR parameters that scrtune's intents
produce within their ranges (scr_config/servable.py), paths under directories the job chose,
and typed, bounded runtime actions. Anything else refuses the whole reply, with one warning
line: the job then keeps its current settings, as when the daemon does not answer. Nothing here
raises into the application.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from scrtune.client.recommended import config_paths, stripe_layout
from scrtune.scr_config.config import ConfigError, ScrConfig
from scrtune.scr_config.servable import action_problem, config_id_problem, out_of_bounds

log = logging.getLogger("scrtune.client")
MAX_ACTIONS = 16
MAX_PARAMS = 64


class Refusals:
    """How many replies were refused, and the first reason (logged once per reason)."""

    def __init__(self) -> None:
        self.count = 0
        self._said: set[str] = set()

    def refuse(self, why: str) -> None:
        self.count += 1
        if why not in self._said and len(self._said) < 32:
            self._said.add(why)
            log.warning("scrtune: ignoring a recommendation from the daemon (%s); the job keeps "
                        "its current settings", why)


def vetted(answer: object, path_allowed: Callable[[str], bool],
           refusals: Refusals) -> dict | None:
    """The recommendation in `answer`, rebuilt from checked parts; None when there is none or
    any part of it is refused."""
    if answer is None:
        return None
    try:
        why, clean = _check(answer, path_allowed)
    except Exception as exc:  # noqa: BLE001 - a reply may be any shape: never raise into the job
        why, clean = f"malformed: {type(exc).__name__}", None
    if why:
        refusals.refuse(why[:200])
        return None
    return clean


def _check(answer: object, path_allowed: Callable[[str], bool]) -> tuple[str, dict | None]:
    if not isinstance(answer, dict):
        return "not an object", None
    scr, actions = answer.get("scr"), answer.get("runtime_actions", [])
    config_id = answer.get("config_id", "")
    if not isinstance(scr, dict) or len(scr) > MAX_PARAMS:
        return "no SCR parameters", None
    if not isinstance(actions, list) or len(actions) > MAX_ACTIONS:
        return "runtime actions are not a short list", None
    if why := config_id_problem(config_id):
        return why, None
    if not all(isinstance(k, str) and (k == "descriptors" or isinstance(v, str))
               for k, v in scr.items()):
        return "SCR parameters must be strings", None
    descriptors = scr.get("descriptors", [])
    if not isinstance(descriptors, list) or not all(isinstance(d, dict) for d in descriptors):
        return "descriptors must be a list of objects", None
    try:
        config = ScrConfig.from_json(scr)
    except (ConfigError, KeyError, TypeError, ValueError) as exc:
        return f"unusable configuration: {exc}", None
    if problems := out_of_bounds(config):
        return "; ".join(problems), None
    if foreign := [path for path in config_paths(config) if not path_allowed(path)]:
        return (f"names paths this job did not configure: {', '.join(foreign)} (allow them "
                "with SCRTUNE_PATHS)"), None
    clean_actions = []
    for action in actions:
        if not isinstance(action, dict):
            return "a runtime action is not an object", None
        if why := action_problem(action):
            return why, None
        clean_actions.append(_action(action))
    scr_json = dict(config.params)
    scr_json["descriptors"] = config.as_json()["descriptors"]
    return "", {"config_id": config_id, "scr": scr_json, "runtime_actions": clean_actions}


def _action(action: dict) -> dict:
    """Only the fields of the action's kind, with the checked values."""
    kind = action["kind"]
    if kind == "flush_every":
        return {"kind": kind, "every": action["every"]}
    if kind == "checkpoint_every_s":
        return {"kind": kind, "seconds": action["seconds"]}
    if kind == "transfer_thread_affinity":
        return {"kind": kind, "cores": list(action["cores"])}
    layout = stripe_layout(action) or (0, 0)  # not sane: never run (stripe_layout logs it)
    return {"kind": kind, "stripe_count": layout[0], "stripe_size_bytes": layout[1]}
