"""Issue 35 item 12: a vote that arrives without the voter's eligibility (the seats they may fill,
checked against roles.yaml just before) fills no seat. It used to mean "any seat they hold", so a
caller that forgot the check, or a voter seated between the check and the script, approved
unchecked. The script now refuses it ("norole"), and nothing is recorded."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from bot.approvals.store import Ballot, Ballots
from bot.incidents.models import Incident, RoleHolder
from bot.incidents.store import IncidentRepo
from tests.support.harness import T0

CARD = ("C_INC", "1700000000.000100")


@pytest.fixture
async def r(redis_url):
    client = aioredis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def _open(r) -> Ballots:
    inc = Incident(
        id="INC-1",
        number=1,
        title="t",
        sev=2,
        channel_name="inc-1",
        declared_by="U_IC",
        declared_at=T0,
        detected_at=T0,
        roles={"ic": RoleHolder(user="U_IC", since=T0, by="U_IC")},
    )
    await IncidentRepo(r).create(inc)
    b = Ballots(r)
    await b.create(
        Ballot(
            id="REQ-1",
            kind="lever",
            incident="INC-1",
            requester="U_OPS",
            created_at=T0,
            expires_at=T0 + 600,
            seats=["ic"],
            sev1_seats=[],
            grant_seconds=0.0,
            card_channel=CARD[0],
            card_ts=CARD[1],
        )
    )
    return b


@pytest.mark.parametrize("eligible", [None, []], ids=["no-list", "empty-list"])
async def test_a_vote_without_an_eligibility_list_fills_no_seat(r, eligible):
    b = await _open(r)
    v = await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0, CARD, eligible)
    assert v.code == "norole", v
    assert await r.smembers("fb:inc:{INC-1}:appr:votes:REQ-1") == set()
    got = await b.get("INC-1", "REQ-1")
    assert (got.state, got.filled) == ("pending", {})


async def test_the_seats_the_check_allowed_are_filled(r):
    b = await _open(r)
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0, CARD, ["ic"])).code == "approved"
