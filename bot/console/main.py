"""`firebreak console`: start the emulator and the real app, then read lines."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from bot.clock import Clock
from bot.config import load_settings
from bot.console.emulator import SlackEmulator
from bot.console.people import Directory
from bot.console.session import Console
from bot.console.signed import Sender
from bot.runtime import build_runtime
from bot.server import start_local

LOG_PATH = Path(tempfile.gettempdir()) / "firebreak-console.log"
BANNER = """\
Firebreak console: the real app against an embedded Slack emulator on 127.0.0.1.
{store}
Firebreak's own log goes to {log}.
Type `help` for the console, `/incident help` for Firebreak; `quit` to leave."""


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


async def _read(prompt: str) -> str | None:
    try:
        return await asyncio.get_running_loop().run_in_executor(None, input, prompt)
    except EOFError:
        return None


async def _interactive(console: Console) -> int:
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401 - line editing and history for input()
    while True:
        line = await _read(console.prompt)
        if line is None or line.strip().lower() in ("quit", "exit"):
            return 0
        await console.line(line)


async def _scripted(console: Console, lines: list[str]) -> int:
    failed: list[int] = []
    for n, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line.strip().lower() in ("quit", "exit"):
            break
        _say(console.prompt + line.rstrip())
        if not await console.line(line):
            failed.append(n)
    if failed:
        _say(f"script: {len(failed)} line(s) failed: line {', '.join(map(str, failed))}")
        return 1
    return 0


async def run_console(user: str, script: str | None) -> int:
    lines: list[str] | None = None
    if script is not None:
        try:
            # Read once before anything runs; off the loop, like every file read in the app.
            text = await asyncio.to_thread(Path(script).read_text, encoding="utf-8")
            lines = text.splitlines()
        except OSError as exc:
            print(f"firebreak: cannot read script {script}: {exc.strerror}", file=sys.stderr)
            return 2
    async with open_console(user, _say) as console:
        settings = console.svc.settings
        store = (
            "State: Redis at REDIS_URL."
            if settings.redis_url
            else "State: EMBEDDED IN-MEMORY STORE (REDIS_URL is not set): everything is lost when you quit."
        )
        if not settings.redis_url:
            print("firebreak: REDIS_URL is not set: state lives in memory and is lost when you quit.", file=sys.stderr)
        _say(BANNER.format(store=store, log=LOG_PATH))
        return await (_scripted(console, lines) if lines is not None else _interactive(console))


@contextlib.asynccontextmanager
async def open_console(user: str, out: Callable[[str], None], clock: Clock | None = None) -> AsyncIterator[Console]:
    """The emulator, the real app (and its timers) wired together; ``clock`` for a replayed session."""
    people = Directory()
    token, secret = f"xoxb-console-{secrets.token_hex(8)}", secrets.token_hex(16)
    console_box: list[Console] = []
    emulator = SlackEmulator(token, lambda ev: console_box[0].show(ev), people.name)
    await emulator.start()
    settings = load_settings(
        slack_bot_token=token, slack_signing_secret=secret, slack_api_url=emulator.api_url, slack_app_token=None
    )
    rt = build_runtime(settings, clock)
    runner, port = await start_local(rt.web, access_log=False)
    sender = Sender(f"http://127.0.0.1:{port}/slack/events", secret)
    console = Console(rt.services, out, people, user)
    console_box.append(console)
    console.attach(emulator, sender)

    tasks = [asyncio.create_task(rt.services.scheduler.run())]  # the app's timers, as `serve` runs them
    try:
        yield console
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await sender.close()
        await runner.cleanup()
        await emulator.stop()
        await rt.services.redis.aclose()
