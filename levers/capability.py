"""The levers capability: everything it adds to the app, in one place.

Command order is help's order: `levers`, then `lever` and `undo` (the system
command `lever_settle` is not typed, so not listed).
"""

from __future__ import annotations

from bot.core.grammar import Spec
from bot.core.hooks import STATUS_LINE
from bot.core.registry import Registry
from levers import authz, listing, pull, reconcile, undo
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
    reg.command(
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
    reg.command(
        Undo,
        undo.undo,
        spec=Spec("/incident undo <REQ-n>", positional=("request",)),
        summary="restore what a lever changed, exactly (no approval needed)",
        rule=authz.undo_rule,
    )
    reg.job(reconcile.JOB, reconcile.settle_due)
    reg.on_start(reconcile.reconcile_in_flight)
    reg.add(STATUS_LINE, listing.open_levers)
