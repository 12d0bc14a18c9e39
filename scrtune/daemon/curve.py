"""ZeroMQ CURVE for TCP: a daemon listening on TCP admits only clients holding its job's key.

IPC sockets live in a private directory (0700) and need nothing more. A TCP port is open to
every user of the node (and of the network, off loopback), so there the daemon is a CURVE
server: it makes a server key pair and one client key pair in `<dir>/curve/` (0700, secrets
0600), and a ZAP handler admits only that client key. The job's ranks and the CLI read the keys
from the same directory (`--dir`/`SCRTUNE_DIR`, on a shared file system for other nodes). A
client without the keys does not connect over TCP: it falls back as when no daemon answers.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import zmq
import zmq.auth

from scrtune.errors import UsageError

KEY_DIR = "curve"


@dataclass(frozen=True)
class Keys:
    server_public: bytes
    server_secret: bytes | None  # None on the client side
    client_public: bytes
    client_secret: bytes


def is_tcp(endpoint: str) -> bool:
    return endpoint.startswith("tcp://")


def ensure_keys(directory: str) -> str:
    """The daemon's key directory, with its key pairs made on first use."""
    keys = os.path.join(directory, KEY_DIR)
    os.makedirs(keys, mode=0o700, exist_ok=True)
    os.chmod(keys, 0o700)
    for name in ("server", "client"):
        if not os.path.exists(os.path.join(keys, f"{name}.key_secret")):
            zmq.auth.create_certificates(keys, name)
        os.chmod(os.path.join(keys, f"{name}.key_secret"), 0o600)
    return keys


def load_keys(directory: str, server: bool = False) -> Keys:
    """The keys in `directory`/curve; UsageError naming the file when one cannot be read."""
    keys = os.path.join(directory, KEY_DIR)
    try:
        server_public, server_secret = zmq.auth.load_certificate(
            os.path.join(keys, "server.key_secret" if server else "server.key"))
        client_public, client_secret = zmq.auth.load_certificate(
            os.path.join(keys, "client.key_secret"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{keys}: no CURVE keys for a TCP daemon ({exc}): set SCRTUNE_DIR to "
                         "the daemon's directory") from None
    if client_secret is None:
        raise UsageError(f"{keys}/client.key_secret: not a secret key")
    return Keys(server_public, server_secret, client_public, client_secret)


def serve_securely(sock: zmq.Socket, keys: Keys) -> None:
    """Before bind: this socket is a CURVE server."""
    sock.curve_secretkey = keys.server_secret
    sock.curve_publickey = keys.server_public
    sock.curve_server = True


def connect_securely(sock: zmq.Socket, endpoint: str, directory: str) -> None:
    """Before connect: over TCP, a CURVE client with the job's keys (UsageError without)."""
    if not is_tcp(endpoint):
        return
    keys = load_keys(directory)
    sock.curve_secretkey = keys.client_secret
    sock.curve_publickey = keys.client_public
    sock.curve_serverkey = keys.server_public


def start_authenticator(context: zmq.Context, key_dir: str):
    """A ZAP handler (its own thread) admitting the client keys in `key_dir`; stop() it."""
    from zmq.auth.thread import ThreadAuthenticator

    authenticator = ThreadAuthenticator(context)
    authenticator.start()
    authenticator.configure_curve(domain="*", location=key_dir)
    return authenticator
