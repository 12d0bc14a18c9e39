"""`scrtune daemon`, `scrtune status`, `scrtune query`: the per-node daemon and job scripts."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time

import msgspec

from scrtune.cli.argtypes import (
    byte_size,
    ckpt_pattern_option,
    finite_float,
    format_option,
    port,
    request_timeout,
    seconds,
)
from scrtune.cli.render import fit
from scrtune.client.connection import DIRECTORY_ENV, DaemonClient, requests_endpoint
from scrtune.daemon.endpoints import announce_tcp, default_endpoints, hold_lock, local_task
from scrtune.daemon.halt import allocation_end_s
from scrtune.errors import ScrtuneError, UsageError
from scrtune.extras import missing
from scrtune.goodput.tuner import PRIOR_WEIGHT_S
from scrtune.intents.inputs import profile_from
from scrtune.scr_config.config import ScrConfig
from scrtune.scr_config.decided import for_scr
from scrtune.scr_config.servable import out_of_bounds
from scrtune.units import human_seconds


def configure_daemon(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help="directory for IPC sockets, state and log (default: "
                        "$SCRTUNE_DIR, else $XDG_RUNTIME_DIR or the temp dir / scrtune-<uid> / "
                        "<job id>, 0700)")
    parser.add_argument("--tcp", metavar="[HOST:]PORT", help="listen on TCP instead "
                        "(requests on PORT, events on PORT+1; loopback unless HOST is given)")
    parser.add_argument("--dftracer-endpoint", action="append", default=[], metavar="ENDPOINT",
                        help="also take events here, e.g. tcp://127.0.0.1:5555 for DFTracer's "
                        "ZeroMQ writer (DFTRACER_ZMQ_ENDPOINT)")
    parser.add_argument("--db", help="SQLite state file (default: DIR/state.sqlite)")
    parser.add_argument("--system", metavar="FILE", help="system profile (TOML)")
    parser.add_argument("--foreground", action="store_true", help="log to stderr")
    parser.add_argument("--snapshot-s", type=seconds, default=5.0,
                        help="seconds between state snapshots (default 5; longer, up to "
                        "60, while saving a large state takes over 1%% of the daemon's time)")
    parser.add_argument("--scr-conf-file", default=os.environ.get("SCR_CONF_FILE", ""),
                        help="rewrite this SCR config file after each checkpoint, for the next "
                        "SCR_Init (default: $SCR_CONF_FILE)")
    parser.add_argument("--allow-restart", action="store_true",
                        help="halt the job through scr_halt when relaunching it with the rewritten "
                        "SCR_CONF_FILE gains more over the rest of the allocation than a "
                        "restart costs (the job script relaunches: see `scrtune relaunch`)")
    parser.add_argument("--prefix", default=os.environ.get("SCR_PREFIX", os.getcwd()),
                        help="SCR_PREFIX, for scr_halt (default: $SCR_PREFIX or the cwd)")
    parser.add_argument("--end-time", type=finite_float, default=0.0,
                        help="allocation end, epoch seconds (default: $SCR_END_TIME, else "
                        "Slurm's end of the job's allocation)")
    parser.add_argument("--restart-cost-s", type=seconds, default=300.0,
                        help="what a relaunch costs, seconds (default 300)")
    parser.add_argument("--mtbf-prior-weight-s", type=seconds, default=PRIOR_WEIGHT_S,
                        metavar="SECONDS",
                        help="how much of the job's own running the profile's MTBF counts as "
                        "when the job's crashes update it (default %(default)g; 0: the job's "
                        "crashes alone, never below the profile's failure rate)")
    parser.add_argument("--tensorboard", metavar="DIR",
                        help="write goodput and badput to this TensorBoard log directory "
                        "(needs the [tensorboard] extra)")
    parser.add_argument("--records-log", metavar="FILE",
                        help="also append every goodput record to FILE, JSON lines for "
                        "`scrtune goodput --log` (%%h: the host name); put it on a file system "
                        "that outlives the node")
    parser.add_argument("--metrics-port", type=port, default=None, metavar="PORT",
                        help="serve goodput, badput and intake counters as Prometheus metrics "
                        "on http://127.0.0.1:PORT/metrics")
    ckpt_pattern_option(parser, "the defaults, as for replay")
    parser.add_argument("--intake-queue", type=byte_size, default=64 << 20, metavar="SIZE",
                        help="bytes of event messages held for processing, each message "
                        "counted with 1 KiB more for its keeping; beyond it they are dropped "
                        "and counted (default 64MiB)")


def run_daemon(args: argparse.Namespace) -> int:
    from scrtune.daemon.identity import adopt, job_identity
    from scrtune.daemon.loop import LoopSettings, serve
    from scrtune.daemon.records_log import RecordsLog
    from scrtune.daemon.service import RestartPolicy, Service
    from scrtune.engine.replay import fewer_collections
    from scrtune.goodput.store import Store

    if local_task(os.environ) > 0 and not args.dir:
        # `srun scrtune daemon` with several tasks on a node: the node's first task serves it
        print(f"scrtune daemon: task {local_task(os.environ)} on this node; its task 0 runs "
              "the node's daemon", file=sys.stderr)
        return 0
    endpoints = default_endpoints(args.dir or os.environ.get(DIRECTORY_ENV),
                                  args.tcp, tuple(args.dftracer_endpoint), serving=True)
    lock_fd = hold_lock(endpoints.directory)  # before the sockets: refused, it binds nothing
    announce_tcp(endpoints, args.tcp)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s scrtune daemon %(process)d: %(message)s",
        **({"stream": sys.stderr} if args.foreground else
           {"filename": os.path.join(endpoints.directory, "daemon.log")}))
    if not (args.dir or os.environ.get(DIRECTORY_ENV) or args.db):
        # a default directory is named after a job id that another job may have had
        moved = adopt(endpoints.directory, job_identity())
        if moved:
            logging.getLogger("scrtune.daemon").warning("%s", moved)
    profile = profile_from(args.system)
    store = Store(args.db or os.path.join(endpoints.directory, "state.sqlite"))
    for problem in store.problems:  # damaged, empty or missing: said, and recovered from
        logging.getLogger("scrtune.daemon").warning("%s", problem)
    try:
        settings = LoopSettings(snapshot_interval_s=args.snapshot_s,
                                intake_queue_bytes=args.intake_queue)
        restart = RestartPolicy(prefix=args.prefix,
                                end_time_s=args.end_time or allocation_end_s(),
                                restart_cost_s=args.restart_cost_s) if args.allow_restart else None
        from scrtune.cli.traces import checkpoint_patterns  # --ckpt-pattern, as replay's

        service = Service(store, profile, args.scr_conf_file, restart,
                          prior_weight_s=args.mtbf_prior_weight_s,
                          patterns=checkpoint_patterns(args.ckpt_pattern)
                          if args.ckpt_pattern else None)
        if args.records_log:
            service.records_log = RecordsLog(args.records_log)
        if args.tensorboard or args.metrics_port:
            from scrtune.daemon.exports import Exports

            try:
                service.exports = Exports(args.tensorboard or "", args.metrics_port or 0)
            except ImportError:
                raise missing("--tensorboard", "tensorboardX", "tensorboard") from None
            except OSError as exc:  # the port in use, or the directory not one
                which = f"--metrics-port {args.metrics_port}" if args.metrics_port and \
                    getattr(exc, "filename", None) is None else f"--tensorboard {args.tensorboard}"
                raise UsageError(f"{which}: {exc.strerror or exc}") from None
        try:
            with fewer_collections():  # the engine's many small containers, as in replay
                stopped_by = serve(service, endpoints, settings)
        finally:
            if service.exports is not None:
                service.exports.close()
            if service.records_log is not None:
                service.records_log.close()
    finally:
        store.close()
        os.close(lock_fd)
    return 130 if stopped_by == signal.SIGINT else 0


def _client_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dir", help="the daemon's directory (as given to scrtune daemon; "
                        "default: $SCRTUNE_DIR, else the daemon's default); with --endpoint "
                        "tcp://..., where its CURVE keys are")
    parser.add_argument("--endpoint", help="the daemon's request endpoint, e.g. tcp://host:7700")
    parser.add_argument("--timeout-s", type=request_timeout, default=1.0,
                        help="per request attempt (two attempts)")
    parser.add_argument("--wait-s", type=seconds, default=0.0,
                        help="wait up to this long for a daemon that is still starting, as "
                        "right after `srun ... scrtune daemon &` (default 0)")


def _client(args: argparse.Namespace) -> DaemonClient:
    endpoint = args.endpoint or requests_endpoint(args.dir)
    client = DaemonClient(endpoint, timeout_s=args.timeout_s, retries=1, name="scrtune cli",
                          key_dir=args.dir,  # a daemon on TCP: its CURVE keys are there
                          says_fallback=False)  # each command says an unanswered request
    deadline = time.monotonic() + args.wait_s
    while args.wait_s and client.hello() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    return client


def _unanswered(client: DaemonClient, wait_s: float) -> str:
    """Why a command's request went unanswered, with the wait the command allowed."""
    return client.unanswered + (f"; waited {wait_s:g} s for it to start" if wait_s else "")


def configure_status(parser: argparse.ArgumentParser) -> None:
    _client_args(parser)
    format_option(parser)


def _result(client: DaemonClient, reply, wait_s: float) -> object:
    """A reply's result, or the one-line error of no answer or a refusal."""
    if reply is None:
        raise ScrtuneError(f"no scrtune daemon answered at {client.endpoint} "
                           f"({_unanswered(client, wait_s)})")
    if not reply.ok:
        raise ScrtuneError(f"the daemon refused: {reply.error}")
    return reply.result


def run_status(args: argparse.Namespace) -> int:
    client = _client(args)
    result = _result(client, client.status(), args.wait_s)
    if args.format == "json":
        sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
        return 0
    assert isinstance(result, dict)
    lines = [f"{result['daemon']} (pid {result['pid']}), up {human_seconds(result['uptime_s'])}"]
    lines += [f"  {k}: {v:,.3f}" if isinstance(v, float) else f"  {k}: {v:,}"
              for k, v in result["counters"].items()]
    lines.append(f"  clients: {', '.join(result['clients']) or '-'}")
    failures = result.get("failures") or {}
    if failures:
        lines.append(f"  job MTBF: {human_seconds(result['job_mtbf_s'])} ("
                     f"{failures['crashes']:,} crashes in {human_seconds(failures['observed_s'])}"
                     f"; prior {human_seconds(failures['prior_mtbf_s'])} counted as "
                     f"{human_seconds(failures['prior_weight_s'])} of running)")
    for experiment in result.get("experiments", []):  # the words the daemon's log has
        lines.append(f"  experiment {experiment['before']} -> {experiment['after']}: "
                     f"{experiment.get('summary', experiment['verdict'])}")
    if result.get("halt"):
        lines.append(f"  halt: {result['halt']['reason']}")
    served, latest = result["recommendation"], result.get("latest") or result["recommendation"]
    lines.append("  recommendation: " + " ".join(
        f"{k}={v}" for k, v in served.get("scr", {}).items() if k != "descriptors"))
    if latest.get("config_id") != served.get("config_id"):
        lines.append(f"  latest computed: {latest.get('config_id')}, not served: "
                     f"{result.get('why_served') or '-'}")
    intents = latest.get("intents", [])
    if intents:
        lines.append(f"  intents of the latest computation, from {result['counters']['records']:,}"
                     " records (confidence, first evidence):")
        lines += [f"    {i['name']} ({i['confidence']:.1f}): {(i['evidence'] or ['-'])[0]}"
                  for i in intents]
    sys.stdout.write(fit("\n".join(lines) + "\n"))
    return 0


def configure_relaunch(parser: argparse.ArgumentParser) -> None:
    _client_args(parser)
    format_option(parser)


def run_relaunch(args: argparse.Namespace) -> int:
    """Exit 0 when the daemon halted the job to relaunch it with new settings (the halt is
    now cleared: run scr_run again), 1 when not."""
    client = _client(args)
    result = _result(client, client.relaunch(), args.wait_s)
    assert isinstance(result, dict)
    if args.format == "json":
        sys.stdout.write(msgspec.json.encode(result).decode() + "\n")
    else:
        verdict = "relaunch" if result["relaunch"] else "no relaunch"
        sys.stdout.write(f"{verdict}: {result['reason']}\n")
    return 0 if result["relaunch"] else 1


def configure_query(parser: argparse.ArgumentParser) -> None:
    _client_args(parser)
    parser.add_argument("--format", choices=("env", "conf", "scr-config", "json"),
                        default="env", help="env: shell exports for eval; conf: an SCR config "
                        "file; scr-config: strings for scr.config(); json")
    parser.add_argument("--trace", nargs="+", default=[], metavar="TRACE",
                        help="when no daemon answers, recommend from these traces instead")
    parser.add_argument("--system", metavar="FILE", help="system profile for --trace")
    parser.add_argument("--conf-path", default=os.path.abspath("scrtune-scr.conf"),
                        help="with --format env: where the CKPT= lines are written")
    from scrtune.cli.traces import trace_options  # only `query` reads traces

    trace_options(parser)


def run_query(args: argparse.Namespace) -> int:
    from scrtune.cli.traces import replay_options

    replay_options(args)  # bad trace options are said before any daemon is asked
    client = _client(args)
    reply = client.recommend()
    answered = reply is not None and reply.ok and isinstance(reply.result, dict)
    uninformed = answered and reply.result.get("informed") is False  # type: ignore[union-attr]
    if answered and not (uninformed and args.trace):
        recommendation = reply.result
        if uninformed:
            print("scrtune query: the daemon has no trace events or checkpoints of this job yet: "
                  "SCR's defaults with what the system profile decides; query again before a "
                  "relaunch, or give --trace files of an earlier run", file=sys.stderr)
    elif args.trace:  # no daemon, or one that knows nothing yet: the traces know more
        recommendation = _offline(args)
    else:
        raise UsageError(f"no scrtune daemon answered at {client.endpoint} "
                         f"({_unanswered(client, args.wait_s)}); give --trace files to "
                         "recommend from them instead")
    if args.format == "json":
        sys.stdout.write(msgspec.json.encode(recommendation).decode() + "\n")
        return 0
    sys.stdout.write(for_scr(_servable(recommendation), args.format, args.conf_path))
    return 0


def _servable(recommendation: object) -> ScrConfig:
    """The configuration of a recommendation, holding only what scrtune's intents set, in their
    ranges (a job script evals what `query` prints; what the mapping makes always does)."""
    scr = recommendation.get("scr") if isinstance(recommendation, dict) else None
    if not isinstance(scr, dict):
        raise ScrtuneError("the daemon's reply holds no SCR parameters")
    config = ScrConfig.from_json(scr)
    if problems := out_of_bounds(config):
        raise ScrtuneError(f"the daemon's recommendation is refused: {'; '.join(problems)}")
    return config


def _offline(args: argparse.Namespace) -> dict[str, object]:
    from scrtune.cli.recommend_cmd import recommend_traces
    from scrtune.cli.traces import replay_options

    return recommend_traces(list(args.trace), profile_from(args.system),
                            replay_options(args)).as_json()


def configure_forward(parser: argparse.ArgumentParser) -> None:
    # the retry figures the help states are the forwarder's own (configured only for `forward`)
    from scrtune.client.forward import RETRY_FIRST_S, RETRY_MAX_S

    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="trace files, directories or globs (quoted) to follow")
    parser.add_argument("--dir", help="the daemon's directory (as given to scrtune daemon; "
                        "default: $SCRTUNE_DIR, else the daemon's default)")
    parser.add_argument("--endpoint", help="the daemon's event endpoint")
    parser.add_argument("--requests-endpoint", default="",
                        help="with --endpoint: the daemon's request endpoint, so that lines "
                        "go with their offsets and what a restarted daemon lost is sent again "
                        "(without --endpoint: found as the daemon's; without either: best "
                        "effort)")
    parser.add_argument("--interval-s", type=seconds, default=0.5,
                        help="seconds between looks at the files for new lines (what the "
                        f"daemon did not take is tried again sooner: after {RETRY_FIRST_S:g} "
                        f"s, doubling to {RETRY_MAX_S:g} s or this)")
    parser.add_argument("--once", action="store_true",
                        help="send what the files hold now, then exit (without it: follow "
                        "until SIGTERM, exit 0, or SIGINT, exit 130, within a second, having "
                        "sent what the files hold)")
    parser.add_argument("--give-up-s", type=seconds, default=30.0,
                        help="with --once: end (exit 2) when no daemon took anything for this "
                        "long (default 30)")


def run_forward(args: argparse.Namespace) -> int:
    from scrtune.client.forward import follow

    logging.basicConfig(level=logging.INFO, format="scrtune forward: %(message)s")
    from scrtune.client.emit import events_endpoint

    endpoint = args.endpoint or events_endpoint(args.dir)
    requests = args.requests_endpoint if args.endpoint else requests_endpoint(args.dir)
    forwarded = follow(args.paths, endpoint, args.interval_s, args.once, args.give_up_s,
                       args.dir, requests)
    if forwarded.stopped_by == signal.SIGINT:
        return 130
    if args.once and not forwarded.files:
        raise UsageError(f"no .pfw or .pfw.gz file in {' '.join(args.paths)}")
    if args.once and not forwarded.complete:
        raise UsageError(f"no daemon took events at {endpoint} for {args.give_up_s:g} s: "
                         f"{forwarded.messages} messages sent, the rest not")
    return 0
