"""Free TCP ports on loopback."""

from __future__ import annotations

import socket
import threading

_handed_out: set[int] = set()
_lock = threading.Lock()


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that is currently free on ``host``.

    The socket is closed before returning, so another process could in theory
    grab the port before the caller binds it; ports already handed out by this
    process are never returned twice, which avoids the common self-collision
    when several servers start in one test.
    """
    for _ in range(50):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, 0))
            port = s.getsockname()[1]
        with _lock:
            if port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError("could not find a free port")
