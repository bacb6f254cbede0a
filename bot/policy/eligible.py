"""The roles policy section (policies/roles.yaml): who may hold each seat
(docs/security-model.md, "Eligibility").

An entry is a Slack user group by handle (``"@ml-oncall"``, quoted: YAML gives ``@`` a meaning)
or by id (``S0123ABCD``), a user id (``U0123ABCD``), ``oncall`` (whoever policies/oncall.yaml
names for the incident's cells, ``default`` when it has none) or ``anyone`` (alone). Group
membership is Slack's: bot/core/eligibility.py reads it.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, field_validator

from bot.policy.models import Strict

ANYONE = "anyone"
ONCALL = "oncall"
# Slack's user group handles: lowercase letters, digits, dots, dashes and underscores.
_HANDLE = re.compile(r"^@[a-z0-9][a-z0-9._-]{0,79}$")
_GROUP_ID = re.compile(r"^S[A-Z0-9]{2,20}$")
_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,20}$")

Kind = Literal["anyone", "oncall", "handle", "group", "user"]


def kind(entry: str) -> Kind:
    """What an (already validated) entry is."""
    if entry == ANYONE:
        return "anyone"
    if entry == ONCALL:
        return "oncall"
    if entry.startswith("@"):
        return "handle"
    return "group" if entry.startswith("S") else "user"


def is_group(entry: str) -> bool:
    return kind(entry) in ("handle", "group")


def _entry(v: str) -> str:
    if v in (ANYONE, ONCALL) or _HANDLE.fullmatch(v) or _GROUP_ID.fullmatch(v) or _USER_ID.fullmatch(v):
        return v
    bare = _HANDLE.fullmatch("@" + v.lower())
    hint = f'; a user group is written with its @ and quoted: "@{v.lower()}"' if bare else ""
    raise ValueError(
        f'{v!r} is not a seat entry: a user group handle ("@ml-oncall"), a group id (S0123ABCD), '
        f"a user id (U0123ABCD), oncall or anyone{hint}"
    )


Entry = Annotated[str, AfterValidator(_entry)]


def _seat(v: list[str]) -> list[str]:
    if ANYONE in v and len(v) > 1:
        raise ValueError("`anyone` stands alone: with it, the other entries mean nothing")
    if len(set(v)) != len(v):
        raise ValueError("an entry is listed twice")
    return v


def _default(*entries: str) -> list[str]:
    return list(entries)


class RolesPolicy(Strict):
    """Who is eligible for each seat. A seat not in the file keeps its packaged default (below)."""

    ic: list[Entry] = Field(default_factory=lambda: _default("@ml-ic", ONCALL), min_length=1)
    ops: list[Entry] = Field(default_factory=lambda: _default("@ml-oncall"), min_length=1)
    comms: list[Entry] = Field(default_factory=lambda: _default(ANYONE), min_length=1)
    scribe: list[Entry] = Field(default_factory=lambda: _default(ANYONE), min_length=1)
    model: list[Entry] = Field(default_factory=lambda: _default("@ml-model-owners"), min_length=1)
    capacity: list[Entry] = Field(default_factory=lambda: _default("@ml-capacity"), min_length=1)
    security: list[Entry] = Field(default_factory=lambda: _default("@ml-security"), min_length=1)
    # Not a role anyone holds: who may speak to the stakeholder channel as Firebreak (`update`).
    publish: list[Entry] = Field(default_factory=lambda: _default("@ml-ic", "@ml-comms", ONCALL), min_length=1)

    _v = field_validator("ic", "ops", "comms", "scribe", "model", "capacity", "security", "publish")(
        lambda cls, v: _seat(v)
    )

    def of(self, seat: str) -> list[str]:
        """The entries for ``seat`` (a role of bot.policy.roles.ROLES, or ``publish``)."""
        got: list[str] = getattr(self, seat)
        return got

    def groups(self) -> list[tuple[str, int, str]]:
        """Every group entry: (seat, its index in the seat's list, the entry)."""
        return [(seat, i, e) for seat in type(self).model_fields for i, e in enumerate(self.of(seat)) if is_group(e)]
