"""How the incident commands read on the postmortem's timeline (registered in capability.py),
and the GPU counts `assess` recorded, which the postmortem multiplies into GPU-hours."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bot.core.timeline import CommandDetail, Detail, code, command_action, md, who
from bot.incidents.commands import Assess
from bot.policy.roles import ROLE_TITLES


class _Args(Detail):
    """A command's arguments as the audit holds them."""


def _role(name: str | None) -> str:
    return ROLE_TITLES.get(str(name), md(str(name)))


class DeclareArgs(_Args):
    sev: int | None = None


class Declared(CommandDetail):
    args: DeclareArgs = DeclareArgs()
    sev: int | None = None
    cells: tuple[str, ...] = ()


def declared(d: Declared, by: str) -> str:
    cells = ", ".join(code(c) for c in d.cells)
    sev = d.sev if d.sev is not None else d.args.sev
    return f"Declared by {by} as SEV{sev}" + (f" ({cells})" if cells else "")


class ScopeWidened(CommandDetail):
    cell: str | None = None
    cells_after: tuple[str, ...] = ()


def scope_widened(d: ScopeWidened, by: str) -> str | None:
    if d.cell is None:
        return None  # already in scope: nothing changed
    return f"Scope widened to {code(d.cell)} by {by} (cells: {', '.join(code(c) for c in d.cells_after)})"


class SevArgs(_Args):
    reason: str = ""


class SevSet(CommandDetail):
    args: SevArgs = SevArgs()
    sev_from: int | None = None
    sev_to: int | None = None


def sev_set(d: SevSet, by: str) -> str | None:
    if d.sev_from == d.sev_to:
        return None  # asked for the SEV it already had
    return f"SEV{d.sev_from} → SEV{d.sev_to} by {by}: {md(d.args.reason)}"


class AssessArgs(_Args):
    users_burn: float | None = None
    gpus: int | None = None
    quality: bool = False
    security: bool = False

    def typed(self) -> str:
        """The axes as they were typed (`--users-burn 14.4 --gpus 512 --quality`)."""
        parts = []
        if self.users_burn is not None:
            parts.append(f"--users-burn {self.users_burn}")
        if self.gpus is not None:
            parts.append(f"--gpus {self.gpus}")
        parts += [f"--{k}" for k in ("quality", "security") if getattr(self, k)]
        return " ".join(parts)


class Assessed(CommandDetail):
    args: AssessArgs = AssessArgs()
    assessed_sev: int | None = None
    sev_from: int | None = None
    sev_to: int | None = None


def assessed(d: Assessed, by: str) -> str:
    raised = f" (SEV{d.sev_from} → SEV{d.sev_to})" if d.sev_to is not None else ""
    return f"Assessed by {by}: `{d.args.typed()}` (the matrix says SEV{d.assessed_sev}){raised}"


class RoleArgs(_Args):
    role: str | None = None
    user: str = ""


class RoleSet(CommandDetail):
    args: RoleArgs = RoleArgs()
    role: str | None = None
    user: str | None = None
    previous: str | None = None
    took_from_ineligible: bool = False


def role_set(d: RoleSet, by: str) -> str:
    user = d.user if d.user is not None else d.args.user
    role = _role(d.role if d.role is not None else d.args.role)
    if d.took_from_ineligible:
        return f"{who(user)} took {role} from {who(d.previous)}, who wasn't eligible for it"
    return f"{who(user)} is {role} (set by {by})"


class HandingOff(CommandDetail):
    args: RoleArgs = RoleArgs()
    role: str | None = None
    to: str | None = None
    handoff: str = ""


def handing_off(d: HandingOff, by: str) -> str:
    to = d.to if d.to is not None else d.args.user
    role = d.role if d.role is not None else d.args.role
    return f"{by} handing {_role(role)} to {who(to)} ({code(d.handoff)})"


class AcceptArgs(_Args):
    handoff: str = ""


class Accepted(CommandDetail):
    args: AcceptArgs = AcceptArgs()
    role: str = ""
    handoff: str | None = None


def accepted(d: Accepted, by: str) -> str:
    handoff = d.handoff if d.handoff is not None else d.args.handoff
    return f"{by} accepted {_role(d.role)} ({code(handoff)})"


def marked(state: str) -> Callable[[CommandDetail, str], str]:
    def render(_: CommandDetail, by: str) -> str:
        return f"Marked {state} by {by}"

    return render


def no_event(_: object, __: str) -> None:
    """A read: not an event on the timeline."""
    return None


# What the postmortem reads from the assessments ------------------------------------------------


def assessed_gpus(entries: Iterable[Mapping[str, Any]]) -> list[tuple[Mapping[str, Any], int]]:
    """Every `assess --gpus N` that went through, in order: (its audit entry, N)."""
    out = []
    for e in entries:
        if e.get("action") != command_action(Assess.name):
            continue
        d = e.get("detail") or {}
        gpus = (d.get("args") or {}).get("gpus")
        if d.get("result", "ok") == "ok" and isinstance(gpus, int) and not isinstance(gpus, bool):
            out.append((e, gpus))
    return out
