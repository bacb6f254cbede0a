"""How the lever commands and the `lever.<event>` audit actions read on the postmortem's timeline
(registered in capability.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from bot.core.timeline import CommandDetail, Detail, code
from levers.price import Price
from levers.requests import LeverEvent


class PullArgs(Detail):
    lever: str = ""
    target: str = ""
    cell: str | None = None
    dry_run: bool = False


class Pulled(CommandDetail):
    args: PullArgs = PullArgs()
    state: str | None = None  # a LeverState, or absent while the request waits for approval


def pulled(d: Pulled, by: str) -> str | None:
    a = d.args
    if a.dry_run:
        return None  # nothing changed
    cell = f" --cell {code(a.cell)}" if a.cell else ""
    state = f" ({code(d.state)})" if d.state else " (waiting for approval)"
    return f"{by} pulled `{code(a.lever)}` {code(a.target)}{cell}{state}"


class LeverEntry(Detail):
    """What names the request in every `lever.*` entry (LeverRequest.ids), and its read-back."""

    request: str = ""
    lever: str = ""
    target: str = ""
    cell: str | None = None
    verified: bool = False


class Kept(Detail):
    sha256: str = ""
    events: int = 0


class ApplyEntry(LeverEntry):
    """lever.apply: the write went out; its evidence (levers/evidence.py) was kept just before, and
    the price it was pulled at (levers/price.py; None: pulled before prices were stated)."""

    evidence: Kept = Kept()
    price: Price | None = None


@dataclass(frozen=True)
class Mitigation:
    """One lever pulled (its write went out) and what it cost, for the postmortem."""

    request: str
    lever: str
    target: str
    cell: str | None
    price: Price | None


def mitigations(entries: Iterable[Mapping[str, Any]]) -> list[Mitigation]:
    """Every lever whose write went out, in order, with the price it was pulled at (the postmortem's
    "What the mitigations cost"; it reads the levers' entries only through this)."""
    out = []
    for e in entries:
        if e.get("action") != APPLY.action:
            continue
        try:
            d = ApplyEntry.model_validate(e.get("detail") or {})
        except ValidationError:
            d = ApplyEntry.model_validate({k: v for k, v in (e.get("detail") or {}).items() if k != "price"})
        out.append(Mitigation(d.request, d.lever, d.target, d.cell, d.price))
    return out


Render = Callable[[LeverEntry, str], "str | None"]


def _label(d: LeverEntry) -> str:
    cell = f" ({code(d.cell)})" if d.cell else ""
    return f"{code(d.request)} `{code(d.lever)}` {code(d.target)}{cell}"


def applied(d: LeverEntry, by: str) -> str:
    return f"Lever {_label(d)} applied ({'verified' if d.verified else 'not verified'}), requested by {by}"


def _undo(what: str) -> Render:
    def render(d: LeverEntry, by: str) -> str:
        return f"Lever {_label(d)} {what} by {by}"

    return render


def _settled(event: LeverEvent) -> Render:
    def render(d: LeverEntry, _: str) -> str:
        return f"Lever {_label(d)}: {code(event.value)}"

    return render


def no_event(_: Detail, __: str) -> None:
    return None


def kept(d: ApplyEntry, _: str) -> str | None:
    """The postmortem's link to the evidence: its digest, and how to print it."""
    if not d.evidence.sha256:
        return None  # applied before evidence was kept
    return (
        f"Evidence of {_label(d)} kept before the write ({d.evidence.events} events): sha256 "
        f"`{d.evidence.sha256}` (`firebreak evidence` prints it)"
    )


# The line of every lever event but lever.apply (its evidence: `kept`, registered with ApplyEntry);
# a test holds EVENTS and APPLY to LeverEvent.
APPLY = LeverEvent.apply
EVENTS: dict[LeverEvent, Render] = {
    LeverEvent.done: applied,
    LeverEvent.failed: _settled(LeverEvent.failed),
    LeverEvent.stale: _settled(LeverEvent.stale),
    LeverEvent.undo: _undo("undone"),
    LeverEvent.undo_failed: _undo("undo failed"),
    LeverEvent.undo_unsettled: _undo("undo not settled"),
    LeverEvent.cancelled: _settled(LeverEvent.cancelled),
}
