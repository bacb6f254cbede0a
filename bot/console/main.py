"""`firebreak console`: start the emulator and the real app, then read lines."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from pydantic import SecretStr

from bot.clock import Clock
from bot.config import load_settings
from bot.console import LOG_PATH
from bot.console.drill import DrillSession
from bot.console.people import DEMO_GROUPS, Directory
from bot.console.session import Console
from bot.console.signed import Sender
from bot.core.eligibility import check_policy_groups
from bot.policy import Policy, load_policy
from bot.runtime import build_runtime
from bot.server import start_local
from fbworld.drills import Drill, DrillError, drills, get
from fbworld.drills.runner import MAX_SPEED
from fbworld.fleet import demo_fleet, demo_unavailable
from fbworld.kube import tls
from fbworld.slack import SlackEmulator
from levers.catalogue import LEVERS

SCHEDULER_GRACE_S = 2.0  # at quit, how long the app's running jobs may take to finish
BANNER = """\
Firebreak console: the real app against an embedded Slack emulator on 127.0.0.1.
{store}
{fleet}
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


def main(user: str, script: str | None, drill_name: str | None, speed: float | None) -> int:
    """`console [--drill NAME [--speed N]]`: `--drill list` lists the drills; a drill needs the demo fleet."""
    drill = None
    if drill_name is None and speed is not None:
        print(
            "firebreak: --speed sets a drill's pace: use it with --drill NAME (`--drill list` names them)",
            file=sys.stderr,
        )
        return 2
    if speed is not None and speed > MAX_SPEED:
        print(f"firebreak: --speed: more than 0 and at most {MAX_SPEED:g} (got {speed:g})", file=sys.stderr)
        return 2
    if drill_name is not None:
        try:
            if drill_name == "list":
                for d in drills().values():
                    print(f"{d.name:<18} {d.title}: {d.summary}")
                return 0
            drill = get(drill_name)
        except DrillError as exc:
            print(f"firebreak: {exc}", file=sys.stderr)
            return 2
        # A drill changes the clusters and moves Prometheus's figures: only the demo fleet's.
        configured = [v for v in ("KUBECONFIG", "PROMETHEUS_URL") if os.environ.get(v)]
        if configured:
            print(
                f"firebreak: --drill runs only on the demo fleet, and {' and '.join(configured)} "
                f"{'is' if len(configured) == 1 else 'are'} set: a drill changes the clusters and the figures "
                f"it runs on. Unset {' and '.join(configured)} to drill on the demo fleet.",
                file=sys.stderr,
            )
            return 2
    return asyncio.run(run_console(user, script, drill, speed or 1.0))


async def run_console(user: str, script: str | None, drill: Drill | None = None, speed: float = 1.0) -> int:
    lines: list[str] | None = None
    if script is not None:
        try:
            # Read once before anything runs; off the loop, like every file read in the app.
            text = await asyncio.to_thread(Path(script).read_text, encoding="utf-8")
            lines = text.splitlines()
        except OSError as exc:
            print(f"firebreak: cannot read script {script}: {exc.strerror}", file=sys.stderr)
            return 2
    try:
        return await _run(user, lines, drill, speed)
    finally:
        # The demo fleet's throwaway CA and server key: gone with the console, like the fleet.
        await asyncio.to_thread(tls.discard)


async def _run(user: str, lines: list[str] | None, drill: Drill | None, speed: float) -> int:
    async with open_console(user, _say, alert_token=drill is not None) as console:
        settings = console.svc.settings
        store = (
            "State: Redis at REDIS_URL."
            if settings.redis_url
            else "State: EMBEDDED IN-MEMORY STORE (REDIS_URL is not set): everything is lost when you quit."
        )
        if not settings.redis_url:
            print("firebreak: REDIS_URL is not set: state lives in memory and is lost when you quit.", file=sys.stderr)
        _say(BANNER.format(store=store, fleet=fleet_line(console), log=LOG_PATH))
        if drill is not None and not await start_drill(console, drill, speed):
            return 2
        code = await (_scripted(console, lines) if lines is not None else _interactive(console))
        if console.drill is not None:
            await console.drill.end("the script ended" if lines is not None else "you quit")
        return code


async def start_drill(console: Console, drill: Drill, speed: float) -> bool:
    """Start ``drill`` beside the console's input; False (said why) when it can't run here."""
    token = console.svc.settings.alertmanager_token
    if console.fleet is None or token is None:
        print(
            "firebreak: drills run only on the demo fleet: unset KUBECONFIG to use it (a drill changes the clusters)",
            file=sys.stderr,
        )
        return False
    session = DrillSession(
        console.svc,
        console.fleet,
        drill,
        console.app_url,
        token.get_secret_value(),
        console.out,
        console.people.name,
        speed,
    )
    console.drill = session
    await session.start()
    return True


def fleet_line(console: Console) -> str:
    fleet = console.fleet
    if fleet is None:
        return "Clusters: KUBECONFIG and PROMETHEUS_URL as configured."
    cells = ", ".join(fleet.cells)
    prom = "a simulated Prometheus" if fleet.prometheus is not None else "Prometheus at PROMETHEUS_URL"
    return (
        f"DEMO FLEET: cells {cells} and the fleet context on local Kubernetes API emulators, with {prom}.\n"
        f"Nothing real is touched. kubectl works too: KUBECONFIG={fleet.kubeconfig}"
    )


@contextlib.asynccontextmanager
async def open_console(
    user: str,
    out: Callable[[str], None],
    clock: Clock | None = None,
    *,
    demo: bool = True,
    alert_token: bool = False,
) -> AsyncIterator[Console]:
    """The emulator, the real app (and its timers) wired together; ``clock`` for a replayed session.
    With ``demo`` and no KUBECONFIG, the demo fleet (and, with no PROMETHEUS_URL, its simulated
    Prometheus) stands in for the clusters. With ``alert_token`` and no ALERTMANAGER_TOKEN, a random
    one is made for the run, so a drill's alerts pass the webhook's real bearer check."""
    async with contextlib.AsyncExitStack() as stack:  # closes in reverse: app, fleet, emulator
        people = Directory()
        token, secret = f"xoxb-console-{secrets.token_hex(8)}", secrets.token_hex(16)
        console_box: list[Console] = []
        # A per-run tag keeps channel ids unique even against a Redis that outlives the console.
        emulator = SlackEmulator(
            time.time,
            token=token,
            on_event=lambda ev: console_box[0].show(ev),
            names=people.name,
            id_tag=secrets.token_hex(2).upper(),
        )
        for handle, names in DEMO_GROUPS.items():
            emulator.add_usergroup(handle, [uid for n in names if (uid := people.resolve(n))])
        await emulator.start()
        stack.push_async_callback(emulator.stop)
        settings = load_settings(
            slack_bot_token=token, slack_signing_secret=secret, slack_api_url=emulator.api_url, slack_app_token=None
        )
        fleet = None
        if demo and settings.kubeconfig is None and (missing := demo_unavailable()):
            out(f"No demo fleet: {missing}. Levers will answer that there is no kube config.")
        elif demo and settings.kubeconfig is None:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="firebreak-demo-")))
            policy = load_policy(settings.firebreak_policy_dir, levers=LEVERS)
            fleet = await stack.enter_async_context(demo_fleet(policy, workdir, prometheus=not settings.prometheus_url))
            update: dict[str, object] = {"kubeconfig": fleet.kubeconfig}
            if fleet.prometheus is not None:
                update["prometheus_url"] = fleet.prometheus.url
            settings = settings.model_copy(update=update)

        if alert_token and settings.alertmanager_token is None:
            settings = settings.model_copy(update={"alertmanager_token": SecretStr(secrets.token_urlsafe(24))})
        rt = build_runtime(settings, clock)
        if fleet is not None:
            rt.services.policy = demo_policy(rt.services.policy)
        stack.push_async_callback(rt.services.redis.aclose)
        stack.push_async_callback(rt.services.chat.close)
        await check_policy_groups(rt.services)  # as `serve` does: a group roles.yaml names must exist
        runner, port = await start_local(rt.web, access_log=False)
        stack.push_async_callback(runner.cleanup)
        sender = Sender(f"http://127.0.0.1:{port}/slack/events", secret)
        stack.push_async_callback(sender.close)
        console = Console(rt.services, out, people, user, fleet)
        console.app_url = f"http://127.0.0.1:{port}"
        console_box.append(console)
        console.attach(emulator, sender)

        scheduler = asyncio.create_task(rt.services.scheduler.run())  # the app's timers, as `serve` runs them
        try:
            yield console
        finally:
            # Stopped as `serve` stops it, not cancelled: a cancel landing as the loop's
            # asyncio.timeout(0) expires is swallowed on Python 3.11, and the loop ran on forever.
            await rt.services.scheduler.stop(SCHEDULER_GRACE_S)
            scheduler.cancel()
            await asyncio.gather(scheduler, return_exceptions=True)


DEMO_ALARM_POLL_S = 1.0  # a drill's clock runs fast: the remediation alarm must read the cells within it


def demo_policy(policy: Policy) -> Policy:
    """The demo fleet's policy: the product's, with the remediation alarm's watch polling every
    second instead of every 30 (a drill at 60x plays a minute in a second)."""
    levers = policy.levers
    alarm = levers.remediation_alarm.model_copy(update={"poll_seconds": DEMO_ALARM_POLL_S})
    return policy.model_copy(update={"levers": levers.model_copy(update={"remediation_alarm": alarm})})
