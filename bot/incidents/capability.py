"""The incident capability: everything it adds to the app, in one place."""

from __future__ import annotations

from bot.core.grammar import Spec
from bot.core.hooks import KNOWN_CELLS
from bot.core.intents import INTERRUPTED
from bot.core.registry import Registry
from bot.core.timeline import CommandDetail
from bot.incidents import handlers, handoffs, orphans, scope, timeline
from bot.incidents.commands import (
    Accept,
    Assess,
    Declare,
    Handoff,
    Help,
    Mitigated,
    Resolved,
    Role,
    ScopeAdd,
    Sev,
    Status,
)


def register(reg: Registry) -> None:
    reg.command_anywhere(
        Declare,
        handlers.declare,
        spec=Spec(
            "/incident declare <title> [--sev N] [--cell C]… [--product P] [--region R] [--private]",
            rest="title",
            flags={"sev": "one", "cell": "many", "product": "one", "region": "one", "private": "bool"},
        ),
        summary="open an incident with its own channel; you become IC",
    )
    reg.command(
        Sev,
        handlers.sev,
        spec=Spec("/incident sev <1-4> <reason>", positional=("sev",), rest="reason"),
        summary="raise severity (never lowers while open)",
    )
    reg.command(
        Assess,
        handlers.assess,
        spec=Spec(
            "/incident assess [--users-burn X] [--gpus N] [--quality] [--security]",
            flags={"users-burn": "one", "gpus": "one", "quality": "bool", "security": "bool"},
        ),
        summary="SEV from the four-axis matrix; raises, never lowers",
    )
    reg.command(Status, handlers.status, spec=Spec("/incident status"), summary="SEV, roles, levers, next update")
    reg.command(
        ScopeAdd,
        scope.scope_add,
        spec=Spec("/incident scope add <cell>", positional=("action", "cell")),
        summary="widen the incident to another cell (levers act only on its cells)",
    )
    reg.command(
        Mitigated, handlers.mitigated, spec=Spec("/incident mitigated"), summary="impact stopped; reminders stop"
    )
    reg.command(Resolved, handlers.resolved, spec=Spec("/incident resolved"), summary="close the incident")
    reg.command_anywhere(
        Help, handlers.help_, spec=Spec("/incident help [command]", positional=(), rest="topic"), summary="this list"
    )
    reg.command(
        Role,
        handoffs.role,
        spec=Spec("/incident role <role> <@user>", positional=("role", "user")),
        summary="assign a role (ic ops comms scribe model capacity security); anyone may take an empty IC seat",
        rule=handoffs.role_rule,
    )
    reg.command(
        Handoff,
        handoffs.handoff,
        spec=Spec(
            '/incident handoff <role> <@user> [--threads "a; b"]',
            positional=("role", "user"),
            flags={"threads": "many"},
        ),
        summary="hand a role over; effective when they press Accept",
    )
    reg.command(Accept, handoffs.accept, summary="accept a handoff (button)")
    # The cells policies/oncall.yaml names are cells Firebreak knows (declare --cell, scope add).
    reg.add(KNOWN_CELLS, scope.oncall_cells)
    # A declare interrupted between its channel and its save: finish or archive (orphans.py).
    reg.provide(INTERRUPTED, orphans.declare_interrupted)

    # How its commands read on the postmortem's timeline.
    reg.timeline(Declare, timeline.Declared, timeline.declared)
    reg.timeline(Sev, timeline.SevSet, timeline.sev_set)
    reg.timeline(Assess, timeline.Assessed, timeline.assessed)
    reg.timeline(Role, timeline.RoleSet, timeline.role_set)
    reg.timeline(Handoff, timeline.HandingOff, timeline.handing_off)
    reg.timeline(Accept, timeline.Accepted, timeline.accepted)
    reg.timeline(ScopeAdd, timeline.ScopeWidened, timeline.scope_widened)
    reg.timeline(Mitigated, CommandDetail, timeline.marked("mitigated"))
    reg.timeline(Resolved, CommandDetail, timeline.marked("resolved"))
    reg.timeline(Status, CommandDetail, timeline.no_event)
    reg.timeline(Help, CommandDetail, timeline.no_event)
