"""SCR's parameters as data: what the v3.1 library reads, how it parses each value, its default
as the code has it (not the docs), and whether v3 does anything with it.

Every library parameter is read once, in `SCR_Init` (`scr_get_params`, src/scr.c:625-1295);
nothing changes while a job runs except the halt file. Sources: scr-facts.md §2 (code at
LLNL/scr 85e30b1 = v3.1.0 library) and scr-observed.md (the real library, run).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Kind(str, enum.Enum):
    """How SCR parses the value."""

    FLAG = "0/1 flag (atoi: words such as true become 0)"
    INT = "integer (atoi: junk becomes 0, suffixes are cut off)"
    BYTES = "byte count (scr_abtoull: number with optional K/M/G/T/P/E[B], powers of 1024)"
    FLOAT = "float (strtod: junk becomes 0)"
    ENUM_CI = "one of a set of words, case-insensitive"
    ENUM_CS = "one of a set of words, case-sensitive"
    PATH = "path"
    STRING = "string"


class Effect(str, enum.Enum):
    USED = "used by the v3 library"
    UNUSED_V3 = "parsed by the v3 library and then ignored"
    SCRIPTS = "read by the scr_run job scripts only (environment), not by the library"


@dataclass(frozen=True)
class Param:
    name: str
    kind: Kind
    default: str  # as compiled into the code; "" when unset
    effect: Effect = Effect.USED
    values: tuple[str, ...] = ()  # for enumerations
    needs_cache: bool = False  # no effect while SCR_CACHE_BYPASS=1 (the default)
    note: str = ""

    @property
    def read_when(self) -> str:
        """Library parameters are read once, in SCR_Init; nothing re-reads them while the job
        runs (only the halt file is consulted again)."""
        if self.effect is Effect.SCRIPTS:
            return "when scr_run / scr_postrun start"
        return "once, in SCR_Init"


COPY_TYPES = ("SINGLE", "PARTNER", "XOR", "RS")
FLUSH_TYPES = ("SYNC", "PTHREAD", "BBAPI", "DATAWARP", "DEFAULT", "NATIVE")
MIB = 1 << 20

_F, _I, _B, _P, _S = Kind.FLAG, Kind.INT, Kind.BYTES, Kind.PATH, Kind.STRING

LIBRARY: tuple[Param, ...] = (
    Param("SCR_ENABLE", _F, "1", note="also read straight from the environment in SCR_Init"),
    Param("SCR_DEBUG", _I, "0"),
    Param("SCR_PREFIX", _P, "", note="default: the current working directory"),
    Param("SCR_CONF_FILE", _P, "", note="default: $SCR_PREFIX/.scrconf"),
    Param("SCR_CURRENT", _S, ""),
    Param("SCR_DROP_AFTER_CURRENT", _F, "0"),
    Param("SCR_USER_NAME", _S, "", note="default: $USER; SCR_Init aborts if neither is set"),
    Param("SCR_JOB_ID", _S, ""),
    Param("SCR_JOB_NAME", _S, ""),
    Param("SCR_CLUSTER_NAME", _S, ""),
    Param("SCR_CNTL_BASE", _P, "/dev/shm"),
    Param("SCR_CACHE_BASE", _P, "/dev/shm"),
    Param("SCR_CACHE_SIZE", _I, "1", needs_cache=True, note="keep >= 2 with asynchronous flush"),
    Param("SCR_CACHE_BYPASS", _F, "1", note="1 = write straight to the prefix directory"),
    Param("SCR_CACHE_PURGE", _F, "0"),
    Param("SCR_COPY_TYPE", Kind.ENUM_CI, "XOR", values=COPY_TYPES, needs_cache=True,
          note="any other word selects FILE mode: CKPT= descriptors, or SCR_Init aborts"),
    Param("SCR_GROUP", _S, "NODE", needs_cache=True),
    Param("SCR_SET_SIZE", _I, "8", needs_cache=True, note="global; per-CKPT SET_SIZE is ignored"),
    Param("SCR_SET_FAILURES", _I, "2", needs_cache=True, note="RS only; 1 <= k <= set size"),
    Param("SCR_HALT_SECONDS", _I, "0"),
    Param("SCR_HALT_EXIT", _F, "0"),
    Param("SCR_MPI_BUF_SIZE", _B, str(MIB), needs_cache=True, note="must fit in an int"),
    Param("SCR_FILE_BUF_SIZE", _B, str(32 * MIB), needs_cache=True),
    Param("SCR_COPY_METADATA", _F, "1"),
    Param("SCR_AXL_MKDIR", _F, "0"),
    Param("SCR_DISTRIBUTE", _F, "1"),
    Param("SCR_FETCH", _F, "1"),
    Param("SCR_FETCH_BYPASS", _F, "0"),
    Param("SCR_FETCH_WIDTH", _I, "256", Effect.UNUSED_V3),
    Param("SCR_FLUSH", _I, "10", needs_cache=True, note="0 disables flushing, even at Finalize"),
    Param("SCR_FLUSH_WIDTH", _I, "256", Effect.UNUSED_V3,
          note="used for flow control by SCR v2 only"),
    Param("SCR_FLUSH_TYPE", Kind.ENUM_CS, "SYNC", values=FLUSH_TYPES, needs_cache=True,
          note="an unknown or lower-case value aborts at the first flush"),
    Param("SCR_FLUSH_ASYNC", _F, "0", needs_cache=True),
    Param("SCR_FLUSH_POSTSTAGE", _F, "0", needs_cache=True, note="BBAPI stores only"),
    Param("SCR_FLUSH_ASYNC_BW", _B, str(200 * MIB), Effect.UNUSED_V3),
    Param("SCR_FLUSH_ASYNC_PERCENT", Kind.FLOAT, "0.0", Effect.UNUSED_V3),
    Param("SCR_FLUSH_ASYNC_USLEEP", _I, "1000"),
    Param("SCR_FLUSH_ON_RESTART", _F, "0"),
    Param("SCR_GLOBAL_RESTART", _F, "0"),
    Param("SCR_PREFIX_SIZE", _I, "0", note="0 keeps every checkpoint"),
    Param("SCR_PREFIX_PURGE", _F, "0"),
    Param("SCR_CRC_ON_COPY", _F, "0"),
    Param("SCR_CRC_ON_FLUSH", _F, "1", Effect.UNUSED_V3,
          note="the library ignores it; scr_postrun's scavenge reads the environment variable"),
    Param("SCR_CRC_ON_DELETE", _F, "0"),
    Param("SCR_CHECKPOINT_INTERVAL", _I, "0"),
    Param("SCR_CHECKPOINT_SECONDS", _I, "0"),
    Param("SCR_CHECKPOINT_OVERHEAD", Kind.FLOAT, "0.0", note="percent: 5 means 5%"),
    Param("SCR_LOG_ENABLE", _F, "0"),
    Param("SCR_LOG_TXT_ENABLE", _F, "1"),
    Param("SCR_LOG_SYSLOG_ENABLE", _F, "1"),
    Param("SCR_LOG_DB_ENABLE", _F, "0"),
    Param("SCR_LOG_DB_DEBUG", _F, "0"),
    Param("SCR_LOG_DB_HOST", _S, ""),
    Param("SCR_LOG_DB_USER", _S, ""),
    Param("SCR_LOG_DB_PASS", _S, ""),
    Param("SCR_LOG_DB_NAME", _S, ""),
)

SCRIPTS: tuple[Param, ...] = tuple(
    Param(name, kind, default, Effect.SCRIPTS, note=note)
    for name, kind, default, note in (
        ("SCR_RUNS", _I, "1", "environment only; values below 1 become 1 (no 'unlimited')"),
        ("SCR_RETRIES", _I, "0", "environment only; used when SCR_RUNS is unset"),
        ("SCR_MIN_NODES", _I, "", "environment only"),
        ("SCR_EXCLUDE_NODES", _S, "", ""),
        ("SCR_WATCHDOG", _F, "0", "environment only; must be exactly 1"),
        ("SCR_WATCHDOG_TIMEOUT", _I, "", ""),
        ("SCR_WATCHDOG_TIMEOUT_PFS", _I, "", ""),
        ("SCR_NODELIST", _S, "", "environment only"),
        ("SCR_NODE_TESTS", _S, "", "environment only"),
        ("SCR_END_TIME", _I, "", "read with getenv by the library: allocation end, epoch s"),
    )
)

BY_NAME: dict[str, Param] = {p.name: p for p in LIBRARY + SCRIPTS}

# Names people guess that SCR never reads, with what to use instead (scr-facts.md §2.4).
NOT_SCR: dict[str, str] = {
    **dict.fromkeys(("SCR_USER_CONF", "SCR_USER_CONFIG", "SCR_APP_CONF"), "use SCR_CONF_FILE"),
    "SCR_CONFIG_FILE": "a CMake option fixing the system config path, not read at run time",
    **dict.fromkeys(("SCR_AXL_THREADS", "AXL_THREADS", "AXL_NUM_THREADS", "SCR_FLUSH_THREADS",
                     "SCR_THREADS"),
                    "SCR has no thread knob: PTHREAD flush uses min(CPUs, 16, files) per rank"),
    **dict.fromkeys(("SCR_AXL_TYPE", "SCR_XFER_TYPE", "SCR_TRANSFER_TYPE"),
                    "use SCR_FLUSH_TYPE or FLUSH= on a STORE line"),
    "SCR_FETCH_TYPE": "compile-time only; fetch is always SYNC",
    **dict.fromkeys(("SCR_CHECKPOINT_FREQUENCY", "SCR_CKPT_INTERVAL"),
                    "use SCR_CHECKPOINT_INTERVAL, SCR_CHECKPOINT_SECONDS or _OVERHEAD"),
    "SCR_HOP_DISTANCE": "removed",
    **dict.fromkeys(("SCR_HALT_ENABLED", "SCR_USE_CONTAINERS", "SCR_CONTAINER_SIZE",
                     "SCR_PRESERVE_DIRECTORIES"), "a v1/v2 name that v3 does not read"),
    **dict.fromkeys(("SCR_DB_ENABLE", "SCR_DB_HOST", "SCR_DB_USER", "SCR_DB_PASS",
                     "SCR_DB_NAME"), "v3 reads SCR_LOG_DB_* instead"),
    "SCR_PURGE": "use SCR_CACHE_PURGE (cache) or SCR_PREFIX_PURGE (prefix directory)",
}


@dataclass(frozen=True)
class DescriptorKey:
    name: str
    kind: Kind
    default: str  # a value, or the name of the parameter it defaults to
    values: tuple[str, ...] = ()
    note: str = ""


DESCRIPTORS: dict[str, tuple[DescriptorKey, ...]] = {
    "STORE": (
        DescriptorKey("GROUP", _S, "NODE"),
        DescriptorKey("COUNT", _I, "SCR_CACHE_SIZE"),
        DescriptorKey("ENABLED", _F, "1"),
        DescriptorKey("MKDIR", _F, "1"),
        DescriptorKey("FLUSH", Kind.ENUM_CS, "SCR_FLUSH_TYPE", FLUSH_TYPES),
        DescriptorKey("VIEW", Kind.ENUM_CS, "PRIVATE", ("PRIVATE", "GLOBAL")),
    ),
    "CKPT": (
        DescriptorKey("INTERVAL", _I, "1"),
        DescriptorKey("GROUP", _S, "SCR_GROUP"),
        DescriptorKey("STORE", _P, "SCR_CACHE_BASE"),
        DescriptorKey("TYPE", Kind.ENUM_CI, "SCR_COPY_TYPE", COPY_TYPES),
        DescriptorKey("BYPASS", _F, "SCR_CACHE_BYPASS"),
        DescriptorKey("OUTPUT", _F, "0"),
        DescriptorKey("ENABLED", _F, "1"),
        DescriptorKey("SET_SIZE", _I, "SCR_SET_SIZE", note="only validates SET_FAILURES"),
        DescriptorKey("SET_FAILURES", _I, "SCR_SET_FAILURES"),
    ),
    "GROUPS": (),  # GROUPS=<host> <NAME>=<value> ...: any names
    # Read by the scripts' dir_capacity node test only; the library ignores these lines.
    "CACHEDIR": (DescriptorKey("BYTES", _B, ""),),
    "CNTLDIR": (DescriptorKey("BYTES", _B, ""),),
    # A v2 form: the key is defined but libscr v3 never reads it (use STORE= and CKPT=).
    "CACHE": (DescriptorKey("SIZE", _I, ""),),
}
BUILTIN_GROUPS = ("NODE", "WORLD")
