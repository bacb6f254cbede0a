"""`python -m bot serve` as a child process against the emulators, for the tests that need the real
process (tests/telemetry/test_shutdown.py, tests/slack/test_socket_mode.py, tests/audit/)."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

from fbworld.slack import FakeSlack
from tests.support.core import REPO

SERVE_TOKEN = "xoxb-serve-process"
SERVE_SECRET = "serve-signing-secret"
GRACE, LINGER = 12.0, 1.0


class Serve:
    """`python -m bot serve` in a child process; its stderr (JSON lines) collected as it comes."""

    def __init__(self, redis_url: str, slack: FakeSlack) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "REDIS_", "FIREBREAK_", "LOG_"))}
        self.env = {
            **base,
            "SLACK_BOT_TOKEN": SERVE_TOKEN,
            "SLACK_SIGNING_SECRET": SERVE_SECRET,
            "SLACK_API_URL": slack.api_url,
            "REDIS_URL": redis_url,
            "FIREBREAK_SHUTDOWN_GRACE": str(GRACE),
            "FIREBREAK_SHUTDOWN_LINGER": str(LINGER),
            "FIREBREAK_SCHEDULER_TICK": "0.2",
        }
        self.lines: list[str] = []
        self.port = 0
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self) -> Serve:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "serve", "--port", "0", cwd=REPO, env=self.env, stderr=asyncio.subprocess.PIPE
        )
        self._reader = asyncio.create_task(self._read())
        serving = await self.wait_for(lambda e: e.get("event") == "serving", 30)
        self.port = int(serving["port"])
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.lines.append(raw.decode().rstrip("\n"))

    def events(self) -> list[dict]:
        return [json.loads(line) for line in self.lines if line.strip()]

    async def wait_for(self, pred, timeout: float) -> dict:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for e in self.events():
                if pred(e):
                    return e
            assert self.proc is not None and self.proc.returncode is None, "\n".join(self.lines[-30:])
            await asyncio.sleep(0.05)
        raise AssertionError(f"not logged within {timeout}s:\n" + "\n".join(self.lines[-30:]))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        if self._reader is not None:
            await self._reader
