"""`scrtune relay ENDPOINT`: hold DFTracer's ZeroMQ writer endpoint, pass its buffers on."""

from __future__ import annotations

import argparse
import logging
import signal
import sys

import msgspec

from scrtune.cli.argtypes import byte_size, format_option
from scrtune.daemon.endpoints import check_event_endpoint


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("listen", metavar="ENDPOINT",
                        help="where DFTracer's writer connects ($DFTRACER_ZMQ_ENDPOINT): "
                        "ipc://PATH (prefer a private directory) or tcp://HOST:PORT")
    parser.add_argument("--dir", help="the daemon's directory (as given to scrtune daemon; "
                        "default: $SCRTUNE_DIR, else the daemon's default)")
    parser.add_argument("--endpoint", help="the daemon's event endpoint (instead of --dir)")
    parser.add_argument("--hold", type=byte_size, default=64 << 20, metavar="SIZE",
                        help="buffers held while the daemon is away, at most; beyond, the "
                        "oldest are dropped and counted (default 64MiB)")
    format_option(parser)
    parser.epilog = ("It runs until SIGTERM or SIGUSR1 (exit 0) or SIGINT (exit 130), then\n"
                     "gives the daemon 2 s to take what it holds and prints what it relayed;\n"
                     "exit 2 when ENDPOINT cannot be bound. Start it before the traced\n"
                     "application and stop it after: the writer's application cannot exit\n"
                     "while nothing is bound at its endpoint.\n\n" + (parser.epilog or ""))


def run(args: argparse.Namespace) -> int:
    from scrtune.client.emit import events_endpoint
    from scrtune.client.relay import relay

    logging.basicConfig(level=logging.INFO, format="scrtune relay: %(message)s")
    listen = check_event_endpoint(args.listen, "relay's ENDPOINT")
    endpoint = args.endpoint or events_endpoint(args.dir)
    relayed = relay(listen, endpoint, args.dir, args.hold)
    if args.format == "json":
        sys.stdout.write(msgspec.json.encode(relayed).decode() + "\n")
    else:
        print(f"relayed {relayed.sent:,} of {relayed.received:,} buffers to {endpoint} "
              f"({relayed.dropped:,} dropped, {relayed.refused:,} refused)")
    return 130 if relayed.stopped_by == signal.SIGINT else 0
