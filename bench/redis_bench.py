"""Redis topologies side by side: reminder lateness and command latency on one Redis versus a
three-master Cluster, in the same run, and the recovery time after a Sentinel master is killed.

    python bench/redis_bench.py [--incidents 300] [--window 20] [--commands 200] [--kills 5]

- Reminders: bench/cadence_bench.py's run (real records and reminder jobs, one worker process
  running the production scheduler loop on the real clock, a fake Slack) on each topology.
- Commands: the real app over HTTP (tests/support/harness.py); `/incident update` sent one after another
  inside one incident; latency = the reply's arrival at the fake Slack's response_url minus the
  send. Each update is several scripts (intent, record, cadence, audit).
- Failover: a master, a replica and three Sentinels (down-after 1 s, failover-timeout 3 s); one
  writer calls `write()` in a loop; the master is SIGKILLed; recovery = kill to the first write
  answered afterwards. The replica is restarted as a new one between kills.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from cadence_bench import one_run  # noqa: E402

from bot.clock import SystemClock  # noqa: E402
from bot.store import Keys, connect, write  # noqa: E402
from fbworld.slack import FakeSlack  # noqa: E402
from tests.support.harness import start_app  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402
from tests.support.redis_topologies import ClusterSetup, SentinelSetup  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def _server(kind: str) -> Any:
    return RedisServer().start() if kind == "single" else ClusterSetup().start()


async def commands(kind: str, n: int) -> list[float]:
    server = _server(kind)
    slack = FakeSlack()
    await slack.start()
    app = await start_app(slack, server.url, SystemClock())
    try:
        inc = await app.declare("bench", sev=2)
        channel = inc.channel_id
        out = []
        for i in range(n):
            t0 = time.perf_counter()
            key = await app.command(f"update Still draining, step {i}", channel=channel)
            await app.reply(key)
            out.append(time.perf_counter() - t0)
        return out
    finally:
        await app.stop()
        await slack.stop()
        server.stop()


async def one_kill() -> tuple[float, float | str]:
    """(Sentinel named a new master after, first write sent after the kill answered after) in
    seconds; the second is the error when the writer gave up instead."""
    setup = SentinelSetup().start()
    r = connect(setup.url)
    killed = float("inf")
    stop, recovered = asyncio.Event(), asyncio.Event()
    first_after: list[float] = []

    async def writer() -> None:
        i = 0
        while not stop.is_set():
            i += 1
            sent = time.monotonic()
            await write(r, ("SET", Keys.levers(f"bench:{i}"), "1"))
            if sent > killed and not first_after:  # a write in flight at the kill doesn't count
                first_after.append(time.monotonic())
                recovered.set()

    task = asyncio.create_task(writer())
    try:
        await asyncio.sleep(0.5)
        old = setup.master.port
        killed = time.monotonic()
        setup.master.kill()
        await asyncio.to_thread(setup.wait_failover, old)
        promoted = time.monotonic() - killed
        waiting = asyncio.create_task(recovered.wait())
        await asyncio.wait([task, waiting], return_when=asyncio.FIRST_COMPLETED)  # recovered, or gave up
        waiting.cancel()
        if first_after:
            return promoted, first_after[0] - killed
        return promoted, f"gave up: {task.exception()!r}"[:120]
    finally:
        stop.set()
        await asyncio.gather(task, return_exceptions=True)
        await r.aclose()
        setup.stop()


async def failover(kills: int) -> list[tuple[float, float | str]]:
    return [await one_kill() for _ in range(kills)]


async def main(n: int, window: float, cmds: int, kills: int) -> None:
    print(f"\nReminders: {n} incidents due over {window:g} s, one scheduler process, real clock.\n")
    print("| Redis | posted | duplicates | missing | lateness p50 | p99 | max |")
    print("|---|---|---|---|---|---|---|")
    for kind in ("single", "cluster"):
        r = await one_run(1, n, window, lead=2.0 + n * 0.01, redis=_server(kind))
        print(
            f"| {kind} | {r['posted']} | {r['duplicates']} | {r['missing']} | {r['p50'] * 1000:.0f} ms "
            f"| {r['p99'] * 1000:.0f} ms | {r['max'] * 1000:.0f} ms |"
        )
    print(f"\nCommands: {cmds} `/incident update` one after another, send to reply.\n")
    print("| Redis | p50 | p99 | max |")
    print("|---|---|---|---|")
    for kind in ("single", "cluster"):
        lat = await commands(kind, cmds)
        print(f"| {kind} | {pct(lat, 0.5) * 1000:.1f} ms | {pct(lat, 0.99) * 1000:.1f} ms | {max(lat) * 1000:.1f} ms |")
    print(f"\nFailover: Sentinel master SIGKILLed under one writer, {kills} times.\n")
    rows = await failover(kills)
    print("| kill | Sentinel named the new master after | first write answered after the kill |")
    print("|---|---|---|")
    for i, (promoted, recovered) in enumerate(rows, 1):
        shown = f"{recovered:.2f} s" if isinstance(recovered, float) else f"MISSED: {recovered}"
        print(f"| {i} | {promoted:.2f} s | {shown} |")
    times = [r for _, r in rows if isinstance(r, float)]
    print(f"\n{len(times)} of {len(rows)} recovered; median {statistics.median(times):.2f} s" if times else "")
    if len(times) < len(rows):
        raise SystemExit(1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--incidents", type=int, default=300)
    ap.add_argument("--window", type=float, default=20.0)
    ap.add_argument("--commands", type=int, default=200)
    ap.add_argument("--kills", type=int, default=5)
    a = ap.parse_args()
    asyncio.run(main(a.incidents, a.window, a.commands, a.kills))
