"""Role gating, break-glass grants, approval needs, `levers`, `status`, and exactly-once execution."""

from __future__ import annotations

import asyncio

import pytest

from levers import hooks
from levers.executor import execute_approved
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import NOBODY, OPS, SEC, patches, replace_hook, say


async def test_without_the_role_nothing_reaches_the_api(app, cells):
    inc = await app.declare(roles={"ops": OPS, "security": SEC})
    for user, text in [
        ("U_IC", "lever kueue-hold research-h100 --cell us-east-3"),  # the IC pulls no levers by default
        (SEC, "lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79"),
        (OPS, "lever killswitch toolgw/toolgw-flags tenant=acme"),
        (NOBODY, "lever jobset-suspend train-llm/pretrain-405b --dry-run"),
    ]:
        out = await say(app, text, user, inc.channel_id)
        assert out.startswith("Not pulled, nothing changed: Only the ") and "can pull" in out, out
        # The IC may seat themselves (docs/security-model.md); everyone else is pointed at the IC or break-glass.
        nxt = (
            "You're the IC: give yourself the role with `/incident role ops <@U_IC>`"
            if user == "U_IC"
            else "Ask the IC (<@U_IC>) for the role, or request break-glass"
        )
        assert nxt in out, out
    assert cells.east3.requests == [] and cells.east1.requests == [] and cells.fleet.requests == []
    denied = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.lever"]
    assert len(denied) == 4 and all(e["detail"]["result"] == "refused" for e in denied)
    assert await app.services.redis.get("fb:{seq}:request") is None  # no REQ was even numbered


async def test_undo_needs_the_lever_role(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever jobset-suspend train-llm/pretrain-405b", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    writes = len(patches(cells.east3))
    out = await say(app, "undo REQ-1", SEC, inc.channel_id)
    assert out.startswith("Not undone, nothing changed: Only the Ops lead can undo `jobset-suspend`"), out
    assert len(patches(cells.east3)) == writes
    assert (await lever_store(app.services).get("REQ-1")).state == "done"


async def test_grant_provider_lets_a_user_pull_and_is_told(app, cells):
    inc = await app.declare()
    used = []

    async def grants(svc, inc_, user, lever, cell):
        return "BG-1" if (user, lever, cell) == (NOBODY, "kueue-hold", "us-east-3") else None

    async def on_use(svc, inc_, rec, grant, outcome=None):
        used.append((rec.id, grant))

    async def active(svc, inc_, grant, user, lever, cell):  # asked again just before it runs
        return await grants(svc, inc_, user, lever, cell) == grant

    replace_hook(app, hooks.GRANT_PROVIDER, grants)
    replace_hook(app, hooks.GRANT_ACTIVE, active)
    replace_hook(app, hooks.GRANT_USED, on_use)
    out = await say(app, "lever kueue-hold research-h100", NOBODY, inc.channel_id)  # the incident's only cell
    assert "applied and verified" in out, out
    assert used == [("REQ-1", "BG-1")]
    assert (await lever_store(app.services).get("REQ-1")).grant_id == "BG-1"
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-1", NOBODY, inc.channel_id)
    assert out.startswith("Not pulled, nothing changed: Only the Ops lead"), out  # the grant covers us-east-3 only
    assert cells.east1.requests == []


async def test_a_dry_run_says_it_would_need_approval(app, cells):
    # (The "no approval flow installed" refusal is gone: bot/runtime.py always registers the approvals.)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold-drain research-h100 --cell us-east-3 --dry-run", OPS, inc.channel_id)
    assert "Would need approval" in out and "HoldAndDrain" in out, out
    assert not patches(cells.east3)


async def test_levers_lists_what_the_caller_may_pull(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    out = await app.run("levers", user=OPS, channel=inc.channel_id)
    assert "*Levers you can pull in INC-1* (your roles: ops)" in out
    for name in ("kueue-hold", "kueue-hold-drain", "keda-pause", "route-weight", "node-quarantine", "jobset-suspend"):
        assert f"`{name}`" in out
    assert "needs approval (HoldAndDrain" in out and "fleet context `global`" in out
    assert "rollout-abort (model)" in out and "killswitch (security)" in out
    out = await app.run("levers", user="U_IC", channel=inc.channel_id)
    assert out.startswith("You can't pull any lever in INC-1 yet (your roles: ic)"), out


async def test_status_lists_open_levers(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    await say(app, "lever kueue-hold research-h100", OPS, inc.channel_id)
    await say(app, "lever jobset-suspend train-llm/pretrain-405b --dry-run", OPS, inc.channel_id)
    out = await app.run("status", user=OPS, channel=inc.channel_id)
    assert "Open levers: REQ-1 kueue-hold research-h100 (us-east-3) applied (undo: /incident undo REQ-1)" in out, out
    assert "REQ-2" not in out  # dry-runs are not open levers
    await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "Open levers" not in await app.run("status", user=OPS, channel=inc.channel_id)


async def test_approved_request_runs_exactly_once(app, cells):
    asked = []

    async def ask(svc, inc_, rec):
        asked.append(rec)

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(roles={"ops": OPS})
    out = await say(app, "lever kueue-hold-drain research-h100", OPS, inc.channel_id)
    assert out.startswith("REQ-1 kueue-hold-drain research-h100 (us-east-3) needs approval"), out
    assert [r.id for r in asked] == ["REQ-1"] and asked[0].state == "pending_approval"
    assert not patches(cells.east3)
    # Not approved yet: the executor refuses to run it.
    res = await execute_approved(app.services, "REQ-1", "U_IC")
    assert not res.ok and res.state == "pending_approval"
    assert await lever_store(app.services).transition("REQ-1", {"pending_approval"}, "approved", approved_by="U_IC")
    results = await asyncio.gather(*[execute_approved(app.services, "REQ-1", "U_IC") for _ in range(5)])
    assert sum(r.ok for r in results) == 1
    assert len(patches(cells.east3)) == 1
    assert [r.state for r in results if not r.ok] == ["executing"] * 4 or all(
        r.state in ("executing", "done") for r in results if not r.ok
    )
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "HoldAndDrain"


async def test_target_changed_after_approval_goes_stale(app, cells):
    async def ask(svc, inc_, rec):
        return None

    replace_hook(app, hooks.APPROVAL_REQUESTED, ask)
    inc = await app.declare(roles={"ops": OPS})
    await say(app, "lever kueue-hold-drain research-h100", OPS, inc.channel_id)
    cq = cells.east3.get("clusterqueue", "research-h100")
    cq["spec"]["stopPolicy"] = "Hold"  # someone held it by hand meanwhile
    cells.east3.put(cq)
    await lever_store(app.services).transition("REQ-1", {"pending_approval"}, "approved", approved_by="U_IC")
    res = await execute_approved(app.services, "REQ-1", "U_IC")
    assert res.state == "stale" and "changed since it was planned and approved" in res.message
    assert "fresh plan and approval" in res.message
    assert not patches(cells.east3)
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"


@pytest.mark.parametrize(
    "bad", ["killswitch toolgw/toolgw-flags tenant=acme level=money", "killswitch toolgw/other-flags tenant=acme"]
)
async def test_killswitch_only_narrows(bad, app, cells):
    inc = await app.declare(roles={"security": SEC})
    out = await say(app, f"lever {bad} --cell us-east-3", SEC, inc.channel_id)
    assert "only narrows" in out or "acts on the ConfigMap toolgw/toolgw-flags (policy)" in out, out
    assert not patches(cells.east3)


async def test_access_is_decided_once_per_request(app, cells):
    """The route rule decides (role or grant); the handler reuses its answer instead of asking again."""
    inc = await app.declare()
    asked = []

    async def grants(svc, inc_, user, lever, cell):
        asked.append((user, lever, cell))
        return "BG-1"

    async def active(svc, inc_, grant, user, lever, cell):
        return True

    async def on_use(svc, inc_, rec, grant, outcome=None):
        return None

    replace_hook(app, hooks.GRANT_PROVIDER, grants)
    replace_hook(app, hooks.GRANT_ACTIVE, active)
    replace_hook(app, hooks.GRANT_USED, on_use)
    assert "applied and verified" in await say(app, "lever kueue-hold research-h100", NOBODY, inc.channel_id)
    assert asked == [(NOBODY, "kueue-hold", "us-east-3")]
    assert (await lever_store(app.services).get("REQ-1")).grant_id == "BG-1"
    assert "undone" in await say(app, "undo REQ-1", NOBODY, inc.channel_id)
    assert len(asked) == 2
