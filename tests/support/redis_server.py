"""A private, throwaway redis-server per test session (or per test that restarts it).

Tests never share the developer's Redis: each pytest session gets its own
server on a free loopback port, so parallel runs cannot collide.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.ports import free_port


class RedisServer:
    def __init__(
        self,
        appendonly: bool = False,
        port: int | None = None,
        data_dir: Path | None = None,
        extra: tuple[str, ...] = (),
    ) -> None:
        self.port = port or free_port()
        self.appendonly = appendonly
        self.extra = extra  # more redis-server options (replicaof, cluster-enabled, TLS ...)
        self.dir = data_dir or Path(tempfile.mkdtemp(prefix="fb-redis-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run `bash .ci/install-services.sh`")
        args = [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--dir", str(self.dir)]
        args += ["--appendonly", "yes", "--appendfsync", "always"] if self.appendonly else ["--appendonly", "no"]
        args += list(self.extra)
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as s:
                    s.sendall(b"PING\r\n")
                    if s.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def freeze(self) -> None:
        """SIGSTOP: the server holds its sockets but answers nothing (a hung host, a partition)."""
        assert self.proc is not None and self.proc.poll() is None, "the server is not running"
        os.kill(self.proc.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        """SIGCONT: the server resumes and runs whatever reached its sockets meanwhile."""
        assert self.proc is not None and self.proc.poll() is None, "the server is not running"
        os.kill(self.proc.pid, signal.SIGCONT)

    def kill(self) -> None:
        """SIGKILL: the host is gone, with whatever had not reached a replica."""
        assert self.proc is not None and self.proc.poll() is None, "the server is not running"
        self.proc.kill()
        self.proc.wait(5)
        self.proc = None

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGCONT)  # a frozen server would never see the SIGTERM
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.proc = None
