"""What SCR resolved in SCR_Init, read back, against what the job asked for.

SCR takes a parameter from the environment first, then the user config file (`SCR_CONF_FILE`
or `$SCR_PREFIX/.scrconf`), then SCR_Config: a value set earlier in that order silently wins
over the SCR_Config strings TunedSCR passes. After SCR_Init, SCR_Config queries return what SCR
holds, so TunedSCR asks for every parameter it set and for the checkpoint cadence, labels the
run's outputs with what SCR really runs, and says what was shadowed.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field

from scrtune.scr_config.catalogue import BY_NAME, Kind
from scrtune.scr_config.values import as_read

log = logging.getLogger("scrtune.client")

# SCR_Need_checkpoint says yes only when one of these is set (all default to 0)
CADENCE_PARAMS = ("SCR_CHECKPOINT_INTERVAL", "SCR_CHECKPOINT_SECONDS", "SCR_CHECKPOINT_OVERHEAD")
# the checkpoints SCR flushes by itself (its checkpoint id a multiple of it): read back whether
# or not it was asked for, as a recommendation leaves out a value equal to SCR's default and a
# system config file may set another
FLUSH_PARAM = "SCR_FLUSH"
# who runs, not how: never part of a configuration's label, never reported as shadowed
IDENTITY_PARAMS = ("SCR_JOB_ID", "SCR_JOB_NAME", "SCR_USER_NAME")
MAX_VALUE_CHARS = 4096  # a value longer than this is not a parameter SCR resolved


@dataclass(frozen=True)
class Resolved:
    """SCR's values after SCR_Init for the parameters asked for, and those set differently."""

    values: dict[str, str] = field(default_factory=dict)  # name -> as SCR holds it ("" unset)
    shadowed: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (asked, held)

    @property
    def has_cadence(self) -> bool:
        """Whether SCR_Need_checkpoint can ever say yes with what SCR holds."""
        return any(float(as_read(BY_NAME[name].kind, self.values.get(name), "0")) > 0
                   for name in CADENCE_PARAMS)

    def flush_every(self, unknown: int) -> int:
        """Every how many checkpoints SCR flushes on its own (SCR_FLUSH as SCR holds it, its
        compiled default where nothing set it; 0: never); `unknown` where the query failed."""
        if FLUSH_PARAM not in self.values:
            return unknown
        return int(as_read(Kind.INT, self.values[FLUSH_PARAM], BY_NAME[FLUSH_PARAM].default))

    def label(self, config_id: str) -> str:
        """The id outputs of this run carry: the daemon's id of the configuration it served
        when SCR runs it; when something shadowed part of it, an id of what SCR holds instead,
        so that no output is credited to a configuration SCR never ran."""
        if not self.shadowed or not config_id:
            return config_id
        text = "\n".join(f"{k}={v}" for k, v in sorted(self.values.items()))
        return "scr-" + hashlib.sha1(text.encode()).hexdigest()[:12]

    def describe(self) -> str:
        return ", ".join(f"{name}={asked} (SCR runs {held or 'its default'})"
                         for name, (asked, held) in sorted(self.shadowed.items()))


def asked_values(strings: list[str]) -> dict[str, str]:
    """The value each known parameter was last set to in SCR_Config strings (later strings
    win, as in SCR); descriptor lines (`CKPT=...`, `STORE=...`) are not single parameters, and
    the job's identity (IDENTITY_PARAMS) is no part of its configuration."""
    asked: dict[str, str] = {}
    for text in strings:
        name, sep, value = text.partition("=")
        name = name.strip()
        if sep and name in BY_NAME and name not in IDENTITY_PARAMS and " " not in value.strip():
            asked[name] = value.strip()
    return asked


def read_back(scr_module, asked: dict[str, str]) -> Resolved:
    """Query SCR (after SCR_Init) for every parameter asked for, the cadence and SCR_FLUSH. A
    query that fails or answers nonsense counts as unknown; nothing here raises into the job."""
    values: dict[str, str] = {}
    for name in sorted(set(asked) | set(CADENCE_PARAMS) | {FLUSH_PARAM}):
        try:
            held = scr_module.config(name)
        except Exception as exc:  # SCR's module or a double: never into the training loop
            log.debug("SCR_Config query of %s failed: %s", name, exc)
            continue
        if held is None:
            values[name] = ""
        elif isinstance(held, (str, bytes)) and len(held) <= MAX_VALUE_CHARS:
            values[name] = held.decode(errors="replace") if isinstance(held, bytes) else held
    shadowed = {}
    for name, value in asked.items():
        if name not in values:
            continue
        param = BY_NAME[name]
        if param.kind is Kind.PATH:
            same = _same_path(value, values[name])
        else:
            same = as_read(param.kind, value, param.default) == \
                as_read(param.kind, values[name], param.default)
        if not same:
            shadowed[name] = (value, values[name])
    return Resolved(values=values, shadowed=shadowed)


def _same_path(asked: str, held: str) -> bool:
    return asked.rstrip("/") == held.rstrip("/")
