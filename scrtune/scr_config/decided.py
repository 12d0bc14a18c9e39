"""The values a recommendation decided though it leaves them out, stated for SCR.

A recommendation leaves out any value equal to SCR's compiled default: it reads shorter, and a
configuration served, planned or recorded compares equal whether the default is written or not.
But SCR resolves a parameter from the environment, the user config file, SCR_Config and only
then its system config file (`<install>/etc/scr.conf`, scr_param.c) before the compiled
default. A site's system file that sets `SCR_COPY_TYPE=SINGLE` or `SCR_FLUSH=2` would replace,
unseen, the XOR and the cadence of 10 that scrtune chose, while every value scrtune chose other
than the default wins over it. So whatever passes a recommendation to SCR states these defaults
too (`stated`): a site's file then changes only what scrtune did not decide.
"""

from __future__ import annotations

from scrtune.scr_config.catalogue import BY_NAME, Kind
from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.values import format_bytes

# decided for every recommendation (retention), and for every one that uses the cache: the
# redundancy, the flush cadence, the flush's kind and the file buffer. Not the cache's place,
# size or the MPI buffer: the intents set those only when they choose other than SCR's own.
DECIDED = ("SCR_PREFIX_SIZE",)
DECIDED_WITH_CACHE = ("SCR_COPY_TYPE", "SCR_SET_SIZE", "SCR_FILE_BUF_SIZE", "SCR_FLUSH",
                      "SCR_FLUSH_TYPE", "SCR_FLUSH_ASYNC")
DECIDED_WITH_RS = ("SCR_SET_FAILURES",)  # the parity blocks: meaningful to Reed-Solomon only
SCR_FORMS = ("env", "conf", "srun", "scr-config")  # what for_scr() renders


def decided_names(config: ScrConfig) -> tuple[str, ...]:
    """Every parameter the recommendation `config` decided, written or left out."""
    names = DECIDED
    if config.get("SCR_CACHE_BYPASS") == "0":
        names += DECIDED_WITH_CACHE
        if (config.get("SCR_COPY_TYPE") or "").upper() == "RS":
            names += DECIDED_WITH_RS
    return names


def stated(config: ScrConfig) -> ScrConfig:
    """`config` with SCR's compiled default written for each decided parameter it leaves out
    (after the ones it has, so that its own order and descriptors are kept)."""
    params = dict(config.params)
    missing = {name: _default(name) for name in decided_names(config) if name not in params}
    if not missing:
        return config
    return ScrConfig.build({**params, **missing}, config.descriptors, config.target_version)


def _default(name: str) -> str:
    """SCR's compiled default as a person reads it (`32MB`, not `33554432`)."""
    param = BY_NAME[name]
    return format_bytes(int(param.default)) if param.kind is Kind.BYTES else param.default


def for_scr(config: ScrConfig, form: str, conf_path: str = "scrtune-scr.conf") -> str:
    """`config` as SCR is to read it (stated), in one of the forms a job passes to SCR: `env`
    (exports to eval), `conf` (a config file), `srun` (`--export=`), `scr-config` (strings
    for scr.config(), a line each)."""
    config = stated(config)
    if form == "env":
        return config.env(conf_path)
    if form == "conf":
        return config.conf()
    if form == "srun":
        return config.srun_export(conf_path) + "\n"
    if form == "scr-config":
        return "\n".join(config.scr_config()) + "\n"
    raise ValueError(f"not a form SCR reads: {form}")
