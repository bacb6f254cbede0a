"""Scale (issue 13, item 4): with 10,000 open incidents, both replicas still answer `status`,
`declare` and `changed` correctly, start up without an error, and fire no reminder early.

The incidents are seeded straight into Redis through the incidents store API (record, roles,
channel binding, pending reminder: tests/support/reliability/seed.py), not by 10,000 Slack round trips.
The latency figures at 10, 1,000 and 10,000 open incidents are a benchmark, printed side by side
by bench/scale_bench.py (bench/README.md); this test checks answers, not speed.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from bot.comms import timers
from fbworld.slack import FakeSlack
from tests.support.reliability.replicas import Pair, channel_of, start_pair, verified
from tests.support.reliability.seed import CELLS, channel_for, seed_open
from tests.support.reliability.world import close, observer

pytestmark = pytest.mark.reliability

OPEN = 10_000
SAMPLE = (1, 2, 4_999, 5_000, 9_999, OPEN)


@pytest.fixture
async def seeded(slack: FakeSlack, redis_url: str) -> str:
    svc = observer(redis_url, slack.api_url, None)
    try:
        await seed_open(svc, OPEN)
        assert len(await svc.incidents.open_ids()) == OPEN
    finally:
        await close(svc)
    for i in SAMPLE:  # the channels the test talks in (the rest need not exist in Slack)
        slack.add_channel(f"inc-seed-{i}", channel_id=channel_for(i))
    return redis_url


@pytest.fixture
async def pair(slack: FakeSlack, seeded: str) -> AsyncIterator[Pair]:
    p = await start_pair(slack, seeded)
    yield p
    await p.stop()


async def test_ten_thousand_open_incidents_still_answer_status_declare_and_changed(pair: Pair, slack: FakeSlack):
    for k, i in enumerate(SAMPLE):
        out = await pair.run(pair.replicas[k % 2], "status", "U_IC", channel_for(i))
        assert out.startswith(f"*INC-{i}* SEV{1 + i % 4} · active · Seeded incident {i}\n"), out
        assert f"Cells: {CELLS[i % len(CELLS)]} · next update due: " in out and "ops <@U0OPS>" in out, out

    out = await pair.run(pair.a, "declare Scale check --sev 2 --cell us-east-1", "U_IC", "C_GENERAL")
    assert re.match(rf"Declared INC-{OPEN + 1} \(SEV2\) in <#C\w+>; you are IC\.", out), out
    channel = await channel_of(pair.redis_url, f"INC-{OPEN + 1}")
    out = await pair.run(pair.b, "status", "U_IC", channel)
    assert out.startswith(f"*INC-{OPEN + 1}* SEV2 · active · Scale check\n"), out
    out = await pair.run(pair.b, "declare Scale check two --sev 3", "U_IC", "C_GENERAL")
    assert out.startswith(f"Declared INC-{OPEN + 2} (SEV3)"), out

    # `changed` reads every open incident's lever requests: slower at this size (bench/README.md),
    # still answered and posted.
    out = await pair.run(pair.a, "changed --hours 1", "U_IC", channel_for(5_000), timeout=60)
    assert out.startswith("What changed in the last 1h for INC-5000 posted in the channel"), out

    svc = observer(pair.redis_url, slack.api_url, None)
    try:
        assert len(await svc.incidents.open_ids()) == OPEN + 2
        assert await svc.scheduler.pending_count(timers.REMIND) == OPEN + 2  # none fired: none was due
    finally:
        await close(svc)
    assert not [c for c in slack.calls_to("chat.postMessage") if ":alarm_clock:" in str(c.args.get("text"))]
    assert verified(pair.redis_url).startswith("audit chain OK")
    for r in pair.replicas:
        assert r.problems() == [], (r.name, r.problems()[:3])
