"""Locating service binaries and running them as child processes.

Binary lookup order (``find_binary``):
  1. ``PATH`` (``shutil.which``)
  2. ``$FIREBREAK_SERVICES_DIR/bin`` (symlinks made by ``.ci/install-services.sh``)
  3. ``$FIREBREAK_SERVICES_DIR/root/usr/bin`` (the extracted Debian packages)

``FIREBREAK_SERVICES_DIR`` defaults to ``/opt/firebreak-services``; keep this in
sync with ``.ci/install-services.sh``.

Processes are started with ``subprocess.Popen`` (not asyncio subprocesses), so
a server object does not depend on the event loop it was started from; they are
stopped by PID (SIGTERM, then SIGKILL after a grace period).  A weakref
finaliser kills a forgotten process when the object is collected or the
interpreter exits.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Self

import aiohttp

DEFAULT_SERVICES_DIR = "/opt/firebreak-services"
REPO_ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO_ROOT / ".ci" / "install-services.sh"
# Compiled-in template path of Debian's prometheus-alertmanager (it exits without it).
AM_TEMPLATE = Path("/usr/share/prometheus/alertmanager/default.tmpl")


class ServiceBinaryNotFound(RuntimeError):
    pass


class ServiceStartError(RuntimeError):
    pass


def services_dir() -> Path:
    return Path(os.environ.get("FIREBREAK_SERVICES_DIR") or DEFAULT_SERVICES_DIR)


def find_binary(*names: str) -> str:
    """Absolute path of the first of ``names`` found (PATH first, then the cache dir)."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    base = services_dir()
    for name in names:
        for d in (base / "bin", base / "root" / "usr" / "bin"):
            p = d / name
            if p.is_file() and os.access(p, os.X_OK):
                return str(p)
    raise ServiceBinaryNotFound(f"none of {names} found on PATH or under {base}; run `bash {INSTALL_SCRIPT}`")


def ensure_services_installed(timeout: float = 300.0) -> None:
    """Run ``.ci/install-services.sh`` unless all binaries are already findable.

    Quick (no subprocess) when everything is present.
    """
    try:
        for names in (("redis-server",), ("prometheus",), ("promtool",)):
            find_binary(*names)
        am = find_binary("alertmanager", "prometheus-alertmanager")
        # The Debian alertmanager binary needs its templates at a fixed path.
        if not (Path(os.path.realpath(am)).name == "prometheus-alertmanager" and not AM_TEMPLATE.is_file()):
            return
    except ServiceBinaryNotFound:
        pass
    subprocess.run(["bash", str(INSTALL_SCRIPT)], check=True, timeout=timeout, stdout=subprocess.DEVNULL)


def _kill_pid(pid: int, grace: float) -> None:
    """SIGTERM ``pid``, then SIGKILL if it is still alive after ``grace`` seconds."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # not our child or already reaped
            done = pid
            try:
                os.kill(pid, 0)
                done = 0
            except ProcessLookupError:
                pass
        if done == pid:
            return
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass


class ManagedProcess:
    """A child process with its output in ``log_path``; stop() kills it by PID."""

    def __init__(self, argv: Sequence[str], log_path: Path, cwd: Path | None = None, env: dict[str, str] | None = None):
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.cwd = cwd
        self.env = env  # None: the parent's environment
        self.proc: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child process writes to it until stop()
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
            )
        finally:
            log.close()
        self._finalizer = weakref.finalize(self, _kill_pid, self.proc.pid, 0.5)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    async def wait_ready(self, url: str, timeout: float = 20.0) -> float:
        """Poll ``url`` until it answers 200; return seconds waited."""
        t0 = time.monotonic()
        deadline = t0 + timeout
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=2)) as session:
            while True:
                if self.proc is not None and self.proc.poll() is not None:
                    raise ServiceStartError(f"{self.argv[0]} exited with {self.proc.returncode}:\n{self.log_tail()}")
                try:
                    async with session.get(url) as resp:
                        if resp.status == 200:
                            return time.monotonic() - t0
                except (TimeoutError, aiohttp.ClientError, OSError):
                    pass
                if time.monotonic() > deadline:
                    raise ServiceStartError(f"{url} not ready after {timeout}s:\n{self.log_tail()}")
                await asyncio.sleep(0.05)

    def stop(self, grace: float = 5.0) -> None:
        if self.proc is None:
            return
        if self._finalizer is not None:
            self._finalizer.detach()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None


class ManagedServer:
    """A service binary on 127.0.0.1:<free port>, ready when ``<url>/-/ready`` answers 200.

    Subclasses write their config in ``_prepare`` and give the command line in ``_argv``;
    ``await start()`` / ``await stop()`` or an async context manager. Attributes: ``url``,
    ``port``, ``pid``, ``startup_seconds``.
    """

    log_name = "server.log"

    def __init__(self, tmpdir: str | Path, startup_timeout: float) -> None:
        self.dir = Path(tmpdir)
        self.startup_timeout = startup_timeout
        self.port: int | None = None
        self.url: str | None = None
        self.startup_seconds = 0.0
        self._proc: ManagedProcess | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    async def _prepare(self) -> None:
        """Write config and data before the process starts."""

    def _argv(self) -> list[str]:
        raise NotImplementedError

    async def start(self) -> Self:
        from .ports import free_port

        await self._prepare()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc = ManagedProcess(self._argv(), self.dir / self.log_name, cwd=self.dir)
        t0 = time.monotonic()
        self._proc.start()
        try:
            await self._proc.wait_ready(f"{self.url}/-/ready", self.startup_timeout)
        except BaseException:
            self._proc.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    async def stop(self) -> None:
        if self._proc is not None:
            proc, self._proc = self._proc, None
            await asyncio.to_thread(proc.stop)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def log_tail(self, n: int = 4000) -> str:
        return self._proc.log_tail(n) if self._proc else ""
