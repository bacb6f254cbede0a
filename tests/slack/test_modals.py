"""Modal submissions: bad input is answered on the form (never a 500) and audited."""

from __future__ import annotations

import json

import pytest

from tests.support.core import BOB, IC, TITLE
from tests.support.harness import MODES, audit_entries

pytestmark = pytest.mark.parametrize("mode", MODES)  # over HTTP and over Socket Mode

# The update form on the wire (bot/slack/forms.py), spelled out: open forms already carry these.
UPDATE_MODAL, UPDATE_BLOCK, UPDATE_INPUT = "cadence.update", "update", "text"
VALUES = {UPDATE_BLOCK: {UPDATE_INPUT: {"type": "plain_text_input", "value": "Chat API: recovering"}}}


async def test_bad_private_metadata_shows_an_error_on_the_field_and_is_audited(app):
    await app.declare(TITLE, sev=3, user=IC)
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user=IC, values=VALUES, private_metadata="INC-1; DROP")
    assert status == 200, body
    answer = json.loads(body)
    assert answer["response_action"] == "errors"
    assert list(answer["errors"]) == [UPDATE_BLOCK]
    assert "no longer matches an incident" in answer["errors"][UPDATE_BLOCK]
    e = (await audit_entries(app))[-1]
    assert (e["action"], e["actor"], e["incident"]) == ("modal.invalid", IC, None)
    assert e["detail"]["callback_id"] == UPDATE_MODAL
    assert (await app.incident("INC-1")).last_update_text is None


async def test_a_refused_form_records_its_incident(app):
    await app.declare(TITLE, sev=3, user=IC)
    values = {UPDATE_BLOCK: {UPDATE_INPUT: {"type": "plain_text_input", "value": "   "}}}
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user=IC, values=values, private_metadata="INC-1")
    assert status == 200 and json.loads(body)["response_action"] == "errors"
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["incident"]) == ("modal.refused", "INC-1")


async def test_an_unknown_form_gets_bolts_404_and_is_audited(app, mode):
    await app.declare(TITLE, sev=3, user=IC)
    status, body, _ = await app.sender.submit_view("nobody.knows", user=IC, values={}, private_metadata="INC-1")
    # Bolt routes forms by callback id: none has this one. Over Socket Mode the refusal is acked.
    assert status == (404 if mode == "http" else 200) and "Traceback" not in body
    await app.drain()  # the audit entry is after-ack work
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["actor"], e["detail"]) == ("modal.unknown", IC, {"callback_id": "nobody.knows"})


async def test_a_policy_refusal_is_shown_on_the_form_to_someone_outside_the_channel(app):
    """Bob holds no role and is not in the incident channel: an ephemeral there could not reach
    him, so the refusal is on the form, and nothing runs."""
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    assert BOB not in app.slack.channel(ch).members
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user=BOB, values=VALUES, private_metadata="INC-1")
    assert status == 200, body
    answer = json.loads(body)
    assert answer["response_action"] == "errors" and list(answer["errors"]) == [UPDATE_BLOCK]
    assert answer["errors"][UPDATE_BLOCK].startswith("Only the Comms lead or the IC can run `update` in INC-1"), answer
    await app.drain()
    assert app.slack.calls_to("chat.postEphemeral") == [] and app.slack.messages("D" + BOB) == []
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["actor"], e["detail"]["reason"]) == ("modal.refused", BOB, answer["errors"][UPDATE_BLOCK])
    assert (await app.incident("INC-1")).last_update_text is None


async def test_a_form_for_an_incident_that_does_not_exist_is_refused_on_the_form(app):
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user=IC, values=VALUES, private_metadata="INC-99")
    assert status == 200, body
    assert "no longer matches an incident" in json.loads(body)["errors"][UPDATE_BLOCK]
    e = (await audit_entries(app))[-1]
    assert (e["action"], e["actor"]) == ("modal.invalid", IC)


async def test_the_outcome_reaches_a_submitter_who_left_the_channel_as_a_direct_message(app):
    ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
    app.slack.channel(ch).members.remove(IC)  # the IC left the channel; the role is still theirs
    status, body, _ = await app.sender.submit_view(UPDATE_MODAL, user=IC, values=VALUES, private_metadata="INC-1")
    assert (status, body) == (200, "")
    await app.slack.wait_for(lambda c: c.method == "chat.postMessage" and c.args.get("channel") == IC)
    [dm] = app.slack.messages("D" + IC)
    assert dm["text"].startswith("Update posted"), dm
    assert app.slack.ephemerals(ch, IC) == []
    assert (await app.incident("INC-1")).last_update_text == "Chat API: recovering"
