"""Two Firebreak replicas as a cluster runs them: `python -m bot serve` in two OS processes that share
one real redis-server, the fake Slack and the fake API servers (both in the test process, over
HTTP), each with its own scheduler loop on the real clock.

A replica is killed with SIGKILL (no shutdown, no finally blocks: a pod OOM-killed or its node
lost) or stopped with SIGTERM at teardown. Its stderr (JSON log lines) is collected as it comes, so
a test can wait for an event and check that nothing was logged at error level.

Each replica has its own bot token (xoxb-replica-a, xoxb-replica-b), so the fake Slack can tell
which process made a Web API call (in production both carry the same token).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from fbworld.slack import FakeSlack, SlackSender
from tests.support import workspace
from tests.support.harness import message_with

REPO = Path(__file__).resolve().parents[3]
SECRET = "reliability-signing-secret"
# Environment a replica must not inherit from whoever runs the tests.
_OWN = ("SLACK_", "REDIS_", "FIREBREAK_", "LOG_", "KUBECONFIG", "PROMETHEUS_", "ALERTMANAGER_")


def token(name: str) -> str:
    return f"xoxb-replica-{name}"


def write_policy(tmp: Path, **files: dict[str, Any]) -> Path:
    """A policy dir: each shipped file with its top-level keys overridden, e.g.
    ``levers={"stuck_after_seconds": 3}``. Files not named fall back to the packaged default."""
    d = tmp / "policies"
    d.mkdir(exist_ok=True)
    for name, overrides in files.items():
        doc = yaml.safe_load((REPO / "policies" / f"{name}.yaml").read_text())
        for key, value in overrides.items():
            doc[key] = {**doc[key], **value} if isinstance(value, dict) and isinstance(doc.get(key), dict) else value
        (d / f"{name}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return d


class Replica:
    """One `firebreak serve` process (HTTP mode) on a free loopback port."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        base = {k: v for k, v in os.environ.items() if not k.startswith(_OWN)}
        self.env = {**base, "SLACK_BOT_TOKEN": token(name), "SLACK_SIGNING_SECRET": SECRET, **env}
        self.lines: list[str] = []
        self.port = 0
        self.proc: asyncio.subprocess.Process | None = None
        self._reader: asyncio.Task[None] | None = None

    async def start(self, timeout: float = 60.0) -> Replica:
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bot",
            "serve",
            "--port",
            "0",
            cwd=REPO,
            env=self.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        self._reader = asyncio.create_task(self._read())
        serving = await self.wait_for(lambda e: e.get("event") == "serving", timeout)
        self.port = int(serving["port"])
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for raw in self.proc.stderr:
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def sender(self) -> SlackSender:
        return SlackSender(self.url, SECRET)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.returncode is None

    def events(self) -> list[dict[str, Any]]:
        out = []
        for line in list(self.lines):
            try:
                out.append(json.loads(line))
            except ValueError:
                out.append({"event": line, "level": "raw"})  # e.g. a traceback printed outside logging
        return out

    def problems(self) -> list[dict[str, Any]]:
        """Lines at error level or worse, and lines that are not the JSON log (a raw traceback)."""
        return [e for e in self.events() if e.get("level") in ("error", "critical", "exception", "raw")]

    def tail(self, n: int = 30) -> str:
        return "\n".join(self.lines[-n:])

    async def wait_for(self, pred: Callable[[dict[str, Any]], bool], timeout: float) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            for e in self.events():
                if pred(e):
                    return e
            if not self.alive:
                raise AssertionError(
                    f"replica {self.name} exited ({self.proc and self.proc.returncode}):\n{self.tail()}"
                )
            await asyncio.sleep(0.05)
        raise AssertionError(f"replica {self.name}: not logged within {timeout}s:\n{self.tail()}")

    async def kill(self) -> None:
        """SIGKILL: the process stops between two instructions; nothing of its own cleans up."""
        assert self.proc is not None and self.alive, f"replica {self.name} is not running"
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful), SIGKILL if it has not exited within ``timeout``; its exit code."""
        if self.proc is None:
            return None
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            await asyncio.wait_for(self._reader, 5)
        return self.proc.returncode


@dataclass
class Pair:
    """Two replicas behind one Service: a test sends each request to the one it names."""

    slack: FakeSlack
    redis_url: str
    a: Replica
    b: Replica
    _n: Any = field(default_factory=lambda: iter(range(10**9)))

    @property
    def replicas(self) -> tuple[Replica, Replica]:
        return self.a, self.b

    async def command(self, to: Replica, text: str, user: str, channel: str) -> tuple[str, str, float]:
        """`/incident <text>` to replica ``to``: (response_url key, ack body, ack seconds). The ack
        must be a 200 (Slack shows the user an error otherwise)."""
        key = f"{to.name}-cmd{next(self._n)}"
        status, body, took = await to.sender.command(
            text, user=user, channel=channel, response_url=self.slack.response_url(key)
        )
        assert status == 200, (to.name, text, status, body)
        return key, body, took

    async def press(self, to: Replica, action_id: str, value: str, user: str, channel: str) -> str:
        key = f"{to.name}-btn{next(self._n)}"
        status, body, _ = await to.sender.action(
            action_id,
            value,
            user=user,
            channel=channel,
            message_ts=message_with(self.slack, channel, action_id, value),  # on the card, as a person presses
            response_url=self.slack.response_url(key),
        )
        assert status == 200, (to.name, action_id, status, body)
        return key

    async def reply(self, key: str, timeout: float = 20.0) -> str:
        r = await self.slack.wait_for_response(key, timeout=timeout)
        return str(r.body.get("text", ""))

    async def run(self, to: Replica, text: str, user: str, channel: str, timeout: float = 20.0) -> str:
        """The command's answer: its response_url reply, else its ack when the ack was the answer
        (an ack that says what is under way, "Planning…" or "Reading…", is always followed by it)."""
        key, ack, _ = await self.command(to, text, user, channel)
        follows = not ack.strip() or ack.rstrip().endswith("…")
        try:
            return await self.reply(key, timeout=timeout if follows else 1.0)
        except TimeoutError:
            if not follows:
                return ack
            raise

    async def declare(self, to: Replica, title: str, sev: int = 2, cells: Iterable[str] = (), **roles: str) -> str:
        """Declare as U_IC through ``to``, then seat ``roles``; the incident's channel id."""
        flags = " ".join(f"--cell {c}" for c in cells)
        out = await self.run(to, f"declare {title} --sev {sev} {flags}".strip(), "U_IC", "C_GENERAL")
        assert out.startswith("Declared INC-"), out
        inc = out.split()[1]
        channel = await channel_of(self.redis_url, inc)
        for role, who in roles.items():
            got = await self.run(to, f"role {role} <@{who}>", "U_IC", channel)
            assert "is now" in got, got
        return channel

    async def stop(self) -> None:
        await asyncio.gather(*(r.stop() for r in self.replicas))


async def channel_of(redis_url: str, incident: str) -> str:
    import redis.asyncio as aioredis

    from bot.store import Keys

    r = aioredis.from_url(redis_url, decode_responses=True)
    try:
        ch = await r.hget(Keys.incident(incident), "channel_id")
    finally:
        await r.aclose()
    assert ch, f"{incident} has no channel"
    return str(ch)


async def start_pair(slack: FakeSlack, redis_url: str, **env: str) -> Pair:
    """Two replicas on the same Redis, Slack and (through ``env``: KUBECONFIG, FIREBREAK_POLICY_DIR,
    …) API servers, started side by side. ``slack`` gets the test workspace's user groups (its own,
    if the test made some): each replica's start checks the policy's groups against them."""
    workspace.seed(slack)
    common = {
        "SLACK_API_URL": slack.api_url,
        "REDIS_URL": redis_url,
        "FIREBREAK_SCHEDULER_TICK": "0.2",
        "FIREBREAK_SHUTDOWN_GRACE": "6",
        "FIREBREAK_SHUTDOWN_LINGER": "0",
        **env,
    }
    a, b = Replica("a", common), Replica("b", common)
    try:
        await asyncio.gather(a.start(), b.start())
    except BaseException:
        await asyncio.gather(a.stop(), b.stop())
        raise
    return Pair(slack, redis_url, a, b)


def cli(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`python -m bot <args>` against ``redis_url`` (`audit export`, `audit verify`), as an operator runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(_OWN)}
    return subprocess.run(
        [sys.executable, "-m", "bot", *args],
        cwd=REPO,
        env={**env, "REDIS_URL": redis_url},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def exported(redis_url: str, incident: str | None = None) -> list[dict[str, Any]]:
    """`firebreak audit export [--incident <incident>]`, parsed."""
    done = cli(redis_url, "audit", "export", *(["--incident", incident] if incident else []))
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def verified(redis_url: str) -> str:
    """`firebreak audit verify` must exit 0; its line ("audit chain OK (n entries)")."""
    done = cli(redis_url, "audit", "verify")
    assert done.returncode == 0, (done.stdout, done.stderr)
    return done.stdout.strip()
