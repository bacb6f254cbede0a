"""The one policy check every request passes (policies/commands.yaml + command rules)."""

from __future__ import annotations

from typing import Any

from bot.core.registry import Allowed, Route
from bot.core.request import IncidentView, Request
from bot.core.services import Services
from bot.policy import roles


def after_resolve(svc: Services) -> str:
    """The typed commands a resolved incident still answers (commands.yaml when_resolved)."""
    routes = svc.registry.routes
    names = [
        n
        for n, r in svc.policy.commands.commands.items()
        if r.when_resolved and n in routes and routes[n].spec is not None
    ]
    return ", ".join(f"`/incident {n}`" for n in names) or "nothing"


def _other_teams(svc: Services) -> str:
    """The typed commands a user of another Slack team may run (commands.yaml other_teams)."""
    routes = svc.registry.routes
    names = [
        f"`{n}`"
        for n, r in svc.policy.commands.commands.items()
        if r.other_teams and n in routes and routes[n].spec is not None
    ]
    if not names:
        return "no commands"
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _who(allowed: list[str]) -> str:
    names = {"holder": "the role's holder", "receiver": "the person named", "ic": "the IC"}
    return " or ".join(names.get(a) or f"the {roles.title(a)}" for a in allowed)


def _seats(allowed: list[str], inc: IncidentView | None) -> str:
    """Who to ask: the people in the allowed seats, by name."""
    seats = [a for a in allowed if a in roles.ROLES]
    return f" ({roles.seated(inc, seats)})" if inc is not None and seats else ""


async def authorize(svc: Services, req: Request, route: Route, inc: IncidentView | None) -> str | None:
    """None when allowed, else the reason for the refusal (shown to the user)."""
    got = await decide(svc, req, route, inc)
    return got if isinstance(got, str) else None


async def decide(svc: Services, req: Request, route: Route, inc: IncidentView | None) -> str | Allowed[Any] | None:
    """The reason for a refusal; else None, or the route rule's Allowed (what its handler is given)."""
    if req.source.is_system:
        # Webhooks and timers are authenticated at their edge (bearer token, our own scheduler).
        return await route.rule(svc, req, inc) if route.rule else None
    rule = svc.policy.commands.commands.get(route.name)
    if rule is None:
        return f"`{route.name}` is not allowed by policy (no rule in commands.yaml)."
    if req.other_team is not None and not rule.other_teams:
        # Before any seat is read: a user id from another team is not one the policy's groups,
        # ids or on-call mean, even when it reads the same or the IC seated it.
        return (
            f"You're in another Slack organisation (team {req.other_team}): Firebreak takes `{route.name}` "
            f"only from members of its own workspace; {_other_teams(svc)} work for you."
        )
    if route.needs_incident and inc is not None and not inc.is_open and not rule.when_resolved:
        return f"{inc.id} is resolved; here you can still use {after_resolve(svc)}."
    allowed = set(rule.allowed)
    ok = "anyone" in allowed
    if not ok and inc is not None:
        held = set(inc.holders(req.actor))
        ok = bool(held & allowed)
        subject = req.command.subject_role()
        if not ok and "holder" in allowed and subject is not None:
            ok = inc.holder(subject) == req.actor
    if not ok and "receiver" in allowed:
        ok = True  # the receiver is in the handoff record; the handler checks it atomically with the accept
    if not ok:
        where = f" in {inc.id}" if inc is not None else ""
        return f"Only {_who(rule.allowed)} can run `{route.name}`{where}{_seats(rule.allowed, inc)}."
    if route.rule is not None:
        return await route.rule(svc, req, inc)
    return None
