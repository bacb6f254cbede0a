"""The on-call policy section (policies/oncall.yaml): who is IC of an incident an alert opens.

A cell's on-call is a Slack user id; a cell not listed gets ``default``. Nobody (no entry and
no default, or an entry set to null) leaves the IC seat empty: anyone IC-eligible
(policies/roles.yaml) may take it with `/incident role ic <@self>`.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

from bot.ids import CELL_NAME
from bot.policy.models import Strict

# A Slack user id as the Web API gives it (U…, or W… on Enterprise Grid).
SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,20}$")


def _user(v: str) -> str:
    if not SLACK_USER.fullmatch(v):
        raise ValueError(f"{v!r} is not a Slack user id (like U0123ABCD; a name or @mention will not do)")
    return v


def _cell(v: str) -> str:
    if not CELL_NAME.fullmatch(v):
        raise ValueError(f"{v!r} is not a cell name (lowercase letters, digits, dashes: us-east-3)")
    return v


UserId = Annotated[str, AfterValidator(_user)]
Cell = Annotated[str, AfterValidator(_cell)]


class OncallPolicy(Strict):
    default: UserId | None = None
    cells: dict[Cell, UserId | None] = Field(default_factory=dict)

    def ic_for(self, cell: str) -> str | None:
        """The on-call for ``cell``: its own entry (null: nobody), else ``default``."""
        if cell in self.cells:
            return self.cells[cell]
        return self.default
