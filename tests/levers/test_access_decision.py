"""The lever rule's decision (which grant, if any, allowed a pull) is a value handed to its handler:
another request's policy check in between cannot stand in for it, and a handler never runs without it."""

from __future__ import annotations

import pytest

from bot.core import authz as core_authz
from bot.core.registry import Allowed
from bot.core.request import Request, Source
from levers import hooks
from levers.authz import Cleared
from levers.commands import PullLever
from levers.store import lever_store
from tests.support.levers import NOBODY, OPS, replace_hook


async def _grant_for_nobody(app) -> None:
    async def grants(svc_, inc_, user, lever, cell):
        return "BG-1" if user == NOBODY else None

    async def active(svc_, inc_, grant, user, lever, cell):
        return grant == "BG-1"

    async def on_use(svc_, inc_, rec, grant, outcome=None):
        return None

    replace_hook(app, hooks.GRANT_PROVIDER, grants)
    replace_hook(app, hooks.GRANT_ACTIVE, active)
    replace_hook(app, hooks.GRANT_USED, on_use)


def _pull(inc, actor: str) -> Request:
    cmd = PullLever(lever="kueue-hold", target="research-h100")
    return Request(command=cmd, actor=actor, source=Source.slash, channel_id=inc.channel_id, incident_id=inc.id)


async def test_a_pull_runs_under_the_grant_its_own_check_found(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    svc = app.services
    route = svc.registry.routes["lever"]
    await _grant_for_nobody(app)
    by_grant, by_role = _pull(inc, NOBODY), _pull(inc, OPS)
    # Both checked first (two requests' checks one after the other in one context), then both run:
    # with the decision kept in a ContextVar the second check replaced the first's, and the first
    # pull failed for want of it.
    first = await core_authz.decide(svc, by_grant, route, inc)
    second = await core_authz.decide(svc, by_role, route, inc)
    assert first == Allowed(Cleared("BG-1")) and second == Allowed(Cleared(None))
    for req, decision in [(by_grant, first), (by_role, second)]:
        out = await route.call(svc, req, inc, decision)
        assert "applied and verified" in out.message, out
    store = lever_store(svc)
    got = [await store.get("REQ-1"), await store.get("REQ-2")]
    assert [(r.requester, r.grant_id) for r in got] == [(NOBODY, "BG-1"), (OPS, None)]


async def test_a_handler_without_its_decision_does_not_run(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    route = app.services.registry.routes["lever"]
    with pytest.raises(RuntimeError, match="without its rule's decision"):
        await route.call(app.services, _pull(inc, OPS), inc, None)
    assert await lever_store(app.services).get("REQ-1") is None and cells.east3.requests == []
