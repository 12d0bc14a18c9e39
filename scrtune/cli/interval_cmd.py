"""`scrtune interval`: Young's and Daly's optimal checkpoint interval, or a multi-level plan.

Imports only the interval models: it answers in the time Python takes to start.
"""

from __future__ import annotations

import argparse
import json
import sys

from scrtune.cli.argtypes import format_option, seconds
from scrtune.errors import UsageError
from scrtune.goodput import intervals

MODELS = {"young": intervals.young, "daly": intervals.daly, "daly1": intervals.daly_first_order}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ckpt-cost", type=seconds, metavar="S",
                        help="blocking checkpoint cost, seconds")
    parser.add_argument("--mtbf", type=seconds, metavar="S",
                        help="mean time between failures of the job, seconds")
    parser.add_argument("--level", action="append", default=[], metavar="COST:MTBF",
                        help="with --model multilevel: one level's cost and the MTBF of the "
                        "failures it recovers from, cheapest first (repeat)")
    parser.add_argument("--restart", type=seconds, default=0.0, metavar="S",
                        help="restart time after a failure, seconds")
    parser.add_argument("--model", choices=("young", "daly", "daly1", "multilevel"),
                        default="daly", help="daly: Daly's higher-order estimate; daly1: his "
                        "first-order one; young: sqrt(2CM); multilevel: one --level per level")
    format_option(parser)


def run(args: argparse.Namespace) -> int:
    if args.model == "multilevel":
        return _multilevel(args)
    if args.level:
        raise UsageError("--level goes with --model multilevel")
    if args.ckpt_cost is None or args.mtbf is None:
        raise UsageError("--ckpt-cost and --mtbf are required")
    if args.ckpt_cost <= 0 or args.mtbf <= 0:
        raise UsageError("--ckpt-cost and --mtbf must be positive")
    if args.ckpt_cost >= args.mtbf:
        return _no_progress(args.model, f"the checkpoint cost ({args.ckpt_cost:,.1f} s) reaches "
                            f"the MTBF ({args.mtbf:,.1f} s)", args.format)
    interval = MODELS[args.model](args.ckpt_cost, args.mtbf)
    # "cannot progress" is decided by the model that gives the interval: Daly's higher-order
    # interval comes from his complete model, whose waste stays below 1 where the first-order
    # sum passes it (his own published case: 80%, not 149%)
    waste = intervals.daly_waste(interval, args.ckpt_cost, args.mtbf, args.restart) \
        if args.model == "daly" else \
        intervals.expected_waste(interval, args.ckpt_cost, args.mtbf, args.restart)
    if waste >= 1.0:
        return _no_progress(args.model, f"the expected waste reaches {100 * waste:,.0f}% "
                            f"(checkpoint {args.ckpt_cost:,.1f} s, restart {args.restart:,.1f} s, "
                            f"MTBF {args.mtbf:,.1f} s)", args.format)
    if args.format == "json":
        _print_json({"model": args.model, "interval_s": interval, "expected_waste": waste,
                     "progress": True})
    else:
        sys.stdout.write(f"{args.model}: checkpoint every {interval:,.1f} s of compute "
                         f"({interval / 60:,.1f} min); expected waste {100 * waste:.2f}%\n")
    return 0


def _no_progress(model: str, why: str, form: str) -> int:
    """Exit 1: an interval would be meaningless, the job's expected progress is nil."""
    if form == "json":
        _print_json({"model": model, "interval_s": None, "expected_waste": 1.0,
                     "progress": False, "reason": why})
    else:
        sys.stdout.write(f"{model}: the job cannot progress: {why}; make checkpoints cheaper "
                         f"(cache, smaller state) or failures rarer\n")
    return 1


def _levels(texts: list[str]) -> list[tuple[float, float]]:
    levels = []
    for number, text in enumerate(texts, 1):
        parts = text.split(":")
        try:
            cost, mtbf = (seconds(part) for part in parts) if len(parts) == 2 else (0.0, 0.0)
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--level {text}: {exc}") from None
        if cost <= 0 or mtbf <= 0:
            raise UsageError(f"--level {text}: takes COST:MTBF, both positive seconds, "
                             "e.g. --level 5:86400")
        if levels and cost < levels[-1][0]:
            raise UsageError(f"--level {text}: levels go cheapest first, and level {number} "
                             f"costs less than level {number - 1} ({levels[-1][0]:g} s)")
        levels.append((cost, mtbf))
    if not levels:
        raise UsageError("--model multilevel needs --level COST:MTBF, one per level")
    return levels


def _multilevel(args: argparse.Namespace) -> int:
    if args.ckpt_cost is not None or args.mtbf is not None:
        raise UsageError("--model multilevel takes --level COST:MTBF instead of --ckpt-cost and "
                         "--mtbf")
    levels = _levels(args.level)
    if levels[0][0] >= levels[0][1]:
        return _no_progress("multilevel", f"level 1's cost ({levels[0][0]:,.1f} s) reaches "
                            f"its MTBF ({levels[0][1]:,.1f} s)", args.format)
    ks, base, waste = intervals.multilevel(levels)
    if waste >= 1.0:
        return _no_progress("multilevel", f"the expected waste reaches {100 * waste:,.0f}%",
                            args.format)
    if args.format == "json":
        _print_json({"model": "multilevel", "interval_s": base, "every": ks,
                     "expected_waste": waste, "progress": True})
    else:
        lines = [f"level {i + 1}: every {'checkpoint' if k == 1 else f'{k} checkpoints'} "
                 f"({k * base:,.1f} s)" for i, k in enumerate(ks)]
        sys.stdout.write(f"checkpoint every {base:,.1f} s of compute\n" + "\n".join(lines)
                         + f"\nexpected waste {100 * waste:.2f}%\n")
    return 0


def _print_json(body: dict) -> None:
    sys.stdout.write(json.dumps(body) + "\n")
