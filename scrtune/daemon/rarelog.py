"""Unexpected failures, logged so that hostile input cannot flood the daemon's log: each kind
of exception in full the first few times, then one line every thousandth occurrence."""

from __future__ import annotations

import logging
import sys

FIRST = 5
EVERY = 1000


class RareLog:
    def __init__(self, log: logging.Logger) -> None:
        self._log = log
        self._counts: dict[str, int] = {}  # exception type name -> occurrences

    def exception(self, message: str, *args: object) -> None:
        """Call from an `except` block, as logging's exception()."""
        kind = getattr(sys.exc_info()[0], "__name__", "?")
        count = self._counts[kind] = self._counts.get(kind, 0) + 1
        if count <= FIRST:
            self._log.exception(message, *args)
        elif count % EVERY == 0:
            self._log.warning(message + " (%s, %d times so far)", *args, kind, count)
