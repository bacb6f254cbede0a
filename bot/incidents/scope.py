"""`/incident scope add <cell>`: the IC widens the incident to another cell
(docs/security-model.md, "Scope, private incidents and resolve").

A lever acts only inside the incident's cells (levers/scope.py), so this is the one way to reach
another cell. The cell must be one Firebreak knows (a kube context, a cell of the levers policy or
of policies/oncall.yaml: the KNOWN_CELLS providers); the fleet context is no cell (its levers always
need approval). The change is one Lua step (an open incident only), audited by the executor, and
shown on the card. `declare --cell` takes known cells only, by the same list (``must_know``).
"""

from __future__ import annotations

from bot.chat import person
from bot.core.eligibility import oncall_now
from bot.core.hooks import KNOWN_CELLS
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.commands import ScopeAdd
from bot.incidents.models import Incident
from bot.incidents.posts import announce, joined, refresh_card
from bot.incidents.store import ScopeAdded, repo


async def _known(svc: Services) -> list[str] | None:
    """Every cell some provider knows; None when none of them could tell."""
    found: list[str] | None = None
    for provider in svc.registry.hooked(KNOWN_CELLS):
        cells = await provider(svc)
        if cells is not None:
            found = [*(found or []), *cells]
    return list(dict.fromkeys(found)) if found is not None else None


async def oncall_cells(svc: Services) -> list[str] | None:
    """KNOWN_CELLS: the cells policies/oncall.yaml names now (None: it names none)."""
    return list(oncall_now(svc).cells) or None


async def must_know(svc: Services, cells: list[str], nothing: str) -> None:
    """Refuse, listing the known cells, unless each of ``cells`` is one Firebreak knows. With no cell
    known at all (no KUBECONFIG, no cells in levers.yaml or oncall.yaml) there is nothing to check
    against, and any cell name is taken: pages still join such an incident only under an IC who is
    IC-eligible for their cell (bot/signals/jobs.py)."""
    if not cells:
        return
    known = await _known(svc)
    if known is None:
        return
    for cell in cells:
        if cell not in known:
            raise Refusal(
                f"`{cell}` is not a cell Firebreak knows (cells: {', '.join(sorted(known)) or 'none'}); {nothing}."
            )


async def scope_add(svc: Services, req: Request, cmd: ScopeAdd, inc: Incident) -> Outcome:
    cell = cmd.cell
    if cell in inc.cells:
        return Outcome(message=f"{cell} is already in {inc.id}'s scope ({', '.join(inc.cells)}); nothing changed.")
    fleet = svc.policy.levers.fleet_context
    if cell in (fleet, "fleet"):
        raise Refusal(
            f"`{cell}` is the fleet context, not a cell: its levers work from any incident and always need "
            "the IC's approval. Nothing changed."
        )
    known = await _known(svc)
    if known is None:
        raise Refusal(
            "Firebreak knows no cells to check that against (KUBECONFIG unset, no `cells` in policies/levers.yaml); "
            "nothing changed."
        )
    if cell not in known:
        raise Refusal(
            f"`{cell}` is not a cell Firebreak knows (cells: {', '.join(sorted(known)) or 'none'}); nothing changed."
        )
    code = await repo(svc).add_cell(inc.id, cell)
    if code is ScopeAdded.ALREADY:
        return Outcome(message=f"{cell} is already in {inc.id}'s scope; nothing changed.")
    if code is not ScopeAdded.ADDED:
        raise Refusal(f"{inc.id} is resolved; its scope no longer changes.")
    after = [*inc.cells, cell]
    warn = await announce(
        svc,
        inc.id,
        f":round_pushpin: {person(req.actor)} widened {inc.id}'s scope to {cell} (cells: {', '.join(after)}). "
        "Levers may now act there.",
    )
    warn2 = await refresh_card(svc, inc.id)
    return Outcome(
        message=joined(f"{inc.id}'s scope is now {', '.join(after)}.", warn, warn2),
        audit={"cell": cell, "cells_before": inc.cells, "cells_after": after},
    )
