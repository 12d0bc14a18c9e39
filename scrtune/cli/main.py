"""`scrtune COMMAND ...`: one table of commands drives dispatch, `--help` and the README.

Exit codes (every command): 0 success; 1 the command ran but found problems it reports
(for commands that say so); 2 bad arguments or input that could not be used at all, with a
one-line error on stderr; 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from dataclasses import dataclass

from scrtune import __version__
from scrtune.cli import (
    daemon_cmds,
    goodput_cmds,
    lint_cmd,
    recommend_cmd,
    replay_cmd,
    study_cmd,
)
from scrtune.errors import ScrtuneError

EXIT_OK, EXIT_PROBLEMS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    example: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


COMMANDS: tuple[Command, ...] = (
    Command(
        name="replay",
        summary="read DFTracer traces and summarise their checkpoint I/O",
        example="scrtune replay traces/ --format json   |   scrtune replay --example",
        configure=replay_cmd.configure,
        run=replay_cmd.run,
    ),
    Command(
        name="recommend",
        summary="derive intents from traces and the SCR configuration they lead to",
        example="scrtune recommend traces/ --system corona.toml --nodes 8 --format env",
        configure=recommend_cmd.configure,
        run=recommend_cmd.run,
    ),
    Command(
        name="study",
        summary="predict blocking, flush time and goodput for a grid of SCR configurations at "
        "several node counts, calibrated from traces",
        example="scrtune study run42/ --system corona.toml --nodes 2,4,8,16 --plot study.png",
        configure=study_cmd.configure,
        run=study_cmd.run_study,
    ),
    Command(
        name="daemon",
        summary="run the per-node daemon: event intake, recommendations, recorded events",
        example="srun --ntasks-per-node=1 --overlap scrtune daemon --system sys.toml &",
        configure=daemon_cmds.configure_daemon,
        run=daemon_cmds.run_daemon,
    ),
    Command(
        name="forward",
        summary="follow growing DFTracer trace files and send their lines to the daemon",
        example="scrtune forward \"$DFTRACER_LOG_DIR\" &",
        configure=daemon_cmds.configure_forward,
        run=daemon_cmds.run_forward,
    ),
    Command(
        name="status",
        summary="ask the node's daemon for its counters, clients and recommendation",
        example="scrtune status --format json",
        configure=daemon_cmds.configure_status,
        run=daemon_cmds.run_status,
    ),
    Command(
        name="query",
        summary="print the recommended SCR settings for a job script (from the daemon, or "
        "from --trace files when none runs)",
        example='eval "$(scrtune query --format env)"',
        configure=daemon_cmds.configure_query,
        run=daemon_cmds.run_query,
    ),
    Command(
        name="goodput",
        summary="goodput and badput of a job from its recorded events (exit 1 when the "
        "events overlap inconsistently)",
        example="scrtune goodput --db state.sqlite --job llama   |   scrtune goodput --log "
        "job-goodput.log --ideal-step-time 120",
        configure=goodput_cmds.configure_goodput,
        run=goodput_cmds.run_goodput,
    ),
    Command(
        name="interval",
        summary="optimal compute time between checkpoints (Young, Daly) and expected waste",
        example="scrtune interval --ckpt-cost 300 --mtbf 86400 --format json",
        configure=goodput_cmds.configure_interval,
        run=goodput_cmds.run_interval,
    ),
    Command(
        name="lint",
        summary="find what SCR v3 would misread, ignore or abort on in a config file or the "
        "environment (exit 0 clean, 1 warnings, 2 errors)",
        example="scrtune lint $SCR_PREFIX/.scrconf   |   scrtune lint --env --format json",
        configure=lint_cmd.configure,
        run=lint_cmd.run,
    ),
)

EPILOG = """exit codes: 0 success; 1 problems found (commands that report findings);
2 bad arguments or unusable input (one-line error on stderr); 130 interrupted"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other error
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="scrtune",
        description=__doc__.splitlines()[0],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"scrtune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        child = sub.add_parser(
            command.name,
            help=command.summary,
            description=command.summary,
            epilog=f"example:\n  {command.example}\n\n{EPILOG}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        command.configure(child)
        child.set_defaults(_run=command.run)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help()
        return EXIT_ERROR
    try:
        return args._run(args)
    except ScrtuneError as exc:
        print(f"scrtune {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `scrtune ... | head`
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
