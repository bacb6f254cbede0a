"""`firebreak serve`: HTTP mode, or Socket Mode when SLACK_APP_TOKEN is set.

SIGTERM (or SIGINT) shuts down gracefully, within FIREBREAK_SHUTDOWN_GRACE seconds (25 by
default: under Kubernetes' 30 s terminationGracePeriodSeconds), and exits 0:

1. /readyz answers 503 at once; Socket Mode disconnects (Slack sends to the other replicas);
2. the scheduler claims nothing more and hands back the jobs it claimed but had not started,
   so another replica runs them at its next tick instead of after the 60 s lease;
3. requests still arriving are taken for FIREBREAK_SHUTDOWN_LINGER seconds (5), while the pod
   leaves the Service's endpoints, then POSTs get a 503 (bot/server.py says why);
4. acknowledged requests (the after-ack lane) and running jobs finish; whatever is still
   running 3 s before the grace ends is cancelled (a job cut short is delivered again when its
   lease runs out, as for a replica that died: its own guards are timed to that);
5. the audit chain head is signed (a last checkpoint, when FIREBREAK_AUDIT_KEY is set);
6. the HTTP server, the Slack, Kubernetes and Redis clients are closed.

A second signal cuts the waiting short.
"""

from __future__ import annotations

import asyncio
import gc
import signal

from aiohttp import web
from redis.exceptions import RedisError

from bot import logs, schema
from bot.config import Settings
from bot.core.eligibility import check_policy_groups
from bot.runtime import MIGRATIONS, Runtime, build_runtime, close
from bot.server import INTAKE, start_local
from bot.slack.inbound import SocketModeHandler

log = logs.get(__name__)

CLEANUP_S = 3.0  # of the grace, kept for closing the server and the clients
HTTP_SHUTDOWN_S = 2.0  # at cleanup, how long an HTTP request still being answered may take


async def serve(settings: Settings, host: str, port: int) -> None:
    rt = build_runtime(settings)
    try:
        # A user group roles.yaml names that Slack doesn't know: refused now, with its file and line.
        await check_policy_groups(rt.services)
    except BaseException:
        await close(rt.services)
        await rt.services.redis.aclose()
        raise
    # Everything built so far (modules, models, policy) lives as long as the process: keep it
    # out of the cyclic collector's full passes, whose pauses otherwise land in the ack path.
    gc.freeze()
    stopping = _on_signals()
    runner, bound = await start_local(rt.web, host, port, shutdown_timeout=HTTP_SHUTDOWN_S)
    try:
        await _migrate(rt, stopping)
    except BaseException:
        await _close(rt, runner)
        raise
    if stopping.is_set():  # told to stop before the state was migrated: run nothing on it
        await _close(rt, runner)
        return
    # The one long-running worker: durable timers (every capability's jobs and start hooks).
    scheduler = asyncio.create_task(rt.services.scheduler.run())
    # Signed checkpoints of the audit chain head (bot/audit/sign.py), and a last one at shutdown.
    checkpoints = asyncio.create_task(rt.checkpoints.run()) if rt.checkpoints else None
    socket_handler = None
    if settings.slack_app_token:
        # Bolt's adapter with the same request path as HTTP's (bot/slack/inbound.py).
        socket_handler = SocketModeHandler(rt.bolt, settings.slack_app_token.get_secret_value(), rt.lane)
        await socket_handler.connect_async()
        log.info("socket_mode_connected")
    log.info("serving", host=host, port=bound, mode="socket" if socket_handler else "http")
    await stopping.wait()
    grace = settings.firebreak_shutdown_grace
    linger = min(settings.firebreak_shutdown_linger, grace / 2)
    loop = asyncio.get_running_loop()
    started = loop.time()
    try:
        await _drain(rt, socket_handler, grace, linger)
    except asyncio.CancelledError:  # a second signal
        task = asyncio.current_task()
        if task is not None:
            task.uncancel()
        log.warning("shutdown_hurried", pending=rt.lane.pending)
        await rt.lane.close(timeout=0)
    scheduler.cancel()  # it has ended already, unless hurried
    await asyncio.gather(scheduler, return_exceptions=True)
    if checkpoints is not None:
        await _last_checkpoint(rt, checkpoints)
    await _close(rt, runner)
    log.info("shutdown_done", seconds=round(loop.time() - started, 2))


async def _last_checkpoint(rt: Runtime, loop_task: asyncio.Task[None]) -> None:
    """Sign the head as the drained process leaves it, so the newest entries are covered too."""
    assert rt.checkpoints is not None
    try:
        async with asyncio.timeout(CLEANUP_S / 2):
            await rt.checkpoints.final()
    except Exception:  # shutdown goes on: the next replica's checkpoint covers these entries
        log.exception("audit_checkpoint_failed", at="shutdown")
    loop_task.cancel()
    await asyncio.gather(loop_task, return_exceptions=True)


async def _migrate(rt: Runtime, stopping: asyncio.Event) -> None:
    """Bring the state to this code's schema before any timer runs (bot/schema.py): once across
    replicas. While Redis can't be reached, try again every second (the HTTP server is up, and
    /readyz says not ready); a newer schema than this code knows stops the process."""
    while not stopping.is_set():
        try:
            ran = await schema.ensure(rt.services.redis, MIGRATIONS, schema.audited(rt.services.audit))
        except RedisError as exc:
            log.warning("schema_check_waiting_for_redis", error=f"{type(exc).__name__}: {exc}")
            await asyncio.sleep(1.0)
            continue
        log.info("schema_ok", version=len(MIGRATIONS), migrated=ran)
        return


def _on_signals() -> asyncio.Event:
    """SIGTERM/SIGINT set the returned event; a second one cancels the shutdown's waiting."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()
    stopping = asyncio.Event()

    def on_signal(sig: signal.Signals) -> None:
        if not stopping.is_set():
            log.info("shutdown_signal", signal=sig.name)
            stopping.set()
        elif main is not None:
            main.cancel()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    return stopping


async def _drain(rt: Runtime, socket_handler: SocketModeHandler | None, grace: float, linger: float) -> None:
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    end = t0 + max(grace - CLEANUP_S, grace / 2)  # work still running then is cancelled
    rt.web[INTAKE].drain(linger)
    log.info("shutdown_started", grace=grace, linger=linger, in_flight=rt.lane.pending)
    if socket_handler is not None:
        await socket_handler.close_async()
    jobs = asyncio.create_task(rt.services.scheduler.stop(grace=end - loop.time()))
    await asyncio.sleep(max(0.0, t0 + linger - loop.time()))  # requests are still taken meanwhile
    await rt.lane.close(timeout=max(0.0, end - loop.time()))
    await jobs
    log.info("shutdown_drained", seconds=round(loop.time() - t0, 2))


async def _close(rt: Runtime, runner: web.AppRunner) -> None:
    try:
        await runner.cleanup()  # stops listening; on_cleanup closes the Slack and kube clients
    finally:
        await rt.services.redis.aclose()
