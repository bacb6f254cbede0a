"""The levers capability: everything it adds to the app, in one place.

Command order is help's order: `levers`, then `lever` and `undo` (the system
command `lever_settle` is not typed, so not listed).
"""

from __future__ import annotations

from bot.core.grammar import Spec
from bot.core.hooks import KNOWN_CELLS, ON_RESOLVE, READINESS, STATUS_LINE
from bot.core.registry import Registry
from bot.core.timeline import CommandDetail
from levers import authz, listing, pull, recheck, reconcile, resolve, scope, selftest, timeline, undo
from levers.commands import LeverSettle, ListLevers, PullLever, Undo


def register(reg: Registry) -> None:
    reg.command(
        ListLevers,
        listing.list_levers,
        spec=Spec("/incident levers"),
        summary="the levers you may pull here, and which need approval",
    )
    reg.command(
        LeverSettle, reconcile.settle, summary="settle a request a dead process left executing or undoing (restart)"
    )
    reg.command_decided(
        PullLever,
        pull.pull,
        spec=Spec(
            "/incident lever <name> <target> [--cell C] [key=value]… [--dry-run]",
            positional=("lever", "target"),
            flags={"cell": "one", "dry-run": "bool"},
            pairs=True,
        ),
        summary="pull a lever (see `/incident levers`); --dry-run shows the exact API call",
        rule=authz.lever_rule,
        ack=pull.ack,
    )
    reg.command_decided(
        Undo,
        undo.undo,
        spec=Spec("/incident undo <REQ-n>", positional=("request",)),
        summary="restore what a lever changed, exactly (no approval needed)",
        rule=authz.undo_rule,
    )
    reg.job(reconcile.JOB, reconcile.settle_due)
    reg.job(recheck.JOB, recheck.due)  # a verdict read again when the controller's window ends
    reg.on_start(reconcile.reconcile_in_flight)
    # Each cell's admission policies still refuse a forbidden dry run as Firebreak (/readyz says so).
    reg.on_start(selftest.at_start)
    reg.provide(READINESS, selftest.readiness)
    reg.add(STATUS_LINE, listing.open_levers)
    reg.add(KNOWN_CELLS, scope.known_cells)
    reg.provide(ON_RESOLVE, resolve.on_resolve)

    # How its commands and the lever.* events read on the postmortem's timeline.
    reg.timeline(PullLever, timeline.Pulled, timeline.pulled)
    reg.timeline(Undo, CommandDetail, timeline.no_event)  # lever.undo says what it did
    reg.timeline(ListLevers, CommandDetail, timeline.no_event)  # a read
    reg.timeline(LeverSettle, CommandDetail, timeline.no_event)  # the lever.* entry it writes says it
    for event, render in timeline.EVENTS.items():
        reg.timeline(event.action, timeline.LeverEntry, render)
    reg.timeline(timeline.APPLY.action, timeline.ApplyEntry, timeline.kept)
    reg.timeline(recheck.ACTION, timeline.LeverEntry, recheck.line)
