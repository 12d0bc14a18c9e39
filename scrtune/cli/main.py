"""`scrtune COMMAND ...`: one table of commands drives dispatch, `--help` and the README.

Exit codes (every command): 0 success; 1 the command ran but found problems it reports
(for commands that say so); 2 bad arguments or input that could not be used at all, with a
one-line error on stderr; 130 interrupted. `lint` adds 3: the configuration has errors.

Each command's module is imported only when that command runs (or shows its --help): numpy,
ZeroMQ and the daemon cost a few hundred milliseconds that `scrtune --help` must not pay.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from scrtune import __version__
from scrtune.errors import ScrtuneError

EXIT_OK, EXIT_PROBLEMS, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130

# scrtune calls no BLAS routine, but OpenBLAS starts a thread per core when numpy loads, and
# they spin for a while: CPU taken from replay's parse threads and, beside a training job,
# from the job. Set before any command imports numpy; a user's own setting wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

DESCRIPTION = """scrtune tunes LLNL's SCR checkpoint library for the job that uses it. It reads
the job's own DFTracer I/O traces (write sizes, files per rank, checkpoint cost, bandwidth),
derives SCR settings and runtime actions, and measures the job's goodput. It works offline on
recorded traces (replay, recommend, study, goodput) and live, as a per-node daemon beside the
application (daemon, forward, status, query). SCR reads its parameters once, in SCR_Init:
every recommendation takes effect at the next SCR_Init."""


@dataclass(frozen=True)
class Command:
    name: str
    summary: str
    example: str
    module: str  # under scrtune.cli, imported when the command is chosen
    configure: str = "configure"
    run: str = "run"
    # when it returns, the command has closed everything it opened and printed all it says:
    # the console script may end the process without tearing the interpreter down
    ends_quickly: bool = False

    def load(self) -> tuple[Callable[[argparse.ArgumentParser], None],
                            Callable[[argparse.Namespace], int]]:
        module = importlib.import_module(f"scrtune.cli.{self.module}")
        return getattr(module, self.configure), getattr(module, self.run)


COMMANDS: tuple[Command, ...] = (
    Command("replay", "read DFTracer traces and summarise their checkpoint I/O",
            "scrtune replay traces/ --format json   |   scrtune replay --example",
            "replay_cmd", ends_quickly=True),
    Command("recommend", "derive intents from traces and the SCR configuration they lead to",
            "scrtune recommend traces/ --system corona.toml --nodes 8 --format env",
            "recommend_cmd", ends_quickly=True),
    Command("study", "predict blocking, flush time and goodput for a grid of SCR "
            "configurations at several node counts, calibrated from traces",
            "scrtune study run42/ --system corona.toml --nodes 2,4,8,16 --plot study.png"
            "   |   scrtune study --example", "study_cmd", run="run_study"),
    Command("profile", "measure this node (cores, memory, write/read rates and call latency of "
            "the node-local store and a parallel file system directory) into a system profile",
            "scrtune profile --parallel /p/lustre/$USER/ckpt -o sys.toml && "
            "scrtune recommend traces/ --system sys.toml", "profile_cmd"),
    Command("calibrate", "fit SCR's own flush, encode and write rates on this system to timed "
            "runs of a job under several SCR configurations, into the system profile",
            "scrtune calibrate trace/ --runs runs.json --system sys.toml -o sys-scr.toml && "
            "scrtune recommend trace/ --system sys-scr.toml", "calibrate_cmd"),
    Command("daemon", "run the per-node daemon: event intake, recommendations, recorded events",
            "srun --ntasks-per-node=1 --overlap scrtune daemon --system sys.toml &",
            "daemon_cmds", "configure_daemon", "run_daemon"),
    Command("forward", "follow growing DFTracer trace files and send their lines to the daemon",
            "scrtune forward \"$DFTRACER_LOG_DIR\" &",
            "daemon_cmds", "configure_forward", "run_forward"),
    Command("relay", "hold DFTracer's ZeroMQ writer endpoint for the application's whole "
            "life and pass its buffers to the daemon (the writer hangs the application in "
            "exit while nothing is bound there)",
            "scrtune relay ipc://$TMPDIR/dft.sock & "
            "DFTRACER_ZMQ_ENDPOINT=ipc://$TMPDIR/dft.sock srun ./app; kill %1",
            "relay_cmd"),
    Command("status", "ask the node's daemon for its counters, clients and recommendation",
            "scrtune status --format json", "daemon_cmds", "configure_status", "run_status"),
    Command("relaunch", "after a run under scr_run: exit 0 when the daemon halted it to "
            "relaunch with better settings (the halt is cleared), 1 when not",
            "scr_run srun -n 64 ./train; while scrtune relaunch; do scr_run srun -n 64 ./train; "
            "done", "daemon_cmds", "configure_relaunch", "run_relaunch"),
    Command("query", "print the recommended SCR settings for a job script (from the daemon, or "
            "from --trace files when none runs)",
            'eval "$(scrtune query --format env)"', "daemon_cmds", "configure_query",
            "run_query"),
    Command("goodput", "goodput and badput of a job from its recorded events (exit 1 when the "
            "events overlap inconsistently)",
            "scrtune goodput --db state.sqlite --job llama   |   scrtune goodput --log "
            "job-goodput.log --ideal-step-time 120", "goodput_cmds", "configure_goodput",
            "run_goodput"),
    Command("interval", "optimal compute time between checkpoints (Young, Daly, multi-level) "
            "and expected waste (exit 1 when the job cannot progress)",
            "scrtune interval --ckpt-cost 300 --mtbf 86400 --format json", "interval_cmd"),
    Command("lint", "find what SCR v3 would misread, ignore or abort on in a config file or the "
            "environment (exit 0 clean, 1 warnings only, 3 errors, 2 bad arguments)",
            "scrtune lint $SCR_PREFIX/.scrconf   |   scrtune lint --env --format json",
            "lint_cmd"),
)

EPILOG = """exit codes: 0 success; 1 problems found (commands that report findings);
2 bad arguments or unusable input (one-line error on stderr); 130 interrupted"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2, like every other error
        self.exit(EXIT_ERROR, f"{self.prog}: error: {message}\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; an option's default after its help, unless the help says it
    or there is none worth saying (off, unset)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, [], "", argparse.SUPPRESS) \
                or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


def _chosen(argv: list[str]) -> str | None:
    """The command named on the line: the first word that is not an option."""
    return next((word for word in argv if not word.startswith("-")), None)


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (given argv) one whose only configured command is the chosen one."""
    chosen = _chosen(argv) if argv is not None else None
    parser = _Parser(prog="scrtune", description=DESCRIPTION, epilog=EPILOG,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"scrtune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for command in COMMANDS:
        # examples one per line: joined by " | " they read as a shell pipe (issue 49)
        examples = [e.strip() for e in command.example.split("   |   ")]
        child = sub.add_parser(command.name, help=command.summary, description=command.summary,
                               epilog=("examples:\n" if len(examples) > 1 else "example:\n")
                               + "".join(f"  {e}\n" for e in examples) + f"\n{EPILOG}",
                               formatter_class=HelpFormatter)
        if argv is None or command.name == chosen:
            configure, run = command.load()
            configure(child)
            child.set_defaults(_run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
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


def console() -> None:
    """The `scrtune` console script (and `python -m scrtune`): main(), then the exit.

    Tearing the interpreter down (numpy's and every module's objects freed one by one) took
    0.03-0.05 s of a 1.1 s replay (benchmarks/RESULTS.md, issue 14), time a job script waits
    for. After a command marked `ends_quickly`, which holds no file, thread or process open
    when it returns, the output is flushed and the process ends at once (os._exit; the kernel
    frees its memory in one go). Not under MPI (mpi4py finalizes MPI at exit, and mpirun
    needs it), nor when a thread still runs; handlers registered with atexit before the
    command ran do not run: callers who need them call main()."""
    code = main()
    command = next((c for c in COMMANDS if c.name == _chosen(sys.argv[1:])), None)
    if command is None or not command.ends_quickly or "mpi4py.MPI" in sys.modules \
            or threading.active_count() > 1:
        sys.exit(code)
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # a closed pipe or a full disk: the interpreter reports it, as always
        sys.exit(code)
    os._exit(code)


if __name__ == "__main__":
    console()
