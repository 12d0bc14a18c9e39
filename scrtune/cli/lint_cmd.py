"""`scrtune lint`: what SCR v3 would misread, ignore, abort on or crash over."""

from __future__ import annotations

import argparse
import dataclasses
import sys

import msgspec

from scrtune.cli.argtypes import format_option
from scrtune.errors import UsageError
from scrtune.scr_config.lint import LintReport, NotText, lint_environment, lint_file


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", metavar="FILE",
                        help="an SCR config file (SCR_CONF_FILE, .scrconf or scr.conf)")
    parser.add_argument("--env", action="store_true",
                        help="lint the SCR variables of the current environment")
    parser.add_argument("--nodes", type=int, default=0, metavar="N",
                        help="the nodes the job runs on: checks what depends on them (RS "
                        "aborts SCR_Init on N nodes when N is no more than its parity blocks)")
    format_option(parser)


def run(args: argparse.Namespace) -> int:
    if bool(args.file) == bool(args.env):
        raise UsageError("give one config FILE, or --env")
    if args.nodes < 0:
        raise UsageError(f"--nodes {args.nodes}: a node count is 1 or more (0: unknown)")
    if args.env:
        report = lint_environment(nodes=args.nodes)
    else:
        try:
            report = lint_file(args.file, args.nodes)
        except OSError as exc:
            raise UsageError(f"{args.file}: {exc.strerror or exc}") from None
        except NotText as exc:
            raise UsageError(str(exc)) from None
    sys.stdout.write(_json(report) if args.format == "json" else _table(report))
    return report.exit_code


def _table(report: LintReport) -> str:
    lines = [f.render() for f in report.findings]
    lines.append(f"{report.errors} errors, {report.warnings} warnings"
                 + ("" if report.findings else ": SCR v3 reads this as written"))
    return "\n".join(lines) + "\n"


def _json(report: LintReport) -> str:
    body = {"errors": report.errors, "warnings": report.warnings,
            "findings": [dataclasses.asdict(f) for f in report.findings]}
    return msgspec.json.encode(body).decode() + "\n"
