"""`scrtune recommend`: intents from traces, and the SCR configuration they lead to."""

from __future__ import annotations

import argparse
import os
import sys

import msgspec

from scrtune.cli.argtypes import positive_int
from scrtune.cli.render import fit, table
from scrtune.cli.traces import (
    job_interval_option,
    keeping_cadence,
    replay_for,
    replay_options,
    trace_options,
    with_example,
)
from scrtune.engine.replay import EXAMPLE_PROFILE, EXAMPLE_TRACE, ReplayOptions
from scrtune.errors import UsageError
from scrtune.intents.inputs import SystemProfile, WorkloadStats, profile_from, with_nodes
from scrtune.scr_config.decided import SCR_FORMS, for_scr
from scrtune.scr_config.mapping import Recommendation, recommend

FORMATS = ("table", "env", "conf", "scr-config", "srun", "json")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("traces", nargs="*", metavar="TRACE",
                        help="trace files, directories or globs (as for replay)")
    parser.add_argument("--example", action="store_true",
                        help="use the shipped trace and the example system profile")
    parser.add_argument("--system", metavar="FILE",
                        help="system profile (TOML); default: this machine, measured")
    parser.add_argument("--nodes", type=positive_int, default=None,
                        help="plan for this many nodes (default: the profile's)")
    parser.add_argument("--format", choices=FORMATS, default="table",
                        help="table: intents and settings for people; env: shell exports; "
                        "conf: an SCR config file; scr-config: strings for scr.config(); "
                        "srun: --export; json")
    parser.add_argument("--conf-path", default=os.path.abspath("scrtune-scr.conf"),
                        help="with --format env or srun: where descriptor lines (CKPT=...) "
                        "are written, named by SCR_CONF_FILE")
    job_interval_option(parser)
    trace_options(parser)


def run(args: argparse.Namespace) -> int:
    paths = with_example(args.traces, args.example, EXAMPLE_TRACE)
    system = args.system or (EXAMPLE_PROFILE if args.example else None)
    profile = profile_from(system)
    if args.nodes:
        profile = with_nodes(profile, args.nodes)
    result = recommend_traces(paths, profile, replay_options(args), args.job_interval_s)
    text = render(result, args.format, args.conf_path)
    if args.format == "srun" and result.config.descriptors:
        try:  # srun --export cannot carry descriptor lines: they go to the file it names
            with open(args.conf_path, "w") as handle:
                handle.write(result.config.descriptor_conf())
        except OSError as exc:
            raise UsageError(f"--conf-path {args.conf_path}: {exc.strerror}") from exc
    sys.stdout.write(text)
    return 0


def recommend_traces(paths: list[str], profile: SystemProfile,
                     options: ReplayOptions | None = None,
                     job_interval: float | str | None = None) -> Recommendation:
    """Traces (files, directories or globs) replayed, then mapped to a recommendation. What
    the replay warns of goes to stderr; traces without a single event are a UsageError (a
    recommendation from nothing would look like one from something). `job_interval`: the
    cadence the job keeps on its own (--job-interval-s)."""
    summary = replay_for(paths, "recommend from", options)
    return recommend(keeping_cadence(WorkloadStats.from_summary(summary), job_interval),
                     profile)


def render(result: Recommendation, form: str, conf_path: str) -> str:
    if form in SCR_FORMS:  # with the defaults it decided
        return for_scr(result.config, form, conf_path)
    if form == "json":  # the served form: SCR's defaults left out
        return msgspec.json.encode(result.as_json()).decode() + "\n"
    out = [f"SCR configuration for SCR v{result.target_version}, taking effect "
           f"{result.takes_effect}", f"system: {result.profile}", ""]
    out.append(table(["intent", "scope", "confidence", "evidence"],
                     [[i.name, i.scope, f"{i.confidence:.1f}", line if n == 0 else ""]
                      for i in result.intents for n, line in enumerate(i.evidence[:1])]))
    for intent in result.intents:
        out.append(f"{intent.name}:")
        out += [f"  - {line}" for line in intent.evidence]
    out.append("\nconfiguration (scrtune recommend --format conf|env|scr-config):")
    out += [f"  {line}" for line in for_scr(result.config, "conf").splitlines()[1:]]
    out.append("\nruntime actions (the client, around each output):")
    out += [f"  {a.kind}: {a.value_text()} ({a.detail})" for a in result.runtime_actions]
    return fit("\n".join(out) + "\n")
