"""Extension points other capabilities fill (approvals, break-glass).

APPROVAL_REQUESTED: async fn(svc, inc, record) -> None, called after a lever
request is stored in `pending_approval`. Empty list: levers that need approval
are refused with "needs approval".

GRANT_PROVIDERS: async fn(svc, inc, user, lever_name, cell) -> grant id | None.
Asked when the user lacks the lever's role; cell is the cell name or "fleet".
Providers must check expiry on every call.

GRANT_USED: async fn(svc, inc, record, grant_id) -> None, called after a lever
ran (or was undone) under a grant.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Awaitable, Callable, Optional

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident
    from levers.requests import LeverRequest

ApprovalRequested = Callable[["Services", "Incident", "LeverRequest"], Awaitable[None]]
GrantProvider = Callable[["Services", Optional["Incident"], str, str, str], Awaitable[Optional[str]]]
GrantUsed = Callable[["Services", Optional["Incident"], "LeverRequest", str], Awaitable[Any]]

APPROVAL_REQUESTED: list[ApprovalRequested] = []
GRANT_PROVIDERS: list[GrantProvider] = []
GRANT_USED: list[GrantUsed] = []
