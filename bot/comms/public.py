"""Public granularity: a stakeholder update names a product and a region, never a cell or a node.

Pure functions; the update handler refuses when ``offending`` finds anything and
suggests ``rewrite``: the person's own text with each cell replaced by its region
and each node name removed.
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, urlsplit

from bot.clock import hhmm
from bot.incidents.models import Incident
from bot.policy.comms import PublicPolicy
from bot.redact import compile_pattern

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


# What Slack turns into a link in a message: a URL with a scheme, www.…, or a bare host name with a
# path or not (evil.example/reset). RE2: linear time, whatever the text.
_LINK = compile_pattern(
    r"(?i)(?:\b[a-z][a-z0-9+.-]*://[^\s<>|]+"
    r"|\bwww\.[^\s<>|]+"
    r"|\b(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,24}\b(?:[/:?#][^\s<>|]*)?)"
)
_TRAILING = ".,;:!?)]}'\""


def _split(link: str) -> SplitResult | None:
    try:
        u = urlsplit(link)
        u.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        return None
    return u


def _under(found: SplitResult, allowed: SplitResult) -> bool:
    """``found`` is at or below the site prefix ``allowed``: same scheme, host and port, its path."""
    if found.scheme.lower() != allowed.scheme.lower() or found.hostname != allowed.hostname:
        return False
    if found.port != allowed.port or found.username is not None or found.password is not None:
        return False
    prefix = allowed.path.rstrip("/")
    return not prefix or found.path == prefix or found.path.startswith(prefix + "/")


def _own_channel(found: SplitResult, inc: Incident) -> bool:
    """A link to the incident's own Slack channel (https://<workspace>.slack.com/archives/<id>…)."""
    host = found.hostname or ""
    parts = found.path.split("/")
    return (
        bool(inc.channel_id)
        and found.scheme.lower() == "https"
        and host.endswith(".slack.com")
        and found.username is None
        and found.password is None
        and len(parts) >= 3
        and parts[1] == "archives"
        and parts[2] == inc.channel_id
    )


def unlisted_links(text: str, policy: PublicPolicy, inc: Incident) -> list[str]:
    """The links in ``text`` a public update may not carry: each one neither under a site of
    ``policy.links`` (the status page) nor to the incident's own channel. A link without a scheme
    is never allowed: Slack would pick the scheme."""
    allowed = [u for u in (_split(a) for a in policy.links) if u is not None]
    out: dict[str, None] = {}
    for m in _LINK.finditer(text):
        link = m.group(0).rstrip(_TRAILING)
        found = _split(link) if "://" in link else None
        ok = found is not None and (_own_channel(found, inc) or any(_under(found, a) for a in allowed))
        if not ok:
            out.setdefault(link, None)
    return list(out)


def region_of(inc: Incident) -> str:
    if inc.regions:
        return ", ".join(inc.regions)
    regions = dict.fromkeys(region_of_cell(c) for c in inc.cells)
    return ", ".join(regions) or "<region>"


def suggestion(inc: Incident) -> str:
    product = ", ".join(inc.products) or "<product>"
    return f"{product}, {region_of(inc)}: <what users see, e.g. elevated latency> since {hhmm(inc.detected_at)} UTC"
