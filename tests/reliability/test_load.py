"""Load: 50 concurrent incidents, 10 commands a second for 60 s, across two processes (issue 13,
item 4): zero errors, p99 ack under Slack's 3 s limit, reminders still on time.

Two `firebreak serve` replicas share one redis-server and the fake Slack. The sender (this test)
sends a Slack-signed slash command every 100 ms, to each replica in turn, as a Service would
spread them: the first 50 declare the incidents (SEV1-4), the rest are `status`, `update`,
`role` and `help` in those incidents. Each ack is timed as Slack times it (the HTTP round trip).

The cadence policy is compressed (SEV1's first update is due 15 s after declaring, an overdue one
escalates 15 s later, an update resets the due), so the replicas' scheduler loops post reminders
and escalations throughout the run, while the commands come in. A reminder's lateness is the time
the fake Slack received it minus the due time the scheduler had for it (carried on its Snooze
button), so it is measured from outside the processes.

Zero errors: every ack is a 200; every answer is the command's success; every command's audit
entry says ``ok``; no replica logged at error level; the audit chain verifies. The figures are
printed (run with -s to see them).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from bot.comms.commands import Snooze
from bot.slack import actions
from bot.store import Keys
from fbworld.slack import FakeSlack
from tests.support.reliability.replicas import Pair, channel_of, exported, start_pair, verified, write_policy

pytestmark = pytest.mark.reliability

INCIDENTS = 50
RATE = 10.0  # commands per second
SECONDS = 60.0
SLACK_LIMIT_S = 3.0  # Slack shows the user an error when the ack takes longer
TOLERANCE_S = 2.0  # the scheduler's: a job run later than due + this is "late" (bot/scheduler)
CADENCE = {
    "first_update_minutes": {1: 0.25, 2: 0.5, 3: 0.75, 4: 0.75},
    "interval_minutes": {1: 0.25, 2: 0.5, 3: 0.75, 4: 0.75},
    "escalate_after_minutes": 0.25,
}
PEOPLE = ["U0COMMS", "U0SCRIBE", "U0OPS", "U0MODEL"]


@pytest.fixture
async def pair(slack: FakeSlack, redis_url: str, tmp_path: Path) -> AsyncIterator[Pair]:
    policy = write_policy(tmp_path, cadence=CADENCE)
    p = await start_pair(slack, redis_url, FIREBREAK_POLICY_DIR=str(policy))
    yield p
    await p.stop()


def command_for(n: int, incidents: list[tuple[str, int]]) -> tuple[str, str | None, re.Pattern[str]]:
    """The n-th command of the run: (text, channel or None for C_GENERAL, what its answer must match)."""
    if n < INCIDENTS:
        return f"declare Load incident {n} --sev {1 + n % 4}", None, re.compile(r"Declared INC-\d+ ")
    channel, _ = incidents[n % len(incidents)]
    kind = n % 10
    if kind < 5:
        return "status", channel, re.compile(r"\*INC-\d+\* SEV\d · active · Load incident ")
    if kind < 7:
        return f"update Chat API: load test, step {n}", channel, re.compile(r"Update posted\. Next update due ")
    if kind < 9:
        role, who = ("comms", "scribe")[n % 2], PEOPLE[(n // 10) % len(PEOPLE)]
        return f"role {role} <@{who}>", channel, re.compile(rf"<@{who}> is (now|already) ")
    return "help status", channel, re.compile(r"`/incident status`: ")


async def reply_of(pair: Pair, key: str, ack: str) -> str:
    return ack if ack.strip() else await pair.reply(key, timeout=30)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def reminder_lateness(slack: FakeSlack) -> tuple[list[float], Counter]:
    """Each reminder post's lateness (received at the fake Slack - the due on its Snooze button),
    and how many posts each (channel, due) got."""
    late: list[float] = []
    per_due: Counter = Counter()
    for c in slack.calls_to("chat.postMessage"):
        if not str(c.args.get("text", "")).startswith(":alarm_clock:"):
            continue
        dues = [
            cmd.due
            for block in c.args.get("blocks") or []
            for el in block.get("elements") or []
            if el.get("type") == "button"
            and (got := actions.decode(el["action_id"], el["value"])) is not None
            and isinstance(cmd := got[0], Snooze)
        ]
        assert len(dues) == 1, c.args
        late.append(c.timestamp - float(dues[0]))
        per_due[(c.args["channel"], dues[0])] += 1
    return late, per_due


async def test_fifty_incidents_ten_commands_a_second_for_a_minute_on_two_replicas(pair: Pair, slack: FakeSlack):
    incidents: list[tuple[str, int]] = []  # (channel, sev) as the declares come back
    acks: list[float] = []
    sent: list[asyncio.Task] = []
    answers: list[tuple[str, re.Pattern[str], str]] = []  # (text, what the answer must match, answer)

    async def one(n: int) -> None:
        text, channel, expect = command_for(n, incidents)
        to = pair.replicas[n % 2]
        key, ack, took = await pair.command(to, text, "U_IC", channel or "C_GENERAL")
        acks.append(took)
        answer = await reply_of(pair, key, ack)
        answers.append((text, expect, answer))
        if n < INCIDENTS and answer.startswith("Declared INC-"):
            incidents.append((await channel_of(pair.redis_url, answer.split()[1]), 1 + n % 4))

    total = int(RATE * SECONDS)
    start = time.monotonic()
    for n in range(total):
        await asyncio.sleep(max(0.0, start + n / RATE - time.monotonic()))
        sent.append(asyncio.create_task(one(n)))
    await asyncio.gather(*sent)
    ran = time.monotonic() - start
    await asyncio.sleep(TOLERANCE_S + 1)  # whatever fell due during the run has been posted

    # Nothing the scheduler holds is overdue: every reminder and escalation due so far was posted.
    r = aioredis.from_url(pair.redis_url, decode_responses=True)
    try:
        overdue = await r.zrangebyscore(Keys.sched("due"), "-inf", time.time() - TOLERANCE_S)
    finally:
        await r.aclose()
    late, per_due = reminder_lateness(slack)
    escalations = [c for c in slack.calls_to("chat.postMessage") if ":rotating_light:" in str(c.args.get("text"))]
    print(
        f"\n{total} commands in {ran:.1f} s to 2 replicas, {len(incidents)} incidents: ack p50 "
        f"{pct(acks, 0.5) * 1000:.0f} ms, p99 {pct(acks, 0.99) * 1000:.0f} ms, max {max(acks) * 1000:.0f} ms; "
        f"{len(late)} reminders, lateness p50 {pct(late, 0.5) * 1000:.0f} ms, p99 {pct(late, 0.99) * 1000:.0f} ms, "
        f"max {max(late) * 1000:.0f} ms; {len(escalations)} escalations"
    )

    # Zero errors.
    assert len(incidents) == INCIDENTS and len(acks) == total
    for text, expect, answer in answers:
        assert expect.match(answer), (text, answer)
        assert "Something failed" not in answer and "Traceback" not in answer, (text, answer)
    entries = [e for e in exported(pair.redis_url) if e["action"].startswith("command.")]
    results = Counter(e["detail"].get("result") for e in entries)
    assert set(results) == {"ok"}, [e for e in entries if e["detail"].get("result") != "ok"][:5]
    assert sum(1 for e in entries if e["detail"].get("source") == "slash") == total
    assert verified(pair.redis_url).startswith("audit chain OK")
    for rep in pair.replicas:
        assert rep.problems() == [], (rep.name, rep.problems()[:3])

    # The ack bound Slack sets.
    assert pct(acks, 0.99) < SLACK_LIMIT_S

    # Reminders on time: each (incident, due) posted once, none early, none past the tolerance.
    assert len(late) >= INCIDENTS // 2, len(late)  # the run did exercise the reminders
    assert max(per_due.values()) == 1, [k for k, v in per_due.items() if v > 1]
    assert min(late) >= 0, min(late)
    assert max(late) < TOLERANCE_S, sorted(late)[-5:]
    assert overdue == [], overdue[:5]
