"""How far into each forwarded trace file the daemon has taken lines, so that `scrtune forward`
can resend after a restart or a drop and every line is counted exactly once.

`accepted` moves when a Lines message is queued for intake (the loop thread decides, in
arrival order); `taken` when its records are in the statistics. The snapshot saves `taken`
with the statistics in one transaction, so a restarted daemon resumes where its saved
statistics end, and tells forwarders so.
"""

from __future__ import annotations

from scrtune.daemon.protocol import Lines, LinesView

MAX_SOURCES = 65_536  # trace files one node's daemon follows: one per process, at most


class SourceOffsets:
    def __init__(self, durable: dict[str, int] | None = None) -> None:
        self.accepted: dict[str, int] = dict(durable or {})
        self.taken: dict[str, int] = dict(durable or {})

    def accept(self, lines: Lines | LinesView) -> bool:
        """True when `lines` continues its source exactly where the daemon stands; then it
        stands at its end. Anything else (a resend of lines taken, a gap after a drop, a
        source past MAX_SOURCES) is refused and counted by the caller."""
        expected = self.accepted.get(lines.source)
        if expected is None and len(self.accepted) >= MAX_SOURCES:
            return False
        if lines.start != (expected or 0):
            return False
        self.accepted[lines.source] = lines.end
        return True

    def taken_through(self, source: str, end: int) -> None:
        if end > self.taken.get(source, 0):
            self.taken[source] = end

    def of(self, sources: list[str]) -> dict[str, int]:
        return {source: self.accepted.get(source, 0) for source in sources}
