"""One exception hierarchy for everything scrtune raises on purpose."""

from __future__ import annotations


class ScrtuneError(Exception):
    """Base of every error scrtune raises deliberately; its message is one line for users."""


class TraceError(ScrtuneError):
    """A trace file or path could not be read at all."""


class UsageError(ScrtuneError):
    """A command was called with arguments that cannot work."""


class StoreError(ScrtuneError):
    """A daemon state file could not be opened or read."""


class StoreUnavailable(StoreError):
    """The state file cannot be written now (a full disk, a read-only file); reads still work."""
