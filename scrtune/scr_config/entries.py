"""Config files and environments to entries, the way SCR's parser reads them, with the
syntax pitfalls it meets on the way (src/scr_config.c; scr-observed.md §4)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

DESCRIPTOR_KEYS = ("STORE", "CKPT", "GROUPS", "CACHEDIR", "CNTLDIR", "CACHE")
MAX_SHOWN = 240  # characters of a finding's message in a line for people


@dataclass(frozen=True)
class Finding:
    """One pitfall: where, how bad, which rule, and what SCR will do."""

    source: str  # a file path, or "environment"
    line: int  # 1-based line in the file; 0 for the environment
    severity: str  # "error" or "warning"
    code: str
    message: str
    name: str = ""

    def render(self) -> str:
        """One line for people; a message swollen by a long value or name is cut (the JSON
        output keeps it whole)."""
        where = f"{self.source}:{self.line}" if self.line else self.source
        message = self.message if len(self.message) <= MAX_SHOWN else \
            self.message[:MAX_SHOWN - 3] + "..."
        return f"{where}: {self.severity}: {message} [{self.code}]"


@dataclass(frozen=True)
class Entry:
    """`KEY=VALUE` with the children of a descriptor line (`CKPT=0 TYPE=XOR ...`)."""

    source: str
    line: int
    key: str  # as SCR sees it: upper-cased from files, as written from the environment
    value: str
    children: tuple[tuple[str, str], ...] = ()
    written_key: str = ""  # as written, before SCR upper-cases it

    def child(self, name: str) -> str | None:
        for key, value in self.children:
            if key == name:
                return value
        return None


def read_text(text: str, source: str) -> tuple[list[Entry], list[Finding]]:
    """Entries of a config file's text, and its syntax findings."""
    entries: list[Entry] = []
    findings: list[Finding] = []
    lines = text.split("\n")
    swallow_next = False
    for number, raw in enumerate(lines, start=1):
        if raw.endswith("\r"):
            findings.append(Finding(source, number, "error", "crlf", "CRLF line end: SCR keeps "
                                    "the \\r in the value (byte counts are rejected)"))
            raw = raw[:-1]
        line = _strip_comment(raw).strip()
        if swallow_next:
            swallow_next = False
            if line:
                findings.append(Finding(source, number, "error", "swallowed-line",
                                        "this line is lost: SCR swallows the line after an "
                                        "ill-formed one"))
            continue
        if not line:
            continue
        entry, problem, swallow_next = _parse_line(line, number, source)
        if problem is not None:
            findings.append(problem)
        if entry is not None:
            entries.append(entry)
    return entries, findings


def _strip_comment(line: str) -> str:
    # `#` starts a comment only at the start of a token; glued to a value it is part of it.
    match = re.search(r"(^|\s)#", line)
    return line[: match.start()] if match else line


def _parse_line(line: str, number: int, source: str) -> tuple[Entry | None, Finding | None, bool]:
    if re.match(r"export\s", line):
        return None, Finding(source, number, "error", "export", "`export` in a config file: "
                             "SCR reports an ill-formed pair and then crashes (segfault) in "
                             "SCR_Init; write KEY=VALUE"), True
    if line.startswith("="):
        return None, Finding(source, number, "error", "missing-key",
                             "a value with no key: SCR skips the line"), False
    # Tokens end at whitespace or `=`: `KEY = VALUE` is one pair, as SCR reads it.
    pairs = re.findall(r"([^\s=]+)\s*=\s*([^\s]*)|([^\s=]+)", line)
    if any(bare for _, _, bare in pairs):
        bare = next(b for _, _, b in pairs if b)
        return None, Finding(source, number, "error", "no-equals", f"`{bare}` has no `=`: SCR "
                             "reports an ill-formed pair and also drops the next line"), True
    (key, value, _), rest = pairs[0], pairs[1:]
    children = tuple((k.upper(), v) for k, v, _ in rest)
    return Entry(source, number, key.upper(), value, children, key), None, False


def read_environment(environ: Mapping[str, str]) -> list[Entry]:
    """The environment variables SCR could see (any case: lower-case ones are pitfalls)."""
    return [
        Entry("environment", 0, name, value, written_key=name)
        for name, value in sorted(environ.items())
        if name.upper().startswith("SCR_") or name in DESCRIPTOR_KEYS
    ]
