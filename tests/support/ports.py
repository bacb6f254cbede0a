"""Free TCP ports on loopback, safe across processes (pytest-xdist workers, the servers they start,
and any other test run on the machine at the same time).

A port is handed out only if this process holds an exclusive POSIX record lock on byte ``port`` of
``$TMPDIR/firebreak-test-ports.lock`` (one file descriptor for all of them, kept open until the
process exits: the kernel drops the locks then, even on a crash) and it can be bound now. Ports
come from below the kernel's ephemeral range (``ip_local_port_range``), so neither ``bind(0)``
nor an outgoing connection's local port can take one between our check and the server's bind.
"""

from __future__ import annotations

import fcntl
import os
import random
import socket
import tempfile
import threading
from pathlib import Path

LOW, HIGH = 20000, 32000  # below Linux's default ephemeral range (32768-60999)
_LOCK_FILE = Path(tempfile.gettempdir()) / "firebreak-test-ports.lock"
_held: set[int] = set()  # ports this process has locked (POSIX locks are per process, not per thread)
_lock = threading.Lock()
_fd: int | None = None  # never closed: closing any descriptor of the file would drop every lock


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _claim(fd: int, port: int, host: str) -> bool:
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
    except OSError:
        return False  # another process has it
    _held.add(port)  # locked either way: a port something else listens on is not tried again
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except OSError:
        return False  # something outside the test suite listens there
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port on ``host`` that is free now and that no other process using this module
    will be given while this one runs; never the same port twice in one process."""
    global _fd
    top = min(HIGH, _ephemeral_low() - 1)
    with _lock:
        if _fd is None:
            _fd = os.open(_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
        start = random.randrange(LOW, top)
        for i in range(top - LOW):
            port = LOW + (start - LOW + i) % (top - LOW)
            if port not in _held and _claim(_fd, port, host):
                return port
    raise RuntimeError(f"no free port in {LOW}-{top}")
