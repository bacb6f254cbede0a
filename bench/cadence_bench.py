"""Cadence benchmark: reminder lateness and scheduler CPU, one vs three processes.

    python bench/cadence_bench.py [--incidents 1000] [--window 60]

1,000 active incidents whose next update falls due inside a compressed window
(default 60 s instead of 15 minutes, so the run takes under three minutes; the
scheduler's work per reminder is the same). Each run starts a private
redis-server and a fake Slack Web API, seeds the incidents (real records,
channels and reminder jobs), then starts N worker processes that each run the
production scheduler loop (``Scheduler.run``: claim in Lua, dispatch, post to
Slack) on the real clock. Workers start (and report ready) before the
incidents are seeded, so interpreter start-up is not counted as lateness.

Lateness = the time the fake Slack received the reminder post - the due time.
CPU = process CPU seconds of each worker during the run, per minute of wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.clock import SystemClock  # noqa: E402
from bot.comms import timers  # noqa: E402
from bot.config import load_settings  # noqa: E402
from bot.incidents.models import Incident, RoleHolder  # noqa: E402
from bot.incidents.store import repo  # noqa: E402
from bot.runtime import build_services, slack_gateway  # noqa: E402
from fbworld.slack import FakeSlack  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402

TOKEN = "xoxb-bench"


def _settings(redis_url: str, slack_url: str):
    return load_settings(
        slack_bot_token=TOKEN, slack_signing_secret="bench", slack_api_url=slack_url, redis_url=redis_url
    )


async def worker(redis_url: str, slack_url: str) -> None:
    """One Firebreak process running only the scheduler loop, until stdin closes."""
    from bot import logs

    logs.configure(level="ERROR")  # stdout is the report channel
    settings = _settings(redis_url, slack_url)
    gateway = slack_gateway(settings)
    svc = build_services(settings, SystemClock(), chat=gateway)
    await gateway.client.auth_test()  # warm the HTTP session like a serving process
    cpu0, wall0 = time.process_time(), time.monotonic()
    task = asyncio.create_task(svc.scheduler.run())
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    task.cancel()
    cpu, wall = time.process_time() - cpu0, time.monotonic() - wall0
    await svc.chat.close()
    print(json.dumps({"cpu": cpu, "wall": wall}), flush=True)


async def seed(svc, slack: FakeSlack, n: int, first_due: float, window: float) -> dict[str, float]:
    """n active SEV1 incidents, due times spread evenly over the window; channel id -> due."""
    due_by_channel: dict[str, float] = {}
    now = time.time()
    for i in range(1, n + 1):
        channel = slack.add_channel(f"inc-bench-{i}")
        due = first_due + window * (i - 1) / n
        inc = Incident(
            id=f"INC-{i}",
            number=i,
            title=f"bench {i}",
            sev=1,
            channel_id=channel,
            channel_name=f"inc-bench-{i}",
            declared_by="UBENCH",
            declared_at=now,
            detected_at=now,
            next_update_due=due,
            roles={"ic": RoleHolder(user="UBENCH", since=now, by="UBENCH")},
        )
        await repo(svc).create(inc)
        await repo(svc).bind_channel(inc.id, channel)
        await timers.sync(svc, inc.id)
        due_by_channel[channel] = float((await repo(svc).get(inc.id)).next_update_due)
    return due_by_channel


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def one_run(procs: int, n: int, window: float, lead: float, redis: Any = None) -> dict:
    """``redis``: a started server with ``url`` and ``stop()`` (default: a private redis-server)."""
    redis = redis or RedisServer().start()
    slack = FakeSlack()
    await slack.start()
    try:
        # Workers start first (interpreter start-up is not the scheduler's lateness), then the
        # incidents are seeded while they run, as declarations would arrive.
        cmd = [sys.executable, __file__, "--worker", redis.url, slack.api_url]
        workers = [
            await asyncio.create_subprocess_exec(*cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
            for _ in range(procs)
        ]
        for w in workers:
            assert (await w.stdout.readline()).strip() == b"ready"
        svc = build_services(_settings(redis.url, slack.api_url), SystemClock())
        first_due = time.time() + lead
        due = await seed(svc, slack, n, first_due, window)
        assert time.time() < first_due, "seeding overran the first due time: raise the lead"
        await svc.chat.close()
        await svc.redis.aclose()
        await asyncio.sleep(max(0.0, first_due + window + 3 - time.time()))
        outs = [json.loads((await w.communicate(b""))[0].decode().strip().splitlines()[-1]) for w in workers]
        posts = [
            c for c in slack.calls_to("chat.postMessage") if str(c.args.get("text", "")).startswith(":alarm_clock:")
        ]
        per_channel: dict[str, int] = {}
        for c in posts:
            per_channel[c.args["channel"]] = per_channel.get(c.args["channel"], 0) + 1
        late = [c.timestamp - due[c.args["channel"]] for c in posts]
        return {
            "procs": procs,
            "posted": len(posts),
            "duplicates": sum(v - 1 for v in per_channel.values()),
            "missing": n - len(per_channel),
            "p50": pct(late, 0.5),
            "p99": pct(late, 0.99),
            "max": max(late),
            "early": sum(1 for x in late if x < 0),
            "cpu_per_min": [o["cpu"] / o["wall"] * 60 for o in outs],
        }
    finally:
        await slack.stop()
        redis.stop()


async def main(n: int, window: float) -> None:
    rows = [await one_run(p, n, window, lead=2.0 + n * 0.006) for p in (1, 3)]
    print(
        f"\n{n} active SEV1 incidents, reminders due over a {window:g} s window "
        f"(a 15-minute cadence compressed), real clock, private redis-server, fake Slack.\n"
    )
    print(
        "| processes | reminders posted | duplicates | missing | lateness p50 | lateness p99 | max "
        "| scheduler CPU s/min (per process) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        cpu = ", ".join(f"{c:.1f}" for c in r["cpu_per_min"])
        print(
            f"| {r['procs']} | {r['posted']} | {r['duplicates']} | {r['missing']} | {r['p50'] * 1000:.0f} ms "
            f"| {r['p99'] * 1000:.0f} ms | {r['max'] * 1000:.0f} ms | {cpu} |"
        )
    ok = all(r["p99"] < 2 and r["duplicates"] == 0 and r["missing"] == 0 and r["early"] == 0 for r in rows)
    print(f"\nTarget (p99 < 2 s, every reminder exactly once): {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        asyncio.run(worker(sys.argv[2], sys.argv[3]))
        sys.exit(0)
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--incidents", type=int, default=1000)
    ap.add_argument("--window", type=float, default=60.0)
    a = ap.parse_args()
    asyncio.run(main(a.incidents, a.window))
