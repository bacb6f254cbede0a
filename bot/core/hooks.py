"""Extension points the core and the server call, declared here because capabilities above fill
them: a Hook where two or more listen, a Port where one capability provides the function."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.core.registry import Hook, Port
from bot.core.request import IncidentView
from bot.core.services import Services

# A line for `/incident status` (open levers, pending approvals, grants), or None.
StatusLine = Callable[[Services, IncidentView], Awaitable["str | None"]]
STATUS_LINE: Hook[StatusLine] = Hook("status_line")

# Before /metrics is rendered (bot/server.py): refresh a gauge read from the store at scrape time,
# so every replica reports the cluster-wide value. Keep it to a few cheap reads.
Scrape = Callable[[Services], Awaitable[None]]
SCRAPE: Port[Scrape] = Port("scrape")

# /readyz (bot/server.py): a capability's own readiness check, (its key in the answer, ready, what it
# found), or None when it has nothing to check. Answer from what was last found (refresh in the
# background): /readyz answers within a second. Not ready makes the replica not ready.
Readiness = Callable[[Services], Awaitable["tuple[str, bool, object] | None"]]
READINESS: Port[Readiness] = Port("readiness")

# The cells Firebreak knows (kube contexts, the levers policy's cells), for `/incident scope add`;
# None when a provider cannot tell (no kubeconfig).
KnownCells = Callable[[Services], Awaitable["list[str] | None"]]
KNOWN_CELLS: Hook[KnownCells] = Hook("known_cells")

# Right after an incident is resolved (in the `resolved` request): close what it left open and
# return lines for the IC's reply (e.g. the levers still in force, with their undo commands).
OnResolve = Callable[[Services, IncidentView, str], Awaitable["list[str]"]]
ON_RESOLVE: Port[OnResolve] = Port("on_resolve")
