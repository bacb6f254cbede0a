"""Slack Web API 429/5xx bursts and API-server 5xx/timeouts, under load (issue 13, item 4).

Two `firebreak serve` replicas, ten open incidents, and a steady stream of `status` commands to
both replicas the whole time (the load). Then bursts of faults hit the operations in flight:

- Slack: ``chat.postMessage`` answers 429 (Retry-After: 1) or 503 for a while, during ten
  concurrent `update`s. A burst shorter than the retry budget is absorbed (each update posted once);
  a longer one is reported in the reply, and each failed post took at most the budgeted attempts
  (slack_sdk's handlers as bot/slack/gateway.py sets them: 3 retries on 429, 2 on 5xx) and nothing
  retries afterwards.
- Kubernetes: ten concurrent levers, one per ClusterQueue, each given its own fault: reads that
  answer 503 (retried, at most 3 attempts), a read that hangs past the timeout, a write answered
  500/503 or 429, a write that hangs past the timeout and lands late. Each lever's reply says what
  happened, the object ends as the reply says, and the requests per lever are bounded (counted at
  the fake API server).

Calls are counted at the fakes. Nothing here times Firebreak except the load's p99 ack (under Slack's
3 s limit) and the spacing of 429 retries (never sooner than Retry-After: a lower bound).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from fbworld.kube import FakeKubeCluster, samples, write_kubeconfig
from fbworld.slack import FakeSlack
from tests.support.reliability.replicas import Pair, start_pair, verified, write_policy
from tests.support.reliability.world import CELL, OPS, until

pytestmark = pytest.mark.reliability

N = 10  # open incidents, and operations per burst
SLACK_LIMIT_S = 3.0  # Slack shows the user an error when an ack takes longer
API_TIMEOUT = 1.0  # levers.yaml api_timeout_seconds
RATE_RETRIES, SERVER_RETRIES = 3, 2  # bot/slack/gateway.py make_client


@dataclass
class Load:
    """`status` at ``rate`` per second, alternately to each replica, until stopped; every ack is
    checked (200 within Slack's limit) and, at the end, every answer."""

    pair: Pair
    channels: list[str]
    rate: float = 5.0
    acks: list[float] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(default_factory=list)
    _stop: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task | None = None

    async def _one(self, i: int) -> None:
        ch = self.channels[i % len(self.channels)]
        key, ack, took = await self.pair.command(self.pair.replicas[i % 2], "status", "U_IC", ch)
        self.acks.append(took)
        self.keys.append((key, ack))

    async def _run(self) -> None:
        sent: list[asyncio.Task] = []
        i = 0
        start = time.monotonic()
        while not self._stop.is_set():
            sent.append(asyncio.create_task(self._one(i)))
            i += 1
            await asyncio.sleep(max(0.0, start + i / self.rate - time.monotonic()))
        await asyncio.gather(*sent)

    def __enter__(self) -> Load:
        self._task = asyncio.create_task(self._run())
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()

    async def check(self) -> int:
        """Wait for the last requests; every ack was in time and every answer is a status card."""
        assert self._task is not None
        await self._task
        assert self.acks
        p99 = sorted(self.acks)[round(0.99 * (len(self.acks) - 1))]
        assert p99 < SLACK_LIMIT_S, sorted(self.acks)[-5:]
        for key, ack in self.keys:
            text = ack if ack.strip() else await self.pair.reply(key)
            assert text.startswith("*INC-") and " · active · " in text, text
        return len(self.keys)


@pytest.fixture
async def cell() -> AsyncIterator[FakeKubeCluster]:
    async with FakeKubeCluster(CELL) as c:
        for i in range(N):
            c.put(samples.cluster_queue(name=f"cq-{i}"))
        yield c


@pytest.fixture
async def pair(slack: FakeSlack, redis_url: str, cell: FakeKubeCluster, tmp_path: Path) -> AsyncIterator[Pair]:
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", {CELL: cell.url})
    policy = write_policy(tmp_path, levers={"api_timeout_seconds": API_TIMEOUT})
    p = await start_pair(slack, redis_url, KUBECONFIG=str(kubeconfig), FIREBREAK_POLICY_DIR=str(policy))
    yield p
    await p.stop()


async def open_incidents(pair: Pair) -> list[str]:
    return [await pair.declare(pair.replicas[i % 2], f"Queue {i} starving", cells=(CELL,), ops=OPS) for i in range(N)]


def attempts(slack: FakeSlack, text: str) -> dict[str, list]:
    """chat.postMessage calls whose text contains ``text``, by channel (one operation each)."""
    out: dict[str, list] = {}
    for c in slack.calls_to("chat.postMessage"):
        if text in str(c.args.get("text", "")):
            out.setdefault(c.args["channel"], []).append(c)
    return out


async def updates(pair: Pair, channels: list[str], words: str) -> list[str]:
    """One `update` per incident, all at once, spread over both replicas; the replies."""
    return await asyncio.gather(
        *(
            pair.run(pair.replicas[i % 2], f"update Chat API: {words} ({i})", "U_IC", ch, timeout=30)
            for i, ch in enumerate(channels)
        )
    )


def landed(slack: FakeSlack, channel: str, text: str) -> int:
    return sum(1 for m in slack.messages(channel) if text in str(m.get("text", "")))


async def quiet(slack: FakeSlack, text: str, seconds: float = 3.0) -> None:
    """Nothing retries once the replies are in: no further call for these operations."""
    before = sum(map(len, attempts(slack, text).values()))
    await asyncio.sleep(seconds)
    assert sum(map(len, attempts(slack, text).values())) == before, "calls went on after the replies"


async def test_slack_429_and_5xx_bursts_are_retried_within_bounds_and_reported(pair: Pair, slack: FakeSlack):
    channels = await open_incidents(pair)
    with Load(pair, channels) as load:
        # 1. A 429 burst the retries absorb: each post is refused once, retried after Retry-After.
        slack.rate_limit_next("chat.postMessage", times=N, retry_after=1)
        outs = await updates(pair, channels, "investigating")
        assert all(o.startswith("Update posted.") and "could not post" not in o for o in outs), outs
        tried = attempts(slack, "Chat API: investigating")
        assert sorted(tried) == sorted(channels)
        assert all(len(calls) <= 1 + RATE_RETRIES for calls in tried.values()), Counter(map(len, tried.values()))
        assert sum(map(len, tried.values())) == 2 * N  # N refused, each retried once
        for calls in tried.values():  # never sooner than Slack's Retry-After (a lower bound)
            assert all(b.timestamp - a.timestamp >= 0.9 for a, b in itertools.pairwise(calls))
        for i, ch in enumerate(channels):
            assert landed(slack, ch, f"Chat API: investigating ({i})") == 1

        # 2. A 429 burst longer than the budget: each post gives up after its 4 attempts, the reply
        # says the channel post failed and why, and nothing keeps retrying.
        slack.rate_limit_next("chat.postMessage", times=N * (1 + RATE_RETRIES), retry_after=1)
        outs = await updates(pair, channels, "degraded")
        assert all(o.startswith("Update recorded.") for o in outs), outs  # not "posted"
        assert all("(could not post in the incident channel: ratelimited)" in o for o in outs), outs
        tried = attempts(slack, "Chat API: degraded")
        assert sorted(tried) == sorted(channels)
        assert Counter(map(len, tried.values())) == {1 + RATE_RETRIES: N}
        assert all(landed(slack, ch, "Chat API: degraded") == 0 for ch in channels)
        await quiet(slack, "Chat API: degraded")

        # 3. A 5xx burst the retries absorb (503 with a plain-text body, as a load balancer sends).
        slack.http_error_next("chat.postMessage", 503, times=N)
        outs = await updates(pair, channels, "recovering")
        assert all(o.startswith("Update posted.") and "could not post" not in o for o in outs), outs
        tried = attempts(slack, "Chat API: recovering")
        assert all(len(calls) <= 1 + SERVER_RETRIES for calls in tried.values())
        assert sum(map(len, tried.values())) == 2 * N
        for i, ch in enumerate(channels):
            assert landed(slack, ch, f"Chat API: recovering ({i})") == 1
    served = await load.check()
    assert served >= 20
    assert verified(pair.redis_url).startswith("audit chain OK")
    for r in pair.replicas:
        assert r.problems() == [], (r.name, r.problems())


async def test_a_5xx_burst_longer_than_the_retries_is_reported_not_crashed(pair: Pair, slack: FakeSlack):
    channels = await open_incidents(pair)
    with Load(pair, channels) as load:
        slack.http_error_next("chat.postMessage", 503, times=N * (1 + SERVER_RETRIES))
        outs = await updates(pair, channels, "down")
        tried = attempts(slack, "Chat API: down")
        assert Counter(map(len, tried.values())) == {1 + SERVER_RETRIES: N}  # bounded either way
        await quiet(slack, "Chat API: down")
        assert all(o.startswith("Update recorded.") for o in outs), outs
        assert all("(could not post in the incident channel: http_503)" in o for o in outs), outs
        assert not any("Something failed" in o for o in outs), outs
    await load.check()
    for r in pair.replicas:
        assert r.problems() == [], (r.name, r.problems())


# Kubernetes ---------------------------------------------------------------------------------------

APPLIED = "applied and verified (stopPolicy=Hold"
NOTHING = "nothing changed (read back, and fenced so the slow write can't land late)."


def _faults(cell: FakeKubeCluster) -> dict[int, str]:
    """One fault per ClusterQueue; what the lever on it must end as."""
    path = "/clusterqueues/cq-{}$".format
    cell.fail_next("GET", path(0), 503, times=2)  # reads retried: 2 refused, the 3rd answers
    cell.fail_next("GET", path(1), 503, times=3)  # every read attempt refused
    cell.fail_next("PATCH", path(2), 500)  # the write refused: not retried, read back, fenced
    cell.delay_next("PATCH", path(3), API_TIMEOUT + 2)  # the write hangs past the timeout, lands late
    cell.fail_next("PATCH", path(4), 429, times=2)  # throttled: the server ran nothing, retried
    cell.fail_next("PATCH", path(5), 503)
    cell.delay_next("GET", path(6), API_TIMEOUT + 2)  # a read hangs past the timeout: retried
    return {0: "applied", 1: "unread", 2: "refused", 3: "timeout", 4: "applied", 5: "refused", 6: "applied"}


async def test_api_server_5xx_and_timeouts_under_load(pair: Pair, cell: FakeKubeCluster):
    channels = await open_incidents(pair)
    expect = _faults(cell)
    with Load(pair, channels) as load:
        outs = await asyncio.gather(
            *(
                pair.run(pair.replicas[i % 2], f"lever kueue-hold cq-{i}", OPS, ch, timeout=60)
                for i, ch in enumerate(channels)
            )
        )
        # The late write of cq-3 reaches the API server after the lever gave up: refused (fenced).
        await until(lambda: [r for r in cell.find_requests("PATCH", "/cq-3$") if r.status == 409], 15, "late write")
    for i, out in enumerate(outs):
        kind = expect.get(i, "applied")
        reqs = cell.find_requests(None, f"/clusterqueues/cq-{i}$")
        gets = [r for r in reqs if r.method == "GET"]
        patches = [r for r in reqs if r.method == "PATCH"]
        policy = cell.get("clusterqueue", f"cq-{i}")["spec"]["stopPolicy"]
        where = f"kueue-hold cq-{i} (us-east-3)"
        if kind == "applied":
            assert f"{where}: {APPLIED}" in out, (i, out)
            assert policy == "Hold"
        elif kind == "unread":
            assert out == (
                "Could not read ClusterQueue cq-1 in us-east-3: 503 ServiceUnavailable: fake-kube injected 503 "
                "for GET /apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq-1; nothing changed."
            ), out
            assert (len(gets), len(patches), policy) == (3, 0, "None")  # 3 attempts, then given up
        elif kind == "refused":
            code = "500 InternalError" if i == 2 else "503 ServiceUnavailable"
            assert f"{where}: failed: {code}: " in out and out.endswith(NOTHING), out
            assert policy == "None"
        else:
            assert f"{where}: failed: Timeout: no answer within {API_TIMEOUT:g}s; {NOTHING}" in out, out
            assert policy == "None"
        # Bounded: at most 3 attempts per read (plan, pre-apply, verify or read-back: 3 reads,
        # plus one more for a timed-out read) and per write (a write refused or timed out is
        # followed by the fence: two more PATCHes); never a storm.
        assert len(gets) <= 3 * 3 + 1, (i, [(r.method, r.status) for r in reqs])
        assert len(patches) <= 3, (i, [(r.method, r.status) for r in reqs])
    refused_writes = {i: [r.status for r in cell.find_requests("PATCH", f"/cq-{i}$")] for i in (2, 3, 5)}
    assert refused_writes == {2: [500, 200, 200], 3: [409, 200, 200], 5: [503, 200, 200]}, refused_writes
    assert [r.status for r in cell.find_requests("PATCH", "/cq-4$")] == [429, 429, 200]
    await load.check()
    assert verified(pair.redis_url).startswith("audit chain OK")
    for r in pair.replicas:
        assert r.problems() == [], (r.name, r.problems())
