"""Whose Slack team a request's user is in, against the app's own (docs/security-model.md, "Who may
do what": seats are bound to identity, and an identity is a user of this workspace).

Slack Connect puts people of other organisations in shared channels, where they can type
`/incident` and press Firebreak's buttons; a user id alone does not say whose they are. Slack
does: a command's ``team_id`` (and ``enterprise_id``), a button's or a form's ``user.team_id``
(else ``team.id``) and ``enterprise.id``. The app's own team and enterprise are what auth.test
says of its token (Bolt's authorize result, read once per process). A user whose team is neither
the app's team nor in the app's Enterprise Grid org, or whose team Slack did not name, is "of
another team": the one policy check (bot/core/authz.py) gives them no seat.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slack_bolt.authorization import AuthorizeResult

from bot.slack.shapes import Kind

UNNAMED = "unnamed"  # what the audit says when Slack named no team: nobody unnamed holds a seat


def _id(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _field(obj: object, key: str) -> str | None:
    return _id(obj.get(key)) if isinstance(obj, Mapping) else None


def user_team(kind: Kind, body: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """(team id, enterprise id) of the request's user, as Slack sent them."""
    if kind is Kind.command:
        return _id(body.get("team_id")), _id(body.get("enterprise_id"))
    team = _field(body.get("user"), "team_id") or _field(body.get("team"), "id")
    return team, _field(body.get("enterprise"), "id")


def other_team(kind: Kind, body: Mapping[str, Any], own: AuthorizeResult | None) -> str | None:
    """None when the user is of the app's own team or Enterprise Grid org; else their team id
    (``UNNAMED`` when Slack named none, or when the app's own team is unknown: fail closed)."""
    team, enterprise = user_team(kind, body)
    own_team = _id(own.team_id) if own is not None else None
    own_enterprise = _id(own.enterprise_id) if own is not None else None
    if own_team is not None and team == own_team:
        return None
    if own_enterprise is not None and enterprise == own_enterprise:
        return None
    return team or UNNAMED
