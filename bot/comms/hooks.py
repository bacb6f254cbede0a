"""Extension points comms calls and other capabilities fill.

PRIVATE_NAMES(svc, inc) -> names: node names an incident has learnt (node levers, alert
intake); they are refused in a public update like the incident's cells are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.core.registry import Hook
from bot.core.services import Services
from bot.incidents.models import Incident

PrivateNames = Callable[[Services, Incident], Awaitable[list[str]]]
PRIVATE_NAMES: Hook[PrivateNames] = Hook("comms.private_names")
