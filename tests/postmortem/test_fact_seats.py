"""Issue 35 item 12: the postmortem's facts are the IC's and the scribe's (docs/commands.md), not anyone's.
`cause trigger|root|detection` and `postmortem impact|rework|impact-figures` from anyone else are
refused, nothing stored; the scribe (whoever the IC seats) and the IC may set them, before and
after the incident is resolved. The document itself (`postmortem`) stays anyone's to read."""

from __future__ import annotations

import pytest

from bot.postmortem.store import store
from tests.support.harness import audit_entries
from tests.support.workspace import OUTSIDER

FACTS = [
    "cause root class: driver 550 hangs under NCCL all-reduce",
    "cause trigger a node-image rollout",
    "cause detection the XID alert pages only above 5 nodes",
    "postmortem impact 2026-11-30T02:40Z loss flat from 02:40 (grafana)",
    "postmortem rework 3",
    "postmortem impact-figures requests=1200",
]


@pytest.mark.parametrize("text", FACTS)
async def test_someone_outside_the_ic_and_scribe_seats_cannot_write_the_postmortems_facts(app, text):
    inc = await app.declare("GPU hang", sev=2)
    out = await app.run(text, user=OUTSIDER, channel=inc.channel_id)
    assert out.startswith("Only the IC or the Scribe can"), out
    assert "<@U_IC>" in out, out  # who to ask
    assert await store(app.services).raw_facts(inc.id) == {}
    [entry] = [e for e in await audit_entries(app, inc.id) if e["actor"] == OUTSIDER]
    assert entry["detail"]["result"] == "refused"


@pytest.mark.parametrize("text", FACTS)
async def test_the_scribe_and_the_ic_write_them_also_after_resolve(app, text):
    inc = await app.declare("GPU hang", sev=2)
    assert "is now" in await app.run(f"role scribe <@{OUTSIDER}>", channel=inc.channel_id)
    out = await app.run(text, user=OUTSIDER, channel=inc.channel_id)
    assert "Only" not in out, out
    assert await store(app.services).raw_facts(inc.id) != {}
    assert "resolved" in await app.run("resolved", channel=inc.channel_id)
    out = await app.run(text, user="U_IC", channel=inc.channel_id)
    assert "Only" not in out, out


async def test_the_document_stays_anyones_to_read(app):
    inc = await app.declare("GPU hang", sev=2)
    out = await app.run("postmortem", user=OUTSIDER, channel=inc.channel_id)
    assert "Only" not in out, out
