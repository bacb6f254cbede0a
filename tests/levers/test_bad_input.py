"""Bad input and a misbehaving API server: each gets ONE clear reply saying whether anything changed,
and an audit entry. A target may name its kind kubectl-style; another lever's kind is refused naming
both. A write or an undo answered 5xx or not at all is read back before Firebreak says what happened."""

from __future__ import annotations

import asyncio
import json
import re

import pytest
from aiohttp import web

from bot.clock import hhmm
from fbworld.kube import ApiError
from levers.store import lever_store
from tests.support.harness import audit_entries
from tests.support.levers import MODEL, OPS, SEC, channel_texts, comparable, patches, say
from tests.support.wait import until

CQ = r"/clusterqueues/research-h100$"


@pytest.fixture
def policy_overrides() -> dict:
    return {"api_timeout_seconds": 1, "rollout_verify_seconds": 1}


async def one_reply(app, text: str, user: str, channel: str) -> str:
    """The single reply to one command (the ack aside), after everything it started has finished."""
    key = await app.command(text, user=user, channel=channel)
    out = await app.reply(key, timeout=15)
    await app.drain()
    assert len(app.slack.responses_for(key)) == 1, app.slack.responses_for(key)
    return out


async def refused_entry(app, inc) -> dict:
    entries = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.lever"]
    assert entries, "no audit entry"
    assert entries[-1]["detail"]["result"] == "refused", entries[-1]
    return entries[-1]


def writes(cell) -> list:
    return [r for r in cell.requests if r.method != "GET"]


# The bad-input list, in one incident: (setup, command, the reply's start).
BAD = [
    (
        None,
        "lever node-quarantine pod/sess-7f3a9c-0 --cell us-east-3 reason=xid79",
        "Not pulled, nothing changed: `pod/sess-7f3a9c-0` is a Pod, but this lever acts on a Node: "
        "give the Node as `<name>` (or `node/<name>`).",
    ),
    (
        None,
        "lever jobset-suspend train-llm/deploy/pretrain-405b --cell us-east-3",
        "Not pulled, nothing changed: `train-llm/deploy/pretrain-405b` is a Deployment, but this lever acts on "
        "a JobSet: give the JobSet as `<namespace>/<name>` (or `<namespace>/jobset/<name>`).",
    ),
    (
        None,
        "lever jobset-suspend train-llm/frob/pretrain-405b --cell us-east-3",
        "Not pulled, nothing changed: `frob` is not a kind Firebreak knows; this lever acts on a JobSet: give "
        "the target as `<namespace>/<name>` (or `<namespace>/jobset/<name>`).",
    ),
    (
        None,
        "lever kueue-hold research-h100 --cell us-east-3 colour=red",
        "Not pulled, nothing changed: `colour`: not a parameter of this lever. "
        "Usage: `/incident lever kueue-hold <target> [--cell C]",
    ),
    (
        None,
        "lever kueue-hold research-h100 --cell eu-west-9",
        "Not pulled, nothing changed: no kube context `eu-west-9` for cell eu-west-9 in KUBECONFIG (contexts: ",
    ),
    (
        # Every attempt of the read gets no answer within the policy's 1 s.
        lambda cells: cells.east3.delay_next("GET", r"/nodes/gpu-a3-0001$", seconds=2.5, times=3),
        "lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79",
        "Could not read Node gpu-a3-0001 in us-east-3: Timeout: no answer within 1s; nothing changed.",
    ),
    (
        # The kubeconfig's token expired: refused, and still refused after reloading the credentials.
        lambda cells: cells.east3.set_tokens("the-rotated-token"),
        "lever node-quarantine gpu-a3-0001 --cell us-east-3 reason=xid79",
        "Could not read Node gpu-a3-0001 in us-east-3: 401 Unauthorized: credentials for context `us-east-3` "
        "were refused even after refreshing them",
    ),
]


async def test_each_bad_input_gets_one_clear_reply_and_an_audit_entry(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    for setup, command, expect in BAD:
        if setup is not None:
            setup(cells)
        cells.east3.requests.clear()
        out = await one_reply(app, command, OPS, inc.channel_id)
        assert out.startswith(expect), out
        assert "nothing changed" in out, out
        entry = await refused_entry(app, inc)
        assert entry["detail"]["reason"] == out and entry["detail"]["args"]["target"] in command
        assert not writes(cells.east3) and not writes(cells.east1)
    entries = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.lever"]
    assert len(entries) == len(BAD)


async def test_kubectl_style_targets_of_the_levers_own_kind(app, cells):
    inc = await app.declare(roles={"ops": OPS, "security": SEC})
    for command, user, target in (
        ("lever kueue-hold clusterqueues.kueue.x-k8s.io/research-h100", OPS, "research-h100"),
        ("lever node-quarantine no/gpu-a3-0001 reason=xid79", OPS, "gpu-a3-0001"),
        ("lever sandbox-quarantine sbx-tenant-acme/pod/sess-7f3a9c-0", SEC, "sbx-tenant-acme/sess-7f3a9c-0"),
    ):
        out = await say(app, command + " --cell us-east-3", user, inc.channel_id)
        assert "applied and verified" in out and f" {target} (us-east-3)" in out, out
    recs = [await lever_store(app.services).get(f"REQ-{n}") for n in (1, 2, 3)]
    assert [r.target for r in recs] == ["research-h100", "gpu-a3-0001", "sbx-tenant-acme/sess-7f3a9c-0"]


async def test_a_422s_causes_are_shown(app, cells):
    """Undo after someone changed the field: the API server's 422 says only "the server rejected our
    request"; the cause (which test op failed) is in details.causes, and the reply shows it."""
    inc = await app.declare(roles={"ops": OPS})
    assert "applied" in await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    cq = cells.east3.get("clusterqueue", "research-h100")
    cq["spec"]["stopPolicy"] = "None"  # released by hand meanwhile
    cells.east3.put(cq)
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "undo failed: research-h100 changed since REQ-1 applied (422 Invalid: " in out, out
    assert "testing value /spec/stopPolicy failed: test failed" in out, out
    assert "nothing changed, REQ-1 is still applied" in out, out


def answer_after_storing(cell, method: str, path: str, status: int, reason: str, message: str) -> list[int]:
    """The API server (or a proxy in front of it) stores the next matching write, then answers `status`:
    a 5xx that says nothing about whether the write landed. Returns what the write really got."""
    real = cell._dispatch
    stored: list[int] = []

    def dispatch(request, raw):
        resp = real(request, raw)
        if not stored and request.method == method and re.search(path, request.path):
            stored.append(resp.status)
            body = json.dumps(ApiError(status, message, reason).status())
            return web.Response(text=body, status=status, content_type="application/json")
        return resp

    cell._dispatch = dispatch
    return stored


async def test_a_write_answered_5xx_is_read_back_and_found_applied(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    stored = answer_after_storing(
        cells.east3, "PATCH", CQ, 504, "Timeout", "Timeout: request did not complete within requested timeout"
    )
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert stored == [200]
    assert "applied and verified (stopPolicy=Hold" in out, out
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"
    assert (await lever_store(app.services).get("REQ-1")).state == "done"


async def test_a_write_answered_5xx_that_did_not_land_is_fenced(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    cells.east3.fail_next("PATCH", CQ, 503, reason="ServiceUnavailable", message="etcdserver: leader changed")
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "failed: 503 ServiceUnavailable: etcdserver: leader changed; nothing changed (read back, and fenced" in out
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)


async def test_an_undo_answered_5xx_that_landed_is_undone(app, cells):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    assert "applied" in await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    answer_after_storing(cells.east3, "PATCH", CQ, 502, "BadGateway", "upstream connect error")
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert (
        "undone by" in out
        and "the restore got no answer (502 BadGateway: upstream connect error); read back: it " in out
    )
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)
    assert (await lever_store(app.services).get("REQ-1")).state == "undone"


async def test_an_undo_that_times_out_reads_back_and_leaves_it_to_the_timer(app, cells, clock):
    inc = await app.declare(roles={"ops": OPS})
    original = cells.east3.get("clusterqueue", "research-h100")
    assert "applied" in await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    cells.east3.delay_next("PATCH", CQ, seconds=2.5)  # the restore lands after Firebreak stopped waiting
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    due = clock.now() + app.services.policy.levers.stuck_after_seconds
    assert out == (
        "REQ-1 kueue-hold research-h100 (us-east-3): the undo got no answer from the API server (Timeout: no answer "
        "within 1s) and a read-back does not show the restore (yet); it may still land. REQ-1 stays being undone: "
        f"Firebreak settles it from a read-back of research-h100 at {hhmm(due)} UTC and posts the outcome in the "
        "incident channel."
    ), out
    assert "nothing changed" not in out
    assert (await lever_store(app.services).get("REQ-1")).state == "undoing"
    [entry] = [e for e in await audit_entries(app, inc.id) if e["action"] == "lever.undo_unsettled"]
    assert entry["detail"]["request"] == "REQ-1"

    for _ in range(100):  # the slow restore lands
        if cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "None":
            break
        await asyncio.sleep(0.05)
    clock.advance(app.services.policy.levers.stuck_after_seconds + 1)
    await app.tick()
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.state == "undone", rec
    assert any("REQ-1 kueue-hold research-h100 (us-east-3): undone by" in t for t in channel_texts(app, inc.channel_id))
    assert comparable(cells.east3.get("clusterqueue", "research-h100"), False) == comparable(original, False)


async def test_an_undo_that_never_lands_goes_back_to_applied_via_the_timer(app, cells, clock):
    inc = await app.declare(roles={"model": MODEL, "ops": OPS})
    assert "applied" in await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    cells.east3.delay_next("PATCH", CQ, seconds=2.5)
    cells.east3.fail_next("PATCH", CQ, 500, message="etcd request timed out")  # and then it fails after all
    out = await say(app, "undo REQ-1", OPS, inc.channel_id)
    assert "stays being undone" in out, out
    await until(lambda: [r.status for r in patches(cells.east3)][-1:] == [500], 30, "the delayed PATCH fails")
    clock.advance(app.services.policy.levers.stuck_after_seconds + 1)
    await app.tick()
    rec = await lever_store(app.services).get("REQ-1")
    assert rec.state == "done"
    assert any(
        "interrupted before the restore landed; nothing changed" in t for t in channel_texts(app, inc.channel_id)
    )
    assert cells.east3.get("clusterqueue", "research-h100")["spec"]["stopPolicy"] == "Hold"
