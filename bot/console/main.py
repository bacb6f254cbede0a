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
from dataclasses import dataclass
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
from bot.store import target as store_target
from fbworld.drills import Drill, DrillError, drills, get
from fbworld.drills.runner import MAX_SPEED
from fbworld.fleet import demo_fleet, demo_unavailable
from fbworld.kube import tls
from fbworld.slack import SlackEmulator
from levers.catalogue import LEVERS
from levers.kube import kubeconfig_paths

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


@dataclass(frozen=True)
class Targets:
    """What the console joins besides its own emulators: only what its flags name, never the
    environment. An operator exports REDIS_URL for `audit verify` and KUBECONFIG for kubectl; a
    console that read them would run production's due jobs into the emulator's Slack and pull
    levers on real clusters with that operator's credentials, one person casting every vote."""

    redis_url: str | None = None  # --redis URL: the console then runs no scheduler and no start hooks
    kubeconfig: Path | None = None  # --kubeconfig FILE --real-clusters


def _err(text: str) -> int:
    print(f"firebreak: {text}", file=sys.stderr)
    return 2


def check_targets(redis_url: str | None, kubeconfig: Path | None, real_clusters: bool) -> Targets | str:
    """The flags as Targets, or what is wrong with them in one line."""
    if kubeconfig is not None and not real_clusters:
        return (
            f"--kubeconfig {kubeconfig} would pull levers on the clusters it names with its credentials: "
            "add --real-clusters to mean it (the console's demo fleet needs neither)"
        )
    if real_clusters and kubeconfig is None:
        return "--real-clusters needs --kubeconfig FILE: the kube config of the clusters to act on"
    if kubeconfig is not None:
        files = kubeconfig_paths(kubeconfig)
        missing = [str(f) for f in files if not f.is_file()]
        if missing or not files:
            return f"--kubeconfig: no such file {', '.join(missing) or repr(str(kubeconfig))} (a kube config)"
    if redis_url is not None:
        try:
            store_target.parse(redis_url)
        except store_target.BadRedisUrl as exc:
            return f"--redis: {exc}"
    return Targets(redis_url, kubeconfig)


def unused_environment(targets: Targets) -> list[str]:
    """One line per exported variable the console does not use, saying which flag would use it."""
    said = []
    if os.environ.get("REDIS_URL") and targets.redis_url is None:
        said.append(
            "REDIS_URL is set but not used: the console keeps its state in memory "
            "(pass --redis URL to use a Redis; the console then runs none of its timers)"
        )
    if os.environ.get("KUBECONFIG") and targets.kubeconfig is None:
        said.append(
            "KUBECONFIG is set but not used: levers act on the console's demo fleet "
            "(pass --kubeconfig FILE --real-clusters to act on real clusters)"
        )
    return said


def main(
    user: str,
    script: str | None,
    drill_name: str | None,
    speed: float | None,
    *,
    redis_url: str | None = None,
    kubeconfig: Path | None = None,
    real_clusters: bool = False,
) -> int:
    """`console [--drill NAME [--speed N]] [--redis URL] [--kubeconfig FILE --real-clusters]`:
    `--drill list` lists the drills; a drill needs the demo fleet and the in-memory store."""
    drill = None
    if drill_name is None and speed is not None:
        return _err("--speed sets a drill's pace: use it with --drill NAME (`--drill list` names them)")
    if speed is not None and speed > MAX_SPEED:
        return _err(f"--speed: more than 0 and at most {MAX_SPEED:g} (got {speed:g})")
    targets = check_targets(redis_url, kubeconfig, real_clusters)
    if isinstance(targets, str):
        return _err(targets)
    if drill_name is not None:
        try:
            if drill_name == "list":
                for d in drills().values():
                    print(f"{d.name:<18} {d.title}: {d.summary}")
                return 0
            drill = get(drill_name)
        except DrillError as exc:
            return _err(str(exc))
        # A drill changes the clusters and moves Prometheus's figures, and its timers are the
        # scheduler's: only on the demo fleet and the console's own store.
        flags = [f for f, v in (("--redis", targets.redis_url), ("--kubeconfig", targets.kubeconfig)) if v]
        if flags:
            return _err(f"--drill runs only on the demo fleet and the console's own store: drop {' and '.join(flags)}")
        if os.environ.get("PROMETHEUS_URL"):
            return _err(
                "--drill runs only on the demo fleet, and PROMETHEUS_URL is set: a drill changes the figures "
                "it runs on. Unset PROMETHEUS_URL to drill on the demo fleet."
            )
    for line in unused_environment(targets):
        print(f"firebreak: {line}", file=sys.stderr)
    return asyncio.run(run_console(user, script, drill, speed or 1.0, targets))


async def run_console(
    user: str, script: str | None, drill: Drill | None = None, speed: float = 1.0, targets: Targets | None = None
) -> int:
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
        return await _run(user, lines, drill, speed, targets or Targets())
    finally:
        # The demo fleet's throwaway CA and server key: gone with the console, like the fleet.
        await asyncio.to_thread(tls.discard)


async def _run(user: str, lines: list[str] | None, drill: Drill | None, speed: float, targets: Targets) -> int:
    async with open_console(user, _say, alert_token=drill is not None, targets=targets) as console:
        store = (
            "State: Redis at --redis, with no scheduler: no reminder, expiry or other timer and no start-up "
            "repair runs here (the servers on that Redis run them, and post to channels only this console has)."
            if targets.redis_url
            else "State: EMBEDDED IN-MEMORY STORE (no --redis): everything is lost when you quit."
        )
        if not targets.redis_url:
            print("firebreak: no --redis: state lives in memory and is lost when you quit.", file=sys.stderr)
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
            "firebreak: drills run only on the demo fleet, which did not start (see above)",
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
    kubeconfig = console.svc.settings.kubeconfig
    if fleet is None and kubeconfig is not None:
        return (
            f"REAL CLUSTERS: levers act on the clusters in {kubeconfig} with its credentials. Everyone here "
            "is you: an approval in the console is not a second person's."
        )
    if fleet is None:
        return "Clusters: none (no demo fleet): levers answer that there is no kube config."
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
    targets: Targets | None = None,
) -> AsyncIterator[Console]:
    """The emulator, the real app (and its timers) wired together; ``clock`` for a replayed session.
    Redis and the clusters are ``targets``' alone, whatever the environment says: by default an
    in-memory store and, with ``demo``, the demo fleet (and, with no PROMETHEUS_URL, its simulated
    Prometheus). With a real Redis no scheduler runs: its due jobs and start hooks are the servers'.
    With ``alert_token`` and no ALERTMANAGER_TOKEN, a random one is made for the run, so a drill's
    alerts pass the webhook's real bearer check."""
    targets = targets or Targets()
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
        # Explicit overrides: an exported REDIS_URL or KUBECONFIG is production's, not the console's.
        # REDIS_CA_FILE goes with REDIS_URL: read only when --redis names a Redis.
        where: dict[str, object] = {"redis_url": targets.redis_url, "kubeconfig": targets.kubeconfig}
        if targets.redis_url is None:
            where["redis_ca_file"] = None
        settings = load_settings(
            slack_bot_token=token,
            slack_signing_secret=secret,
            slack_api_url=emulator.api_url,
            slack_app_token=None,
            **where,
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

        if targets.redis_url is not None:
            # A real Redis is the servers' state: their due jobs and start-up repairs are theirs to run.
            yield console
            return
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
