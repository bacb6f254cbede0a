"""Command latency at 10, 1,000 and 10,000 open incidents, side by side.

    python bench/scale_bench.py [--sizes 10,1000,10000] [--status 100] [--declare 30] [--changed 10]

For each size: a private redis-server, that many open incidents seeded straight into it through
the incidents store API (record, roles, channel binding, pending reminder:
tests/support/reliability/seed.py), then one `firebreak serve` process (the production entry point, its
scheduler loop and start-up repairs included) against a FakeSlack that runs in this process with
the sender. Commands are sent one at a time (latency, not queueing), each Slack-signed:

- `status` in an incident's channel (incidents spread over the whole range);
- `declare` of a new incident (channel made, card posted and pinned);
- `changed --hours 1` in an incident's channel: its "Firebreak levers" stream reads the lever
  requests that moved in the window from one index, whatever the number of open incidents (the
  kube and Prometheus streams answer at once: none is configured).

Ack = the HTTP round trip Slack times. Answer = from sending the command to its answer reaching
Slack (the response_url POST), which includes the work done after the ack. Start-up = from exec
to "serving", and until the process goes idle (its start-up repairs, which walk every open
incident, are done); commands are measured after that.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fbworld.slack import FakeSlack  # noqa: E402
from tests.support.redis_server import RedisServer  # noqa: E402
from tests.support.reliability.replicas import Replica  # noqa: E402
from tests.support.reliability.seed import channel_for, seed_open  # noqa: E402
from tests.support.reliability.world import close, observer  # noqa: E402

FLAT = 10.0  # "flat": the largest size's p50 within this factor of the smallest's


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def idle(pid: int, timeout: float = 600.0) -> None:
    """Until the process uses under 2% of a core over half a second (its start-up work is done)."""
    deadline = time.monotonic() + timeout
    last = cpu_seconds(pid)
    while time.monotonic() < deadline:
        await asyncio.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last < 0.01:
            return
        last = now
    raise RuntimeError("the Firebreak process never went idle")


async def timed(slack: FakeSlack, rep: Replica, n: int, text: str, channel: str) -> tuple[float, float, str]:
    """(ack seconds, answer seconds, answer) of one command."""
    key = f"s{n}"
    t0 = time.perf_counter()
    status, ack, took = await rep.sender.command(
        text, user="U_IC", channel=channel, response_url=slack.response_url(key)
    )
    if status != 200:
        raise RuntimeError(f"HTTP {status} for {text!r}: {ack}")
    if ack.strip() and not ack.rstrip().endswith("…"):  # "Planning…", "Reading…": the answer follows
        return took, time.perf_counter() - t0, ack
    while not (got := slack.responses_for(key)):  # noqa: ASYNC110 - polling what the fake Slack received
        await asyncio.sleep(0.001)
    return took, time.perf_counter() - t0, str(got[0].get("text", ""))


async def one_size(size: int, counts: dict[str, int]) -> dict:
    redis = RedisServer().start()
    slack = FakeSlack()
    await slack.start()
    try:
        svc = observer(redis.url, slack.api_url, None)
        seeded = await seed_open(svc, size)
        await close(svc)
        sample = sorted({max(1, round(size * k / 10)) for k in range(1, 11)})  # spread over the range
        for i in sample:
            slack.add_channel(f"inc-seed-{i}", channel_id=channel_for(i))
        rep = Replica("bench", {"SLACK_API_URL": slack.api_url, "REDIS_URL": redis.url, "LOG_LEVEL": "WARNING"})
        t0 = time.monotonic()
        await rep.start()
        serving = time.monotonic() - t0
        assert rep.proc is not None
        await idle(rep.proc.pid)
        ready = time.monotonic() - t0
        out: dict = {"size": size, "seed": seeded, "serving": serving, "ready": ready}
        n = 0
        for case, count in counts.items():
            acks, answers = [], []
            for k in range(count):
                n += 1
                inc = sample[k % len(sample)]
                if case == "status":
                    text, channel, expect = "status", channel_for(inc), f"*INC-{inc}* "
                elif case == "declare":
                    text, channel, expect = f"declare Scale bench {k} --sev 3", "C_GENERAL", "Declared INC-"
                else:
                    text, channel, expect = "changed --hours 1", channel_for(inc), "What changed in the last 1h for "
                ack, answer, said = await timed(slack, rep, n, text, channel)
                if not said.startswith(expect):
                    raise RuntimeError(f"{text!r} at {size} open incidents answered {said!r}")
                acks.append(ack)
                answers.append(answer)
            out[case] = (acks, answers)
        problems = rep.problems()
        await rep.stop()
        if problems:
            raise RuntimeError(f"the process logged errors: {problems[:3]}")
        return out
    finally:
        await slack.stop()
        redis.stop()


def ms(x: float) -> str:
    return f"{x * 1000:,.0f}" if x >= 0.0995 else f"{x * 1000:.1f}"


def p50_p99(xs: list[float]) -> str:
    return f"{ms(pct(xs, 0.5))} / {ms(pct(xs, 0.99))} ms"


async def main(sizes: list[int], counts: dict[str, int]) -> int:
    rows = []
    for size in sizes:
        print(f"{size:,} open incidents: seeding and measuring…", file=sys.stderr, flush=True)
        rows.append(await one_size(size, counts))
    print(
        f"\nCommand latency by open incidents, one `firebreak serve` process, commands one at a time "
        f"({', '.join(f'{c} {k}' for k, c in counts.items())}), {os.cpu_count()} cores.\n"
    )
    head = " | ".join(f"`{c}` ack p50 / p99 | `{c}` answer p50 / p99" for c in counts)
    print(f"| open incidents | seeded in | serving / idle after start | {head} |")
    print("|---|---|---|" + "---|---|" * len(counts))
    for r in rows:
        cells = " | ".join(f"{p50_p99(r[c][0])} | {p50_p99(r[c][1])}" for c in counts)
        print(f"| {r['size']:,} | {r['seed']:.1f} s | {r['serving']:.1f} s / {r['ready']:.1f} s | {cells} |")
    ok = True
    lo, hi = rows[0], rows[-1]
    print()
    for c in counts:
        growth = pct(hi[c][1], 0.5) / pct(lo[c][1], 0.5)
        flat = growth <= FLAT
        ok &= flat
        print(
            f"`{c}` answer p50 at {hi['size']:,} vs {lo['size']:,} open incidents: ×{growth:.2f} "
            f"({'flat' if flat else 'NOT flat'}: within ×{FLAT:g})"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="10,1000,10000", help="comma-separated open-incident counts, ascending")
    ap.add_argument("--status", type=int, default=100)
    ap.add_argument("--declare", type=int, default=30)
    ap.add_argument("--changed", type=int, default=10)
    a = ap.parse_args()
    sizes = [int(s.replace("_", "")) for s in a.sizes.split(",") if s.strip()]
    counts = {"status": a.status, "declare": a.declare, "changed": a.changed}
    sys.exit(asyncio.run(main(sizes, {k: v for k, v in counts.items() if v > 0})))
