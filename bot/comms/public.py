"""Public granularity: a stakeholder update names a product and a region, never a cell or a node.

Pure functions; the update handler refuses when ``offending`` finds anything and
suggests ``rewrite``: the person's own text with each cell replaced by its region
and each node name removed.
"""

from __future__ import annotations

import re

from bot.clock import hhmm
from bot.incidents.models import Incident
from bot.policy.comms import PublicPolicy

_CELL_SUFFIX = re.compile(r"-\d+$")
_CELL_PREFIX = re.compile(r"^cell[-_]", re.IGNORECASE)
# The noun before a removed or replaced name goes with it ("node gpu-a3-0142" -> "").
_NOUN = r"(?:\b(?:cells?|nodes?|hosts?|machines?|servers?)\s+)?"


# A removed node takes a joining word with it ("on gpu-a3-0142 and us-east-3" -> "on us-east-3");
# with none to take, "on gpu-a3-0142" becomes "on some hosts" rather than a dangling "on".
_LEAD = r"(?P<lead>(?:\s*,|\s+(?:and|or|&))\s+)?"
_PREP = r"(?P<prep>\b(?:on|in|at|from|to|for|of|across|with|via)\s+)?"
_CONJ = r"(?P<conj>\s*,\s*|\s+(?:and|or|&)\s+)?"


def _drop_node(m: re.Match[str]) -> str:
    prep = m.group("prep") or ""
    if m.group("conj"):
        return (m.group("lead") or "") + prep
    if m.group("lead"):
        return ""
    return prep + "some hosts" if prep else ""


def _name(name: str) -> str:
    return rf"(?<![\w-]){re.escape(name)}(?![\w-])"


def offending(text: str, policy: PublicPolicy, private_names: list[str]) -> list[str]:
    """The words that make ``text`` too fine-grained for the public, in order, each once."""
    hits: list[tuple[int, str]] = []
    for name in private_names:
        if name:
            hits += [(m.start(), m.group(0)) for m in re.finditer(_name(name), text, re.IGNORECASE)]
    for p in (*policy.cell_patterns, *policy.node_patterns):
        # Phones capitalise and people shout: US-EAST-3 is the same cell as us-east-3.
        hits += [(m.start(), m.group(0)) for m in re.finditer(p, text, re.IGNORECASE)]
    seen: dict[str, None] = {}
    for _, word in sorted(hits):
        # A word inside a longer hit (us-east-3 inside cell-us-east-3) is already shown.
        if not any(word != other and word in other for other in (w for _, w in hits)):
            seen.setdefault(word, None)
    return list(seen)


def _is_node(word: str, policy: PublicPolicy, nodes: list[str]) -> bool:
    if word.lower() in {n.lower() for n in nodes}:
        return True
    return any(re.fullmatch(p.replace(r"\b", ""), word, re.IGNORECASE) for p in policy.node_patterns)


def region_of_cell(cell: str) -> str:
    return _CELL_SUFFIX.sub("", _CELL_PREFIX.sub("", cell)).lower()


def rewrite(text: str, bad: list[str], policy: PublicPolicy, nodes: list[str], inc: Incident) -> str:
    """``text`` at public granularity: cells become their region, node names go."""
    out = text
    for word in sorted(bad, key=len, reverse=True):
        if _is_node(word, policy, nodes):
            out = re.sub(_LEAD + _PREP + _NOUN + _name(word) + _CONJ, _drop_node, out, flags=re.IGNORECASE)
        else:
            out = re.sub(_NOUN + _name(word), region_of_cell(word), out, flags=re.IGNORECASE)
    # Tidy what a removal leaves: doubled spaces, a space before punctuation, a leading comma.
    out = re.sub(r"\s{2,}", " ", out)
    out = re.sub(r"\s+([,.;:!?])", r"\1", out).strip(" ,;:-")
    if not re.search(r"\w", out):
        return suggestion(inc)
    products = [p for p in inc.products if p.lower() not in out.lower()]
    return f"{', '.join(products)}: {out}" if products else out


def region_of(inc: Incident) -> str:
    if inc.regions:
        return ", ".join(inc.regions)
    regions = dict.fromkeys(region_of_cell(c) for c in inc.cells)
    return ", ".join(regions) or "<region>"


def suggestion(inc: Incident) -> str:
    product = ", ".join(inc.products) or "<product>"
    return f"{product}, {region_of(inc)}: <what users see, e.g. elevated latency> since {hhmm(inc.detected_at)} UTC"
