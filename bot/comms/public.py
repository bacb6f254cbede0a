"""Public granularity: a stakeholder update names a product and a region, never a cell or a node.

Pure functions; the update handler refuses when ``offending`` finds anything.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Awaitable, Callable

from bot.clock import hhmm
from bot.comms.policy import PublicPolicy

if TYPE_CHECKING:
    from bot.core.services import Services
    from bot.incidents.models import Incident

# Other capabilities that learn an incident's node names (alert intake, node levers)
# add a function here; its names are refused in public updates like the cells are.
PRIVATE_NAMES: list[Callable[["Services", "Incident"], Awaitable[list[str]]]] = []

_CELL_SUFFIX = re.compile(r"-\d+$")


def offending(text: str, policy: PublicPolicy, private_names: list[str]) -> list[str]:
    """The words that make ``text`` too fine-grained for the public, in order, each once."""
    hits: list[tuple[int, str]] = []
    for name in private_names:
        if name:
            for m in re.finditer(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text, re.IGNORECASE):
                hits.append((m.start(), m.group(0)))
    for p in (*policy.cell_patterns, *policy.node_patterns):
        for m in re.finditer(p, text):
            hits.append((m.start(), m.group(0)))
    seen: dict[str, None] = {}
    for _, word in sorted(hits):
        # A word inside a longer hit (us-east-3 inside cell-us-east-3) is already shown.
        if not any(word != other and word in other for other in (w for _, w in hits)):
            seen.setdefault(word, None)
    return list(seen)


def region_of(inc: "Incident") -> str:
    if inc.regions:
        return ", ".join(inc.regions)
    regions = dict.fromkeys(_CELL_SUFFIX.sub("", c) for c in inc.cells)
    return ", ".join(regions) or "<region>"


def suggestion(inc: "Incident") -> str:
    product = ", ".join(inc.products) or "<product>"
    return f"{product}, {region_of(inc)}: <what users see, e.g. elevated latency> since {hhmm(inc.detected_at)} UTC"
