"""What the levers call in the approvals capability, which sits above them: each a Port that
bot/approvals passes its function into in its register (levers cannot import it). One not
provided is not called (without approvals no grant is found and no card is posted).

APPROVAL_REQUESTED(svc, inc, record): a lever request was stored in `pending_approval`
(bot.approvals posts the Approve/Deny card).

GRANT_PROVIDER(svc, inc, user, lever_name, cell) -> grant id | None: asked when the user
lacks the lever's role; cell is the cell name or "fleet". Providers check expiry on every call.

GRANT_ACTIVE(svc, inc, grant_id, user, lever_name, cell) -> bool: is this very grant still
active (now) for that user, lever and cell? Asked again just before a stored request runs.
Not provided: the grant counts as ended.

GRANT_USED(svc, inc, record, grant_id, outcome=None): whenever a grant authorized a pull or
undo, whatever came of it: refused, dry run, pending approval, denied, expired, done, failed,
stale, undone. `outcome` says it in a few words when the record's state doesn't.

UNDO_APPROVAL_REQUESTED(svc, inc, record, requester, grant_id, found) -> ballot id: an undo whose check
failed (node-quarantine's return gate) waits for approval; bot.approvals opens one ballot per
request (asked again while it is pending: the same id) and, once approved, runs levers.undo.restore.

RECONCILED(svc, record): a request a dead process left executing or undoing was settled
(approvals edit the card).

The incident arrives as the core's IncidentView: levers know no incident package.
"""

from __future__ import annotations

from typing import Protocol

from bot.core.registry import Port
from bot.core.request import IncidentView
from bot.core.services import Services
from levers.requests import LeverRequest


class ApprovalRequested(Protocol):
    async def __call__(self, svc: Services, inc: IncidentView, rec: LeverRequest, /) -> None: ...


class GrantProvider(Protocol):
    async def __call__(
        self, svc: Services, inc: IncidentView | None, user: str, lever: str, cell: str, /
    ) -> str | None: ...


class GrantActive(Protocol):
    async def __call__(
        self, svc: Services, inc: IncidentView | None, grant_id: str, user: str, lever: str, cell: str, /
    ) -> bool: ...


class GrantUsed(Protocol):
    async def __call__(
        self, svc: Services, inc: IncidentView | None, rec: LeverRequest, grant_id: str, /, outcome: str | None = None
    ) -> None: ...


class UndoApprovalRequested(Protocol):
    async def __call__(
        self, svc: Services, inc: IncidentView, rec: LeverRequest, requester: str, grant_id: str | None, found: str, /
    ) -> str: ...


class Reconciled(Protocol):
    async def __call__(self, svc: Services, rec: LeverRequest, /) -> None: ...


APPROVAL_REQUESTED: Port[ApprovalRequested] = Port("levers.approval_requested")
GRANT_PROVIDER: Port[GrantProvider] = Port("levers.grant_provider")
GRANT_ACTIVE: Port[GrantActive] = Port("levers.grant_active")
GRANT_USED: Port[GrantUsed] = Port("levers.grant_used")
RECONCILED: Port[Reconciled] = Port("levers.reconciled")
UNDO_APPROVAL_REQUESTED: Port[UndoApprovalRequested] = Port("levers.undo_approval_requested")


async def grant_used(svc: Services, rec: LeverRequest, grant_id: str | None, outcome: str | None = None) -> None:
    """Report a grant's use (no-op without a grant); `outcome` only when the state doesn't say it."""
    used = svc.registry.provided(GRANT_USED)
    if not grant_id or used is None:
        return
    await used(svc, await svc.incidents.get(rec.incident), rec, grant_id, outcome=outcome)
