"""Which file holds which policy section, and the assembled Policy.

A capability that brings its own rules adds its section's model beside this file and names it here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from bot.policy.approvals import ApprovalsPolicy
from bot.policy.comms import CommsPolicy
from bot.policy.eligible import RolesPolicy
from bot.policy.levers import LeversPolicy
from bot.policy.models import CadencePolicy, CommandsPolicy, SeverityPolicy
from bot.policy.oncall import OncallPolicy
from bot.policy.queries import QueriesPolicy


class Source(BaseModel):
    """Where a section was read from, and the line of each value (keys: the dotted path, "ic.0")."""

    model_config = ConfigDict(frozen=True)

    where: str
    lines: dict[str, int] = Field(default_factory=dict)


class Policy(BaseModel):
    model_config = ConfigDict(frozen=True)

    severity: SeverityPolicy
    commands: CommandsPolicy
    cadence: CadencePolicy
    approvals: ApprovalsPolicy
    comms: CommsPolicy
    levers: LeversPolicy
    oncall: OncallPolicy
    queries: QueriesPolicy
    roles: RolesPolicy = Field(default_factory=RolesPolicy)
    # section -> where it came from, so a check made after loading (roles.yaml's groups against
    # the Slack workspace) can still say file:line.
    sources: dict[str, Source] = Field(default_factory=dict)

    def place(self, section: str, *loc: str | int) -> str:
        """``file:line`` of a value (the closest enclosing line known), or just the file."""
        src = self.sources.get(section)
        if src is None:
            return f"<{section}>"
        for cut in range(len(loc), -1, -1):
            line = src.lines.get(".".join(str(p) for p in loc[:cut]))
            if line is not None:
                return f"{src.where}:{line}"
        return src.where


SECTIONS: dict[str, tuple[str, type[BaseModel]]] = {
    "severity": ("severity.yaml", SeverityPolicy),
    "commands": ("commands.yaml", CommandsPolicy),
    "cadence": ("cadence.yaml", CadencePolicy),
    "approvals": ("approvals.yaml", ApprovalsPolicy),
    "comms": ("comms.yaml", CommsPolicy),
    "levers": ("levers.yaml", LeversPolicy),
    "oncall": ("oncall.yaml", OncallPolicy),
    "queries": ("queries.yaml", QueriesPolicy),
    "roles": ("roles.yaml", RolesPolicy),
}
