"""Every way SCR v3 would misread, ignore, abort on or crash over a configuration.

`lint_text` for a config file (`SCR_CONF_FILE`, `.scrconf`, the system `scr.conf`),
`lint_environment` for the variables a job would pass. Severity `error`: SCR reads something
other than what is written, aborts or crashes; `warning`: SCR ignores it or it does nothing.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from scrtune.scr_config.catalogue import (
    BY_NAME,
    DESCRIPTORS,
    NOT_SCR,
    Effect,
    Kind,
)
from scrtune.scr_config.entries import Entry, Finding, read_environment, read_text
from scrtune.scr_config.rules import across_entries
from scrtune.scr_config.values import INT_MAX, byte_count, check_value


@dataclass(frozen=True)
class LintReport:
    findings: tuple[Finding, ...]

    @property
    def errors(self) -> int:
        return sum(f.severity == "error" for f in self.findings)

    @property
    def warnings(self) -> int:
        return sum(f.severity == "warning" for f in self.findings)

    @property
    def exit_code(self) -> int:
        """0 clean, 1 warnings only, 3 errors (2 is every command's "bad arguments")."""
        return EXIT_ERRORS if self.errors else 1 if self.warnings else 0


def lint_text(text: str, source: str = "<config>", nodes: int = 0) -> LintReport:
    """`nodes`: the nodes the job runs on, for what depends on them (0: unknown)."""
    entries, findings = read_text(text, source)
    findings += _entries(entries, from_file=True)
    findings += _repeated(entries)
    findings += across_entries(entries, source, nodes)
    return _report(findings)


EXIT_ERRORS = 3
GZIP_MAGIC = b"\x1f\x8b"


class NotText(ValueError):
    """The file is compressed or binary: no SCR config file."""


def read_config(path: str) -> str:
    """An SCR config file's text. Raises OSError, or NotText for a gzip or binary file (whose
    bytes, linted, would be hundreds of findings of noise)."""
    with open(path, "rb") as handle:
        data = handle.read()
    if data.startswith(GZIP_MAGIC):
        raise NotText(f"{path}: gzip-compressed, not an SCR config file (decompress it first)")
    if b"\0" in data[:65536]:
        raise NotText(f"{path}: a binary file (NUL bytes), not an SCR config file")
    # SCR reads bytes; a stray non-UTF-8 byte in a text file is linted as a replacement char
    return data.decode("utf-8", errors="replace")


def lint_file(path: str, nodes: int = 0) -> LintReport:
    """Lint an SCR config file; raises what read_config raises."""
    return lint_text(read_config(path), path, nodes)


def lint_environment(environ: Mapping[str, str] | None = None, nodes: int = 0) -> LintReport:
    """The SCR variables of an environment, with the config file its SCR_CONF_FILE names:
    SCR reads both, the environment winning (so the env form of a configuration with CKPT=
    lines, whose descriptors live in that file, lints as SCR reads it)."""
    environ = os.environ if environ is None else environ
    entries = read_environment(environ)
    findings = _entries(entries, from_file=False)
    from_file: list[Entry] = []
    conf = environ.get("SCR_CONF_FILE")
    if conf:
        try:
            text = read_config(conf)
        except OSError as exc:
            findings.append(Finding("environment", 0, "warning", "conf-file-unreadable",
                                    f"SCR_CONF_FILE={conf}: {exc.strerror or exc}; SCR ignores "
                                    "it without a word", "SCR_CONF_FILE"))
        except NotText as exc:
            findings.append(Finding("environment", 0, "error", "conf-file-not-text",
                                    f"SCR_CONF_FILE: {exc}; SCR would read its bytes as "
                                    "malformed lines", "SCR_CONF_FILE"))
        else:
            from_file, file_findings = read_text(text, conf)
            findings += file_findings + _entries(from_file, from_file=True)
    return _report(findings + across_entries(from_file + entries, "environment", nodes))


def _report(findings: list[Finding]) -> LintReport:
    return LintReport(tuple(sorted(findings, key=lambda f: (f.source, f.line, f.code))))


def _entries(entries: list[Entry], from_file: bool) -> list[Finding]:
    found: list[Finding] = []
    for entry in entries:
        def add(severity: str, code: str, message: str, e: Entry = entry) -> None:
            found.append(Finding(e.source, e.line, severity, code, message, e.key))

        if entry.key in DESCRIPTORS and not from_file:
            add("error", "descriptor-in-environment",
                f"{entry.key} in the environment: SCR takes the whole value as the "
                f"{entry.key.lower()}'s name, without its keys (COUNT, TYPE, ... lost), and it "
                f"replaces every {entry.key}= line of the config files; put descriptor lines "
                "in the file SCR_CONF_FILE names")
        elif entry.key in DESCRIPTORS:
            _descriptor(entry, add)
        elif not from_file and entry.written_key != entry.written_key.upper():
            add("error", "lower-case-name", f"{entry.written_key}: SCR ignores it (names are "
                "case-sensitive outside config files); write "
                f"{entry.written_key.upper()}")
        else:
            _simple(entry, from_file, add)
    return found


def _simple(entry: Entry, from_file: bool, add) -> None:
    name, value = entry.key, entry.value
    if name in NOT_SCR:
        add("error", "not-scr", f"{name} is not an SCR parameter: {NOT_SCR[name]}")
        return
    param = BY_NAME.get(name)
    if param is None:
        near = difflib.get_close_matches(name, BY_NAME, n=1, cutoff=0.8)
        if near:
            add("error", "near-miss", f"{name} is not an SCR parameter (SCR ignores it): did "
                f"you mean {near[0]}?")
        else:
            add("warning", "unknown-name", f"{name} is not an SCR parameter: SCR ignores it")
        return
    if from_file and "${" in value:
        add("error", "brace-var", f"{name}: SCR config files expand $VAR but not ${{VAR}}: the "
            "entry is dropped")
    if entry.children:
        add("warning", "stray-children", f"{name} takes one value; the rest of the line is "
            "stored under it and ignored")
    if name != "SCR_COPY_TYPE":  # FILE mode is judged with the CKPT lines, in _across
        problem = check_value(param.kind, value, param.values)
        if problem is not None:
            add(problem.severity, problem.code, f"{name}: {problem.message}")
    if param.kind is Kind.BYTES and name == "SCR_MPI_BUF_SIZE" and _bytes(value) > INT_MAX:
        add("error", "too-large", f"{name}={value} does not fit in an int")
    if param.effect is Effect.UNUSED_V3:
        add("warning", "ignored-v3", f"{name} is parsed and ignored by SCR v3"
            + (f" ({param.note})" if param.note else ""))
    elif param.effect is Effect.SCRIPTS and from_file and "environment only" in param.note:
        add("warning", "scripts-env-only", f"{name} is read by scr_run from the environment "
            "only, never from a config file")


def _descriptor(entry: Entry, add) -> None:
    keys = {k.name: k for k in DESCRIPTORS[entry.key]}
    if entry.key == "CACHE":
        add("warning", "ignored-v3", "CACHE= lines are not read by SCR v3: use STORE= and CKPT=")
        return
    for child, value in entry.children:
        spec = keys.get(child)
        if entry.key == "GROUPS":
            continue  # GROUPS=<host> NAME=value: any names
        if spec is None:
            add("warning", "unknown-key", f"{entry.key}={entry.value}: {child} is not a key of "
                f"{entry.key} lines ({', '.join(keys) or 'none'}); SCR ignores it")
            continue
        problem = check_value(spec.kind, value, spec.values)
        if problem is not None:
            add(problem.severity, problem.code, f"{entry.key}={entry.value} {child}: "
                f"{problem.message}")
    if entry.key == "CKPT" and entry.child("SET_SIZE") is not None:
        add("warning", "ckpt-set-size", f"CKPT={entry.value} SET_SIZE is ignored: the set size "
            "is the global SCR_SET_SIZE (a per-CKPT SET_SIZE only validates SET_FAILURES)")


def _repeated(entries: list[Entry]) -> list[Finding]:
    seen: dict[str, Entry] = {}
    found: list[Finding] = []
    for entry in entries:
        if entry.key in DESCRIPTORS:
            continue
        earlier = seen.get(entry.key)
        if earlier is not None and earlier.value != entry.value:
            found.append(Finding(entry.source, entry.line, "warning", "repeated-key",
                                 f"{entry.key} also set on line {earlier.line}: the last "
                                 "distinct value wins, and SCR_Config queries return nothing",
                                 entry.key))
        seen[entry.key] = entry
    return found


def _bytes(value: str) -> int:
    try:
        return byte_count(value)
    except ValueError:
        return 0


