"""Modal submissions: bad input is answered on the form (never a 500) and audited."""
from __future__ import annotations

import json

from bot.comms import cards
from tests.conftest import audit_entries
from tests.core.helpers import IC, declare

VALUES = {cards.UPDATE_BLOCK: {cards.UPDATE_INPUT: {"type": "plain_text_input", "value": "Chat API: recovering"}}}


async def test_bad_private_metadata_shows_an_error_on_the_field_and_is_audited(app):
    await declare(app)
    status, body, _ = await app.sender.submit_view(cards.UPDATE_MODAL, user=IC, values=VALUES,
                                                   private_metadata="INC-1; DROP")
    assert status == 200, body
    answer = json.loads(body)
    assert answer["response_action"] == "errors"
    assert list(answer["errors"]) == [cards.UPDATE_BLOCK]
    assert "no longer matches an incident" in answer["errors"][cards.UPDATE_BLOCK]
    e = (await audit_entries(app))[-1]
    assert (e["action"], e["actor"], e["incident"]) == ("modal.invalid", IC, None)
    assert e["detail"]["callback_id"] == cards.UPDATE_MODAL
    assert (await app.services.incidents.get("INC-1")).last_update_text is None


async def test_a_refused_form_records_its_incident(app):
    await declare(app)
    values = {cards.UPDATE_BLOCK: {cards.UPDATE_INPUT: {"type": "plain_text_input", "value": "   "}}}
    status, body, _ = await app.sender.submit_view(cards.UPDATE_MODAL, user=IC, values=values, private_metadata="INC-1")
    assert status == 200 and json.loads(body)["response_action"] == "errors"
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["incident"]) == ("modal.refused", "INC-1")


async def test_an_unknown_form_is_acknowledged_and_audited(app):
    await declare(app)
    status, body, _ = await app.sender.submit_view("nobody.knows", user=IC, values={}, private_metadata="INC-1")
    assert status == 200 and not body.strip()
    e = (await audit_entries(app, "INC-1"))[-1]
    assert (e["action"], e["actor"], e["detail"]) == ("modal.unknown", IC, {"callback_id": "nobody.knows"})
