"""Which file holds which policy section, and the assembled Policy.

A capability that brings its own rules adds its section's model beside this file and names it here.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from bot.policy.approvals import ApprovalsPolicy
from bot.policy.comms import CommsPolicy
from bot.policy.levers import LeversPolicy
from bot.policy.models import CadencePolicy, CommandsPolicy, SeverityPolicy
from bot.policy.oncall import OncallPolicy
from bot.policy.queries import QueriesPolicy


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


SECTIONS: dict[str, tuple[str, type[BaseModel]]] = {
    "severity": ("severity.yaml", SeverityPolicy),
    "commands": ("commands.yaml", CommandsPolicy),
    "cadence": ("cadence.yaml", CadencePolicy),
    "approvals": ("approvals.yaml", ApprovalsPolicy),
    "comms": ("comms.yaml", CommsPolicy),
    "levers": ("levers.yaml", LeversPolicy),
    "oncall": ("oncall.yaml", OncallPolicy),
    "queries": ("queries.yaml", QueriesPolicy),
}
