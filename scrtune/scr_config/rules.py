"""Lint rules that need the whole configuration at once (scr-facts.md §3.3, §5, §6)."""

from __future__ import annotations

import os

from scrtune.scr_config.catalogue import BUILTIN_GROUPS, BY_NAME, COPY_TYPES
from scrtune.scr_config.entries import Entry, Finding
from scrtune.scr_config.values import check_value


class _View:
    """What SCR ends up with: the last value of each simple key, and the descriptor lines."""

    def __init__(self, entries: list[Entry]) -> None:
        self.simple: dict[str, Entry] = {}
        self.lines: dict[str, list[Entry]] = {}
        for entry in entries:
            if entry.key in ("STORE", "CKPT", "GROUPS", "CACHEDIR", "CNTLDIR", "CACHE"):
                self.lines.setdefault(entry.key, []).append(entry)
            elif entry.written_key == entry.written_key.upper() or entry.source != "environment":
                self.simple[entry.key] = entry

    def value(self, name: str) -> str:
        entry = self.simple.get(name)
        return entry.value if entry is not None else BY_NAME[name].default

    def int_value(self, name: str, fallback: int) -> int:
        try:
            return int(self.value(name))
        except ValueError:
            return fallback


def across_entries(entries: list[Entry], source: str, nodes: int = 0) -> list[Finding]:
    """`nodes`: the job's node count, for the checks that depend on it (0: unknown)."""
    view = _View(entries)
    found: list[Finding] = []
    found += _copy_type(view, source)
    found += _rs(view, source)
    found += _set_sizes(view, source, nodes)
    found += _checkpoint_lines(view)
    found += _groups(view)
    found += _bypass(view)
    found += _async(view)
    found += _poststage(view)
    return found


def _poststage(view: _View) -> list[Finding]:
    entry = view.simple.get("SCR_FLUSH_POSTSTAGE")
    if entry is None or _int(entry.value, 0) == 0:
        return []
    return [Finding(entry.source, entry.line, "error", "poststage-crash",
                    "SCR_FLUSH_POSTSTAGE=1 crashes SCR v3.1.0 (segfault at the first "
                    "asynchronous flush, whatever the flush type: a freed pointer in "
                    "scr_flush_async_start); leave it unset", "SCR_FLUSH_POSTSTAGE")]


def _at(view: _View, name: str, source: str) -> tuple[str, int]:
    entry = view.simple.get(name)
    return (entry.source, entry.line) if entry is not None else (source, 0)


def _copy_type(view: _View, source: str) -> list[Finding]:
    copy_type = view.value("SCR_COPY_TYPE")
    ckpts = view.lines.get("CKPT", [])
    where = _at(view, "SCR_COPY_TYPE", source)
    if copy_type.upper() not in COPY_TYPES:
        if not ckpts:
            return [Finding(*where, "error", "copy-type-file-mode",
                            f"SCR_COPY_TYPE={copy_type} is not SINGLE, PARTNER, XOR or RS, so SCR "
                            "uses CKPT= lines, and there are none here: SCR_Init aborts "
                            "('Failed to define checkpoints') unless another layer defines them",
                            "SCR_COPY_TYPE")]
        return []
    if ckpts:
        return [Finding(ckpts[0].source, ckpts[0].line, "warning", "ckpt-ignored",
                        f"CKPT= lines are used only when SCR_COPY_TYPE is not one of "
                        f"{', '.join(COPY_TYPES)} (it is {copy_type}): set SCR_COPY_TYPE=FILE",
                        "CKPT")]
    return []


def _rs(view: _View, source: str) -> list[Finding]:
    """SET_FAILURES k: SCR requires 1 <= k <= set size for every copy type (else it disables
    the descriptor and SCR_Init aborts); RS needs k below the set size it actually forms (redset
    aborts otherwise), and k=1 quietly becomes XOR (scr-observed.md, second round)."""
    simple = "SCR_SET_FAILURES" in view.simple or view.value("SCR_COPY_TYPE").upper() == "RS"
    return [finding for check in _schemes(view, source, simple, "SCR_SET_FAILURES")
            if (finding := _set_failures(*check))]


def _schemes(view: _View, source: str, simple: bool, at: str
             ) -> list[tuple[str, int, str, str, int, int]]:
    """(source, line, what, copy type, set failures, set size) of each CKPT line, and first of
    the simple setting when `simple` (placed where the parameter `at` is set)."""
    set_size = view.int_value("SCR_SET_SIZE", 8)
    failures = view.int_value("SCR_SET_FAILURES", 2)
    copy_type = view.value("SCR_COPY_TYPE").upper()
    found = [(*_at(view, at, source), f"SCR_COPY_TYPE={copy_type}", copy_type, failures,
              set_size)] if simple else []
    for entry in view.lines.get("CKPT", []):
        found.append((entry.source, entry.line, f"CKPT={entry.value}",
                      (entry.child("TYPE") or copy_type).upper(),
                      _int(entry.child("SET_FAILURES"), failures),
                      _int(entry.child("SET_SIZE"), set_size)))
    return found


def _set_sizes(view: _View, source: str, nodes: int) -> list[Finding]:
    """XOR needs sets of 2 at least (SCR_Init aborts on SCR_SET_SIZE=1); RS needs more nodes
    than its parity blocks, since its sets span one rank per node (redset aborts SCR_Init on
    2 nodes with k=2; 1 node is fine: SCR falls back to SINGLE there)."""
    found = []
    copy_type = view.value("SCR_COPY_TYPE").upper()
    for where, line, what, kind, k, n in _schemes(view, source, copy_type in COPY_TYPES,
                                                  "SCR_COPY_TYPE"):
        if kind in ("XOR", "RS") and n < 2:
            found.append(Finding(where, line, "error", "set-size-one",
                                 f"{what} with SCR_SET_SIZE={n}: {kind} needs sets of 2 or more; "
                                 "SCR_Init aborts", "SCR_SET_SIZE"))
        if kind == "RS" and 1 < nodes <= k:
            found.append(Finding(where, line, "error", "rs-too-few-nodes",
                                 f"{what} with SET_FAILURES={k} on {nodes} nodes: its sets span "
                                 f"one rank per node and redset aborts SCR_Init with no more "
                                 f"ranks in a set than parity blocks; use XOR there",
                                 "SCR_COPY_TYPE"))
    return found


def _set_failures(source: str, line: int, what: str, kind: str, k: int, n: int
                  ) -> Finding | None:
    if k < 1 or k > n:
        return Finding(source, line, "error", "set-failures-range",
                       f"{what}: SET_FAILURES={k} is outside [1, {n}] (the set size): SCR "
                       "disables the descriptor, whatever its type, and SCR_Init aborts",
                       "SCR_SET_FAILURES")
    if kind == "RS" and k >= n:
        return Finding(source, line, "error", "rs-set-failures",
                       f"{what}: RS with SET_FAILURES={k} and SET_SIZE={n}: on fewer than {n} "
                       "nodes SCR forms smaller sets and redset aborts SCR_Init (sets of k "
                       "ranks or fewer), and on a full set it protects no more than PARTNER; "
                       "keep k below the set size", "SCR_SET_FAILURES")
    if kind == "RS" and k == 1:
        return Finding(source, line, "warning", "rs-becomes-xor",
                       f"{what}: RS with SET_FAILURES=1 is turned into XOR", "SCR_SET_FAILURES")
    return None


def _int(value: str | None, fallback: int) -> int:
    try:
        return int(value) if value is not None else fallback
    except ValueError:
        return fallback


def _checkpoint_lines(view: _View) -> list[Finding]:
    ckpts = view.lines.get("CKPT", [])
    if not ckpts or view.value("SCR_COPY_TYPE").upper() in COPY_TYPES:
        return []
    found = []
    stores = {_norm(e.value) for e in view.lines.get("STORE", [])}
    stores.add(_norm(view.value("SCR_CACHE_BASE")))
    for entry in ckpts:
        store = entry.child("STORE")
        if store is not None and _norm(store) not in stores:
            found.append(Finding(entry.source, entry.line, "error", "store-missing",
                                 f"CKPT={entry.value} STORE={store} names no STORE= line and is "
                                 "not SCR_CACHE_BASE: SCR disables this descriptor", "CKPT"))
    indexes: dict[str, Entry] = {}
    for entry in ckpts:
        if entry.value in indexes:
            found.append(Finding(entry.source, entry.line, "error", "duplicate-ckpt",
                                 f"CKPT={entry.value} twice (also line {indexes[entry.value].line})"
                                 ": SCR_Init aborts", "CKPT"))
        indexes.setdefault(entry.value, entry)
    usable = [e for e in ckpts if e.child("ENABLED") != "0"
              and (e.child("INTERVAL") or "1") == "1"]
    if not usable:
        first = ckpts[0]
        found.append(Finding(first.source, first.line, "error", "no-interval-1",
                             "no enabled CKPT= line has INTERVAL=1: SCR_Init aborts", "CKPT"))
    return found


def _norm(path: str) -> str:
    return os.path.normpath(path) if path else path


def _groups(view: _View) -> list[Finding]:
    known = set(BUILTIN_GROUPS)
    for entry in view.lines.get("GROUPS", []):
        known.update(key for key, _ in entry.children)
    found = []
    named = [(view.simple.get("SCR_GROUP"), view.value("SCR_GROUP"))]
    lines = view.lines.get("CKPT", []) + view.lines.get("STORE", [])
    named += [(e, e.child("GROUP")) for e in lines]
    for entry, group in named:
        if entry is not None and group is not None and group not in known:
            found.append(Finding(entry.source, entry.line, "error", "unknown-group",
                                 f"group {group} is not NODE, WORLD or defined by a GROUPS= line: "
                                 "SCR dereferences a missing group and crashes", "SCR_GROUP"))
    return found


def _bypass(view: _View) -> list[Finding]:
    if view.value("SCR_CACHE_BYPASS") != "1":
        return []
    found = []
    for name, entry in view.simple.items():
        param = BY_NAME.get(name)
        if param is not None and param.needs_cache and entry.value != param.default:
            found.append(Finding(entry.source, entry.line, "warning", "needs-cache",
                                 f"{name} has no effect while SCR_CACHE_BYPASS=1 (the default): "
                                 "files go straight to the prefix directory", name))
    return found


def _async(view: _View) -> list[Finding]:
    entry = view.simple.get("SCR_FLUSH_ASYNC")
    if entry is None or entry.value != "1" or view.value("SCR_CACHE_BYPASS") == "1":
        return []
    found = []
    if view.value("SCR_FLUSH_TYPE") == "SYNC":
        found.append(Finding(entry.source, entry.line, "warning", "async-sync",
                             "SCR_FLUSH_ASYNC=1 with SCR_FLUSH_TYPE=SYNC copies synchronously "
                             "anyway: use PTHREAD", "SCR_FLUSH_ASYNC"))
    if check_value(BY_NAME["SCR_CACHE_SIZE"].kind, view.value("SCR_CACHE_SIZE")) is None \
            and view.int_value("SCR_CACHE_SIZE", 1) < 2:
        found.append(Finding(entry.source, entry.line, "warning", "async-cache-size",
                             "SCR_FLUSH_ASYNC=1 with SCR_CACHE_SIZE below 2: the next checkpoint "
                             "waits for the flush to finish", "SCR_CACHE_SIZE"))
    return found
