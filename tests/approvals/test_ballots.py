"""The ballot state machine on a real Redis with an injected clock."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as aioredis

from bot.approvals import store
from bot.approvals.store import Ballot
from bot.incidents.models import Incident, RoleHolder
from bot.incidents.store import IncidentRepo
from bot.policy.roles import ROLES
from tests.support.harness import T0


class Ballots(store.Ballots):
    """The store, with the voter's eligibility check passed for every seat unless a test says
    otherwise: these tests are of the state machine (a vote with no list fills no seat:
    tests/approvals/test_vote_fail_closed.py)."""

    async def vote(self, *args, **kw):  # type: ignore[no-untyped-def]
        if len(args) < 7 and "eligible" not in kw:
            kw["eligible"] = list(ROLES)
        return await super().vote(*args, **kw)


WINDOW = 600.0
CARD = ("C_INC", "1700000000.000100")  # where each ballot's card was posted: votes are pressed on it


@pytest.fixture
async def r(redis_url):
    client = aioredis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


async def incident(r, sev=2, **roles: str) -> str:
    inc = Incident(
        id="INC-1",
        number=1,
        title="t",
        sev=sev,
        channel_name="inc-1",
        declared_by="U_IC",
        declared_at=T0,
        detected_at=T0,
        roles={k: RoleHolder(user=v, since=T0, by="U_IC") for k, v in roles.items()},
    )
    await IncidentRepo(r).create(inc)
    return inc.id


def ballot(bid="REQ-1", kind="lever", requester="U_OPS", seats=("ic",), sev1=(), grant=0.0) -> Ballot:
    return Ballot(
        id=bid,
        kind=kind,
        incident="INC-1",
        requester=requester,
        created_at=T0,
        expires_at=T0 + WINDOW,
        seats=list(seats),
        sev1_seats=list(sev1),
        grant_seconds=grant,
        card_channel=CARD[0],
        card_ts=CARD[1],
    )


async def test_self_approval_is_refused_even_for_the_ic(r):
    await incident(r, ic="U_IC")
    b = Ballots(r)
    await b.create(ballot(requester="U_IC"))
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0, CARD)).code == "self"
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "deny", T0, CARD)).code == "self"
    assert (await b.get("INC-1", "REQ-1")).state == "pending"


async def test_approver_without_the_role_is_refused_and_no_vote_is_recorded(r):
    await incident(r, ic="U_IC", ops="U_OPS", comms="U_C")
    b = Ballots(r)
    await b.create(ballot())
    v = await b.vote("INC-1", "REQ-1", "U_C", "approve", T0, CARD)
    assert v.code == "norole" and v.seat == '["ic"]'
    assert await r.smembers("fb:inc:{INC-1}:appr:votes:REQ-1") == set()
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0 + 1, CARD)).code == "approved"
    got = await b.get("INC-1", "REQ-1")
    assert (got.state, got.decided_by, got.decided_at, got.filled) == ("approved", "U_IC", T0 + 1, {"ic": "U_IC"})


async def test_role_is_read_at_the_click_not_at_the_request(r):
    repo = IncidentRepo(r)
    await incident(r, ic="U_IC")
    b = Ballots(r)
    await b.create(ballot())
    await repo.set_role("INC-1", "ic", "U_NEW", "U_IC", T0 + 5)  # the IC seat changed hands
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0 + 6, CARD)).code == "norole"
    assert (await b.vote("INC-1", "REQ-1", "U_NEW", "approve", T0 + 7, CARD)).code == "approved"


async def test_second_vote_by_the_same_person_is_refused(r):
    await incident(r, sev=1, ic="U_IC", security="U_SEC")
    b = Ballots(r)
    await b.create(ballot("BG-1", "breakglass", requester="U_X", sev1=("security",), grant=1800))
    v = await b.vote("INC-1", "BG-1", "U_IC", "approve", T0, CARD)
    assert (v.code, v.seat, v.other) == ("recorded", "ic", '["security"]')
    assert (await b.vote("INC-1", "BG-1", "U_IC", "approve", T0 + 1, CARD)).code == "voted"
    assert (await b.vote("INC-1", "BG-1", "U_IC", "deny", T0 + 1, CARD)).code == "voted"
    v = await b.vote("INC-1", "BG-1", "U_SEC", "approve", T0 + 2, CARD)
    assert (v.code, v.seat) == ("approved", "security")
    got = await b.get("INC-1", "BG-1")
    assert got.grant_expires_at == T0 + 2 + 1800
    assert got.filled == {"ic": "U_IC", "security": "U_SEC"}


async def test_one_person_holding_both_seats_fills_only_one(r):
    await incident(r, sev=1, ic="U_BOTH", security="U_BOTH")
    b = Ballots(r)
    await b.create(ballot("BG-1", "breakglass", requester="U_X", sev1=("security",), grant=600))
    assert (await b.vote("INC-1", "BG-1", "U_BOTH", "approve", T0, CARD)).code == "recorded"
    assert (await b.vote("INC-1", "BG-1", "U_BOTH", "approve", T0, CARD)).code == "voted"
    assert (await b.get("INC-1", "BG-1")).state == "pending"


async def test_sev_read_at_each_press(r):
    repo = IncidentRepo(r)
    await incident(r, sev=2, ic="U_IC", security="U_SEC")
    b = Ballots(r)
    await b.create(ballot("BG-1", "breakglass", requester="U_X", sev1=("security",), grant=600))
    await b.create(ballot("BG-2", "breakglass", requester="U_X", sev1=("security",), grant=600))
    # At SEV2 the security lead is not a required approver.
    assert (await b.vote("INC-1", "BG-1", "U_SEC", "approve", T0, CARD)).code == "norole"
    assert (await b.vote("INC-1", "BG-1", "U_IC", "approve", T0, CARD)).code == "approved"
    await repo.raise_sev("INC-1", 1, "exfil", None, T0)
    assert (await b.vote("INC-1", "BG-2", "U_IC", "approve", T0, CARD)).code == "recorded"
    assert (await b.vote("INC-1", "BG-2", "U_SEC", "approve", T0, CARD)).code == "approved"


async def test_a_seat_already_approved_by_someone_else(r):
    repo = IncidentRepo(r)
    await incident(r, sev=1, ic="U_IC", security="U_SEC")
    b = Ballots(r)
    await b.create(ballot("BG-1", "breakglass", requester="U_X", sev1=("security",), grant=600))
    assert (await b.vote("INC-1", "BG-1", "U_IC", "approve", T0, CARD)).code == "recorded"
    await repo.set_role("INC-1", "ic", "U_IC2", "U_IC", T0)
    v = await b.vote("INC-1", "BG-1", "U_IC2", "approve", T0, CARD)
    assert (v.code, v.seat, v.other) == ("filled", "ic", "U_IC")


async def test_deny_decides_and_later_clicks_see_the_decision(r):
    await incident(r, ic="U_IC")
    b = Ballots(r)
    await b.create(ballot())
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "deny", T0, CARD)).code == "denied"
    v = await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0, CARD)
    assert (v.code, v.seat) == ("decided", "denied")


@pytest.mark.parametrize(
    "offset,code,state", [(-1, "approved", "approved"), (0, "expired", "expired"), (1, "expired", "expired")]
)
async def test_expiry_boundary_on_a_click(r, offset, code, state):
    """expires_at itself is outside the window: [created_at, expires_at)."""
    await incident(r, ic="U_IC")
    b = Ballots(r)
    await b.create(ballot())
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0 + WINDOW + offset, CARD)).code == code
    assert (await b.get("INC-1", "REQ-1")).state == state


async def test_expire_script_boundaries_and_once(r):
    await incident(r, ic="U_IC")
    b = Ballots(r)
    await b.create(ballot())
    assert await b.expire("INC-1", "REQ-1", T0 + WINDOW - 1) == 0
    assert await b.expire("INC-1", "REQ-1", T0 + WINDOW) == 1
    assert await b.expire("INC-1", "REQ-1", T0 + WINDOW + 1) == 0  # only once
    assert await b.expire("INC-1", "REQ-404", T0) == -1
    v = await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0 + WINDOW + 2, CARD)
    assert (v.code, v.seat) == ("decided", "expired")


async def test_n_concurrent_approvals_decide_once_across_two_processes(redis_url):
    clients = [aioredis.from_url(redis_url, decode_responses=True) for _ in range(2)]
    try:
        await incident(clients[0], ic="U_IC")
        stores = [Ballots(c) for c in clients]
        await stores[0].create(ballot())
        votes = await asyncio.gather(
            *(stores[i % 2].vote("INC-1", "REQ-1", "U_IC", "approve", T0 + 1, CARD) for i in range(20))
        )
        codes = sorted(v.code for v in votes)
        assert codes.count("approved") == 1
        assert set(codes) == {"approved", "decided"}  # the decision is checked before the vote
    finally:
        for c in clients:
            await c.aclose()


async def test_create_is_idempotent(r):
    await incident(r, ic="U_IC")
    b = Ballots(r)
    assert await b.create(ballot()) is True
    assert await b.create(ballot(requester="U_OTHER")) is False
    assert (await b.get("INC-1", "REQ-1")).requester == "U_OPS"
    assert [x.id for x in await b.all("INC-1")] == ["REQ-1"]


async def test_grant_end_and_revoke(r):
    await incident(r, ic="U_IC", security="U_SEC", comms="U_C")
    b = Ballots(r)
    for bid in ("BG-1", "BG-2", "BG-3"):
        await b.create(ballot(bid, "breakglass", requester="U_X", grant=600))
        await b.vote("INC-1", bid, "U_IC", "approve", T0, CARD)
    # Grant runs [T0, T0+600).
    assert await b.end_grant("INC-1", "BG-1", T0 + 599) == 0
    assert await b.end_grant("INC-1", "BG-1", T0 + 600) == 1
    assert await b.end_grant("INC-1", "BG-1", T0 + 601) == 0
    assert await b.revoke("INC-1", "BG-1", "U_X", T0 + 601, ["ic", "security"]) == ("notlive", "ended")
    assert await b.revoke("INC-1", "BG-2", "U_C", T0 + 10, ["ic", "security"]) == ("notallowed", "approved")
    assert await b.revoke("INC-1", "BG-2", "U_SEC", T0 + 10, ["ic", "security"]) == ("revoked", "approved")
    assert await b.end_grant("INC-1", "BG-2", T0 + 600) == 0  # a revoked grant does not "end" again
    assert await b.revoke("INC-1", "BG-3", "U_X", T0 + 10, ["ic"]) == ("revoked", "approved")  # handed back
    got = await b.get("INC-1", "BG-3")
    assert (got.state, got.ended_by, got.ended_at) == ("revoked", "U_X", T0 + 10)


async def test_a_vote_counts_only_from_the_ballots_own_card(r):
    await incident(r, ic="U_IC")
    b = Ballots(r)
    await b.create(ballot())
    for elsewhere in (("C_INC", "1700000000.000200"), ("D_IC", CARD[1]), (None, None)):
        v = await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0, elsewhere)
        assert (v.code, v.seat) == ("elsewhere", "C_INC")
        assert (await b.vote("INC-1", "REQ-1", "U_IC", "deny", T0, elsewhere)).code == "elsewhere"
    assert await r.smembers("fb:inc:{INC-1}:appr:votes:REQ-1") == set()
    assert (await b.get("INC-1", "REQ-1")).state == "pending"
    # A ballot whose card was never recorded takes no vote at all.
    await b.create(ballot("REQ-2").model_copy(update={"card_channel": None, "card_ts": None}))
    assert (await b.vote("INC-1", "REQ-2", "U_IC", "approve", T0, CARD)).code == "elsewhere"
    assert (await b.vote("INC-1", "REQ-1", "U_IC", "approve", T0, CARD)).code == "approved"
