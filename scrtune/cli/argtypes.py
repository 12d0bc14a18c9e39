"""Argument types shared by the commands: argparse prints their ArgumentTypeError as the usual
one-line error, with exit code 2."""

from __future__ import annotations

import argparse
import math
import os
import re

from scrtune.errors import UsageError

MAX_SECONDS = 1e12  # about 31,700 years: beyond it the interval models overflow


def finite_float(text: str) -> float:
    """A number that is not nan or infinite (float() accepts both)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"not a finite number: {text!r}")
    return value


def seconds(text: str) -> float:
    """A duration: finite, not negative, at most MAX_SECONDS."""
    value = finite_float(text)
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"not a duration between 0 and {MAX_SECONDS:g} s: {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A duration above 0 (a step time of 0 would make every second slowdown)."""
    value = seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"not a duration above 0 s: {text!r}")
    return value


def port(text: str) -> int:
    """A TCP port, 1-65535."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port from 1 to 65535: {text!r}")
    return value


def request_timeout(text: str) -> float:
    """How long one request may wait: above 0, at most an hour."""
    value = finite_float(text)
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"not a timeout above 0 and at most 3600 s: {text!r}")
    return value


def whole_number(text: str, minimum: int = 1) -> int:
    """A whole number of at least `minimum`, or the argparse error that names it."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < minimum:
        raise argparse.ArgumentTypeError(
            f"not a positive whole number: {text!r}" if minimum == 1 else
            f"not {minimum} or more: {text!r}")
    return value


def positive_int(text: str) -> int:
    return whole_number(text, 1)


def non_negative_int(text: str) -> int:
    return whole_number(text, 0)


def byte_size(text: str) -> int:
    """A size above 0 in bytes, read as SCR reads its byte counts (scr_config.values), with
    `KiB`/`MiB`/`GiB` taken as `KB`/`MB`/`GB` (powers of 1024 either way): `65536`, `64MiB`,
    `64M`."""
    from scrtune.scr_config.values import byte_count

    try:
        value = byte_count(re.sub(r"(?i)([KMGTPE])iB$", r"\1B", re.sub(r"\s+", "", text)))
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"not a size in bytes above 0 (e.g. 64MiB): {text!r}")
    return value


def ckpt_pattern_option(parser: argparse.ArgumentParser, defaults: str = "the defaults"
                        ) -> None:
    """`--ckpt-pattern`, the same wherever checkpoint files are told apart (the commands that
    read traces, and the daemon): checked by traces.checkpoint_patterns."""
    parser.add_argument("--ckpt-pattern", action="append", default=None, metavar="REGEX",
                        help="path pattern marking checkpoint files (repeatable; replaces "
                        f"{defaults})")


def check_out(path: str, force: bool, option: str = "-o") -> None:
    """Before any work: `path` can be written (a missing directory or one this user cannot
    write is said now, not after a measurement of minutes is lost), and is not replaced
    without --force. `-` is standard output."""
    if path == "-":
        return
    if os.path.isdir(path):
        raise UsageError(f"{option} {path}: is a directory")
    if os.path.exists(path) and not force:
        raise UsageError(f"{path} exists: give --force to replace it, or another {option}")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"{option} {path}: no directory {folder}")
    if not os.access(folder, os.W_OK):
        raise UsageError(f"{option} {path}: {folder} is not writable")


def format_option(parser: argparse.ArgumentParser) -> None:
    """`--format table|json`, the same on every command that has nothing else to print."""
    parser.add_argument("--format", choices=("table", "json"), default="table",
                        help="table: readable text for people; json: one JSON object for "
                        "machines")
