"""Ack latency of Firebreak's `/incident` vs a bare Bolt app that only acks.

    python bench/ack_bench.py [--requests 600] [--concurrency 20] [--rounds 6]

Reports, for `/incident status` and `/incident declare`, each app's ack p50 and p99 and its
throughput (requests answered per second while 20 senders keep it busy), and Firebreak's
ratios to a bare Bolt app. Targets: p99 <= 1.2x and p50 <= 1.3x bare, throughput >= 0.8x bare,
where bare is an `AsyncApp` with Bolt's defaults. A second bare app with `process_before_response`
(as Firebreak runs) is measured beside it for reference, with no target.

The apps run in this process on aiohttp (AppRunner + TCPSite on 127.0.0.1),
talk to the same FakeSlack for Web API calls (in its own process, as Slack is
another machine), and Firebreak uses a private redis-server. The load comes from a
separate process (so the sender does not steal the server's event loop): 20 concurrent senders POST Slack-signed
slash commands over keep-alive connections and time each HTTP round trip,
which is the ack Slack waits for. Cases are interleaved in rounds so drift
hits all of them alike, and the apps take turns going first; Firebreak's after-ack work
(Redis, Slack calls) is drained right after each of its batches, before another app's batch, and
its time is reported as Firebreak's sustained rate. The sender's own garbage collector is off
while it times a batch (see `load`).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import gc
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import aiohttp
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

from bot import logs
from bot.config import load_settings
from bot.runtime import build_runtime
from bot.server import start_local
from fbworld.slack import FakeSlack, SlackSender, sign, slash_command_body
from tests.support.harness import SECRET, TOKEN, RunningApp
from tests.support.redis_server import RedisServer

P99_RATIO, P50_RATIO, THROUGHPUT_RATIO = 1.2, 1.3, 0.8


# -- the load generator (runs in a child process) ---------------------------------------


def load(url: str, texts: list[str], channel: str, response_url: str, concurrency: int) -> tuple[list[float], float]:
    """Each request's ack time, and the wall time the whole batch took.

    The sender is the instrument, so its own collector stays off while it times: a gen-2 pass over
    this process's imports took 84 ms once a run, 4 ms into a batch, and that batch's acks read as
    ~100 ms (gc.callbacks, measured), whichever app the batch was for. It collects between batches."""
    gc.disable()
    try:
        return asyncio.run(_load(url, texts, channel, response_url, concurrency))
    finally:
        gc.enable()
        gc.collect()


async def _load(
    url: str, texts: list[str], channel: str, response_url: str, concurrency: int
) -> tuple[list[float], float]:
    queue: asyncio.Queue[str] = asyncio.Queue()
    for t in texts:
        queue.put_nowait(t)
    took: list[float] = []
    conn = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(connector=conn) as session:

        async def sender(n: int) -> None:
            while not queue.empty():
                text = queue.get_nowait()
                body = slash_command_body(text, user_id=f"UBENCH{n}", channel_id=channel, response_url=response_url)
                headers = {"Content-Type": "application/x-www-form-urlencoded", **sign(body, SECRET)}
                start = time.perf_counter()
                async with session.post(url, data=body, headers=headers) as resp:
                    await resp.read()
                    took.append(time.perf_counter() - start)
                    if resp.status != 200:
                        raise RuntimeError(f"HTTP {resp.status} for {text!r}")

        began = time.perf_counter()
        await asyncio.gather(*(sender(n) for n in range(concurrency)))
        elapsed = time.perf_counter() - began
    return took, elapsed


# -- FakeSlack (runs in a child process: Slack's own CPU is not Firebreak's) ---------------


def host_slack(conn: multiprocessing.connection.Connection) -> None:
    asyncio.run(_host_slack(conn))


async def _host_slack(conn: multiprocessing.connection.Connection) -> None:
    slack = FakeSlack()
    await slack.start()
    conn.send(slack.base_url)
    loop = asyncio.get_running_loop()
    while (msg := await loop.run_in_executor(None, conn.recv)) != "stop":
        if msg == "replies":
            conn.send(len(slack.responses))
        elif msg == "forget":  # recorded calls, replies and channels would only grow this process
            slack.calls.clear(), slack.responses.clear(), slack.state.channels.clear(), slack.state.messages.clear()
            conn.send(True)
    await slack.stop()


class RemoteSlack:
    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=host_slack, args=(child,), daemon=True)
        self.proc.start()
        self.base_url = self.conn.recv()
        self.api_url = f"{self.base_url}/api/"

    def response_url(self, key: str) -> str:
        return f"{self.base_url}/response/{key}"

    def ask(self, msg: str) -> object:
        self.conn.send(msg)
        return self.conn.recv()

    def stop(self) -> None:
        self.conn.send("stop")
        self.proc.join(10)


# -- the two apps ---------------------------------------------------------------------------


async def start_firebreak(slack: RemoteSlack, redis_url: str) -> RunningApp:
    """As tests/support/harness.py does, but with the Redis client `firebreak serve` makes (bot.store.connect)."""
    settings = load_settings(
        slack_bot_token=TOKEN, slack_signing_secret=SECRET, slack_api_url=slack.api_url, redis_url=redis_url
    )
    rt = build_runtime(settings)
    gc.freeze()  # as `firebreak serve` does once the app is built
    runner, port = await start_local(rt.web)
    url = f"http://127.0.0.1:{port}"
    return RunningApp(url, rt.services, runner, SlackSender(url, SECRET), slack, rt.lane)  # type: ignore[arg-type]


async def start_bare(slack: RemoteSlack, process_before_response: bool = False) -> tuple[str, web.AppRunner]:
    """Bolt's defaults (the target's reference), or with `process_before_response` as Firebreak runs:
    by default Bolt waits for a listener's ack by polling it every 10 ms
    (slack_bolt/listener/asyncio_runner.py), which is most of a bare app's p50 here."""
    from slack_sdk.web.async_client import AsyncWebClient

    bolt = AsyncApp(
        client=AsyncWebClient(token=TOKEN, base_url=slack.api_url),
        signing_secret=SECRET,
        process_before_response=process_before_response,
    )

    @bolt.command("/incident")
    async def only_ack(ack) -> None:  # type: ignore[no-untyped-def]
        await ack()

    async def events(request: web.Request) -> web.Response:
        return await to_aiohttp_response(await bolt.async_dispatch(await to_bolt_request(request)))

    app = web.Application()
    app.router.add_post("/slack/events", events)
    runner, port = await start_local(app)
    return f"http://127.0.0.1:{port}/slack/events", runner


async def drain(fb: RunningApp, slack: RemoteSlack, expected: int, replies: int, timeout: float = 120) -> None:
    """Wait until every Firebreak request so far has finished (one audit entry and one reply each)."""
    deadline = time.monotonic() + timeout
    while await fb.services.audit.count() < expected or await asyncio.to_thread(slack.ask, "replies") < replies:  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise RuntimeError("Firebreak's after-ack work did not finish")
        await asyncio.sleep(0.05)
    await asyncio.to_thread(slack.ask, "forget")


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, round(q / 100 * len(s)) - 1))] * 1000


async def main(requests: int, concurrency: int, rounds: int, warmup: int) -> int:
    logs.configure("WARNING", json=True)
    redis = RedisServer().start()
    slack = RemoteSlack()
    fb = await start_firebreak(slack, redis.url)
    bare_url, bare_runner = await start_bare(slack)
    pbr_url, pbr_runner = await start_bare(slack, process_before_response=True)
    fb_url = fb.url + "/slack/events"
    pool = concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    loop = asyncio.get_running_loop()
    seq = iter(range(10**9))
    audited = 0

    async def fire(url: str, texts: list[str], channel: str) -> tuple[list[float], float]:
        return await loop.run_in_executor(pool, load, url, texts, channel, slack.response_url("bench"), concurrency)

    async def timed(key: tuple[str, str], url: str, texts: list[str], channel: str) -> None:
        took, elapsed = await fire(url, texts, channel)
        results[key] += took
        busy[key] += elapsed

    try:
        status, _, _ = await fb.sender.command(
            "declare Bench target incident --sev 2", user="UBENCH", response_url=slack.response_url("bench")
        )
        assert status == 200
        audited = 1
        await drain(fb, slack, audited, 1)
        channel = (await fb.incident("INC-1")).channel_id
        cases = {
            "status": lambda n: ["status"] * n,
            "declare": lambda n: [f"declare bench incident {next(seq)} --sev 3" for _ in range(n)],
        }
        apps = [("bare", bare_url), ("firebreak", fb_url), ("bare-pbr", pbr_url)]
        results: dict[tuple[str, str], list[float]] = {(c, a): [] for c in cases for a, _ in apps}
        busy: dict[tuple[str, str], float] = dict.fromkeys(results, 0.0)
        settle: dict[str, float] = dict.fromkeys(cases, 0.0)  # Firebreak's after-ack work, drained
        for texts in cases.values():  # warm up every app on both paths
            for app, url in apps:
                await fire(url, texts(warmup), channel)
                if app == "firebreak":
                    audited += warmup
                    await drain(fb, slack, audited, warmup)
        per_round = requests // rounds
        for n in range(rounds):
            for case, texts in cases.items():
                # Which app goes first turns by round, so drift between rounds hits them alike.
                for app, url in apps[n % 3 :] + apps[: n % 3]:
                    await timed((case, app), url, texts(per_round), channel)
                    if app == "firebreak":
                        # The apps share this event loop: Firebreak's after-ack work is drained
                        # before the next batch, so it never lands on another app's acks. Its time
                        # counts in Firebreak's sustained rate below.
                        began = time.perf_counter()
                        audited += per_round
                        await drain(fb, slack, audited, per_round)
                        settle[case] += time.perf_counter() - began
    finally:
        pool.shutdown()
        await bare_runner.cleanup()
        await pbr_runner.cleanup()
        await fb.stop()
        slack.stop()
        redis.stop()

    ok = True
    print(
        f"\nAck latency, {concurrency} concurrent senders, {per_round * rounds} requests per case "
        f"({rounds} interleaved rounds, {warmup} warm-up), {multiprocessing.cpu_count()} cores\n"
    )
    print("| command | app | n | p50 ms | p99 ms | req/s | Firebreak p50 × | p99 × | throughput × |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        fbl = results[(case, "firebreak")]
        fb_rps = len(fbl) / busy[(case, "firebreak")]
        print(
            f"| `/incident {case}` | Firebreak | {len(fbl)} | {pct(fbl, 50):.1f} | {pct(fbl, 99):.1f} "
            f"| {fb_rps:.0f} | | | |"
        )
        for app, label in (("bare", "bare Bolt (target)"), ("bare-pbr", "bare Bolt, process_before_response")):
            bl = results[(case, app)]
            b_rps = len(bl) / busy[(case, app)]
            r50, r99, rt = pct(fbl, 50) / pct(bl, 50), pct(fbl, 99) / pct(bl, 99), fb_rps / b_rps
            print(
                f"| `/incident {case}` | {label} | {len(bl)} | {pct(bl, 50):.1f} | {pct(bl, 99):.1f} "
                f"| {b_rps:.0f} | {r50:.2f} | {r99:.2f} | {rt:.2f} |"
            )
            if app == "bare":
                ok &= r99 <= P99_RATIO and r50 <= P50_RATIO and rt >= THROUGHPUT_RATIO
    print("\nFirebreak sustained: its acks and all the work after them (Redis, Slack), per second:\n")
    print("| command | Firebreak req/s | × bare Bolt | × bare Bolt, process_before_response |")
    print("|---|---|---|---|")
    for case in cases:
        n_fb = len(results[(case, "firebreak")])
        rate = n_fb / (busy[(case, "firebreak")] + settle[case])
        vs = [rate / (len(results[(case, a)]) / busy[(case, a)]) for a in ("bare", "bare-pbr")]
        print(f"| `/incident {case}` | {rate:.0f} | {vs[0]:.2f} | {vs[1]:.2f} |")
    print(
        f"\nTargets: p99 <= {P99_RATIO}x, p50 <= {P50_RATIO}x, throughput >= {THROUGHPUT_RATIO}x "
        "bare Bolt (its defaults): "
        f"{'met' if ok else 'MISSED'}"
    )
    print(
        f"(mean Firebreak ack, all cases: "
        f"{statistics.mean(x for k, v in results.items() if k[1] == 'firebreak' for x in v) * 1000:.1f} ms)"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--requests", type=int, default=600)
    p.add_argument("--concurrency", type=int, default=20)
    p.add_argument("--rounds", type=int, default=6)
    p.add_argument("--warmup", type=int, default=100)
    a = p.parse_args()
    if a.rounds % 3 or a.requests % a.rounds:
        p.error("--rounds must be a multiple of 3 (each app goes first equally often) and divide --requests")
    sys.exit(asyncio.run(main(a.requests, a.concurrency, a.rounds, a.warmup)))
