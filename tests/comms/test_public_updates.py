"""Public updates are product × region: checked before anything is recorded or posted."""

from __future__ import annotations

import pytest

from bot.comms.public import offending
from bot.policy import load_policy
from levers.requests import LeverRequest
from levers.store import lever_store
from tests.support.comms import TITLE
from tests.support.harness import T0, audit_entries

POLICY = load_policy().comms.public


@pytest.mark.stakeholders
async def test_product_region_update_goes_to_incident_and_stakeholder_channels(app, clock):
    inc = await app.declare("latency", sev=1, cells=("us-east-3",), extra='--product "Chat API" --region us-east')
    clock.set(T0 + 120)
    out = await app.run("update Chat API, us-east: elevated latency since 03:10 UTC", channel=inc.channel_id)
    assert "Update posted. Next update due 03:27 UTC" in out and f"<#{app.stakeholders}>" in out
    [public] = app.slack.messages(app.stakeholders)
    assert public["text"] == (
        ":mega: *INC-1* (Chat API · us-east) update at 03:12 UTC: Chat API, us-east: elevated latency since 03:10 UTC"
    )
    assert any("elevated latency" in m["text"] for m in app.slack.messages(inc.channel_id))


@pytest.mark.stakeholders
async def test_cell_and_node_names_are_refused_with_both_words_and_nothing_changes(app, clock):
    inc = await app.declare("gpu hang", sev=2, cells=("us-east-3",), extra='--product "Chat API" --region us-east')
    before = len(app.slack.calls_to("chat.postMessage"))
    clock.set(T0 + 60)
    out = await app.run("update cell us-east-3 node gpu-a3-0142 is down", channel=inc.channel_id)
    assert "`us-east-3`" in out and "`gpu-a3-0142`" in out
    # The suggestion is their own text at public granularity: the cell's region, the node gone.
    assert out.endswith("Try: `/incident update Chat API: us-east is down`"), out
    assert len(app.slack.calls_to("chat.postMessage")) == before
    after = await app.incident(inc.id)
    assert after.last_update_text is None and after.next_update_due == inc.next_update_due
    [entry] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.update"]
    assert entry["detail"]["result"] == "refused"
    assert entry["detail"]["offending"] == ["us-east-3", "gpu-a3-0142"]


async def test_the_incidents_own_cells_are_refused_even_if_policy_would_not_match(app, clock):
    inc = await app.declare("odd cell", sev=2, cells=("blue7",))
    out = await app.run("update Chat API: blue7 is degraded", channel=inc.channel_id)
    assert "`blue7`" in out and "Not posted" in out


async def test_without_a_stakeholder_channel_the_reply_says_so(app):
    inc = await app.declare(TITLE, sev=2, cells=())
    out = await app.run("update Chat API, us-east: investigating", channel=inc.channel_id)
    assert "incident channel only" in out and "FIREBREAK_STAKEHOLDER_CHANNEL" in out


async def test_an_update_the_channel_refused_is_recorded_and_says_it_was_not_posted(app, clock):
    inc = await app.declare("latency", sev=2)
    app.slack.fail_next("chat.postMessage", "is_archived")
    clock.set(T0 + 60)
    out = await app.run("update Chat API: elevated latency", channel=inc.channel_id)
    assert out == (
        "Update recorded. Next update due 03:41 UTC. (could not post in the incident channel: is_archived) "
        "No stakeholder channel either: FIREBREAK_STAKEHOLDER_CHANNEL is not set."
    ), out
    assert (await app.incident(inc.id)).last_update_text == "Chat API: elevated latency"


async def test_update_needs_comms_or_ic(app):
    inc = await app.declare(TITLE, sev=2, cells=())
    out = await app.run("update Chat API, us-east: investigating", user="UNOBODY", channel=inc.channel_id)
    assert "Only" in out


@pytest.mark.parametrize(
    "text",
    [
        "Chat API, us-east: elevated latency since 03:10 UTC",
        "Chat API (us-east, eu-west): errors back to normal at 04:02 UTC",
        "Image generation in EU: degraded; next update 04:30",
        "Training jobs: queued work is delayed ~20 min",
    ],
)
def test_public_texts_pass(text):
    assert offending(text, POLICY, ["us-east-3"]) == []


@pytest.mark.parametrize(
    "text,words",
    [
        ("cell us-east-3 node gpu-a3-0142 is down", ["us-east-3", "gpu-a3-0142"]),
        ("draining cell-us-east-3 now", ["cell-us-east-3"]),
        ("node ip-10-0-3-17 is NotReady", ["ip-10-0-3-17"]),
        ("gke-prod-pool-a-1b2c3d4e rebooted", ["gke-prod-pool-a-1b2c3d4e"]),
        ("US-EAST-3 is fine now", ["US-EAST-3"]),  # the incident's own cells, any case
    ],
)
def test_private_words_are_named(text, words):
    assert offending(text, POLICY, ["us-east-3"]) == words


async def test_policy_patterns_ignore_case_and_both_words_are_named(app, clock):
    inc = await app.declare("gpu hang", sev=2, cells=())  # no cells: only the policy patterns can catch these
    out = await app.run("update cell US-EAST-3 node GPU-A3-0142 is down", channel=inc.channel_id)
    assert out.startswith("Not posted") and "`US-EAST-3`, `GPU-A3-0142`" in out, out
    assert out.endswith("Try: `/incident update us-east is down`"), out
    assert (await app.incident(inc.id)).last_update_text is None


async def test_a_node_quarantined_in_this_incident_is_refused_even_without_a_pattern(app, clock):
    inc = await app.declare("xid storm", sev=2, cells=("us-east-3",), extra="--product Training")
    assert "Update posted" in await app.run("update Training: node a3-weird-7 drained", channel=inc.channel_id)
    await lever_store(app.services).create(
        LeverRequest(
            id="REQ-1",
            incident=inc.id,
            lever="node-quarantine",
            target="a3-weird-7",
            cell="us-east-3",
            context="us-east-3",
            requester="U_IC",
            state="done",
            created_at=T0,
        )
    )
    out = await app.run("update Training: node a3-weird-7 drained, jobs resuming", channel=inc.channel_id)
    assert out.startswith("Not posted") and "`a3-weird-7`" in out, out
    assert out.endswith("Try: `/incident update Training: drained, jobs resuming`"), out
    # Another incident's quarantines are not this incident's business.
    other = await app.declare("other", sev=2, cells=(), extra="--product Chat")
    assert "Update posted" in await app.run("update Chat: a3-weird-7 mentioned", channel=other.channel_id)
