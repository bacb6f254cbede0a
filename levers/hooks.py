"""Extension points other capabilities fill (approvals, break-glass).

APPROVAL_REQUESTED: async fn(svc, inc, record) -> None, called after a lever
request is stored in `pending_approval` (bot.approvals posts the Approve/Deny
card; bot/commands.py always loads it with the levers).

GRANT_PROVIDERS: async fn(svc, inc, user, lever_name, cell) -> grant id | None.
Asked when the user lacks the lever's role; cell is the cell name or "fleet".
Providers must check expiry on every call.

GRANT_ACTIVE: async fn(svc, inc, grant_id, user, lever_name, cell) -> bool:
is this very grant still active (now) for that user, lever and cell? Asked
again just before a stored request runs. No checker: the grant counts as ended.

GRANT_USED: async fn(svc, inc, record, grant_id, outcome=None) -> None, called
whenever a grant authorized a pull or undo, whatever came of it: refused,
dry run, pending approval, denied, expired, done, failed, stale, undone.
`outcome` says it in a few words when the record's state doesn't.

RECONCILED: async fn(svc, record) -> None, called after a restart settled a
request a dead process left executing or undoing (approvals edit the card).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional, Protocol

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident
    from levers.requests import LeverRequest


class ApprovalRequested(Protocol):
    async def __call__(self, svc: "Services", inc: "Incident", rec: "LeverRequest", /) -> None: ...


class GrantProvider(Protocol):
    async def __call__(self, svc: "Services", inc: Optional["Incident"], user: str, lever: str, cell: str,
                       /) -> str | None: ...


class GrantActive(Protocol):
    async def __call__(self, svc: "Services", inc: Optional["Incident"], grant_id: str, user: str, lever: str,
                       cell: str, /) -> bool: ...


class GrantUsed(Protocol):
    async def __call__(self, svc: "Services", inc: Optional["Incident"], rec: "LeverRequest", grant_id: str, /,
                       outcome: str | None = None) -> None: ...


class Reconciled(Protocol):
    async def __call__(self, svc: "Services", rec: "LeverRequest", /) -> None: ...


APPROVAL_REQUESTED: list[ApprovalRequested] = []
GRANT_PROVIDERS: list[GrantProvider] = []
GRANT_ACTIVE: list[GrantActive] = []
GRANT_USED: list[GrantUsed] = []
RECONCILED: list[Reconciled] = []


async def grant_used(svc: "Services", rec: "LeverRequest", grant_id: str | None, outcome: str | None = None) -> None:
    """Tell every GRANT_USED hook (no-op without a grant); `outcome` only when the state doesn't say it."""
    if not grant_id:
        return
    inc = await svc.incidents.get(rec.incident)
    for used in GRANT_USED:
        await used(svc, inc, rec, grant_id, outcome=outcome)
