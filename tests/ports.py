"""Loopback ports for tests (pure: core and e2e tests both use it)."""

import socket


def free_port():
    """A port nobody listens on right now: for a server to start on, or to be refused by."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port
