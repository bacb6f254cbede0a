"""The triage capability: everything it adds to the app, in one place."""

from __future__ import annotations

from bot.core.grammar import Spec
from bot.core.registry import Registry
from bot.core.timeline import CommandDetail
from bot.triage import changed, snapshot, timeline
from bot.triage.commands import Changed, Triage


def register(reg: Registry) -> None:
    """`/incident triage` and `/incident changed`."""
    reg.command(
        Triage,
        snapshot.triage,
        spec=Spec("/incident triage"),
        summary="Prometheus snapshot: one table, a row per query, a column per cell",
        ack=snapshot.ack,
    )
    reg.command(
        Changed,
        changed.changed,
        spec=Spec("/incident changed [--hours H]", flags={"hours": "one"}),
        summary="what changed per cell: rollouts, nodes, Warning events, levers, demand (default 6h)",
        ack=changed.ack,
    )
    reg.timeline(Triage, CommandDetail, timeline.triaged)
    reg.timeline(Changed, CommandDetail, timeline.asked_changed)
