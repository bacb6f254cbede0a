"""The pure rules of signals: which alerts count, how they group, what an incident is called,
its SEV, and what a delivery changes for an incident's record (the Python twin of
bot/signals/lua.ALERTS_RECORD, used to skip deliveries that change nothing).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.chat import visible
from bot.ids import CELL_NAME
from bot.signals.models import Alert, AlertRecord

UNKNOWN_CELL = "unknown-cell"
SECURITY_PREFIX = "security:"
DEFAULT_SEV = 3
SECURITY_SEV = 1
TITLE_MAX = 200
# Where an alert names its node, most specific first (kube-state-metrics, DCGM, node exporter).
NODE_LABELS = ("node", "Hostname", "hostname", "kubernetes_node", "nodename", "instance")

_SEV = re.compile(r"^(?:sev)?([1-4])$", re.IGNORECASE)


def is_page(labels: Mapping[str, str]) -> bool:
    return labels.get("severity", "").strip().lower() == "page"


def is_security(labels: Mapping[str, str]) -> bool:
    return labels.get("category", "").strip().lower() == "security"


def handled(labels: Mapping[str, str]) -> bool:
    """Alerts Firebreak acts on (by their labels): pages, and security alerts whatever their
    severity. A ticket (or any other severity) opens and joins nothing."""
    return is_page(labels) or is_security(labels)


def cell_of(a: Alert) -> str | None:
    """The alert's cell, or None when its `cell` label is missing or not a cell name."""
    cell = a.labels.get("cell", "").strip()
    return cell if CELL_NAME.fullmatch(cell) else None


@dataclass(frozen=True)
class Group:
    """The alerts of one delivery that go to one incident: a cell's pages, or a cell's security
    alerts (their own incident). ``key`` names it: the cell, or "security:<cell>"."""

    key: str
    cell: str
    security: bool
    alerts: tuple[Alert, ...]
    unlabelled: int  # how many had no usable `cell` label (so they are under unknown-cell)


def groups(alerts: Iterable[Alert]) -> list[Group]:
    """Handled alerts by (security, cell), alerts without a usable cell under `unknown-cell`,
    in the order their first alert came."""
    by: dict[tuple[bool, str], list[Alert]] = {}
    unlabelled: Counter[tuple[bool, str]] = Counter()
    for a in alerts:
        if not handled(a.labels):
            continue
        cell = cell_of(a)
        key = (is_security(a.labels), cell or UNKNOWN_CELL)
        by.setdefault(key, []).append(a)
        if cell is None:
            unlabelled[key] += 1
    return [
        Group(f"{SECURITY_PREFIX}{cell}" if sec else cell, cell, sec, tuple(items), unlabelled[(sec, cell)])
        for (sec, cell), items in by.items()
    ]


def sev_of(alerts: Iterable[Alert], security: bool) -> int:
    """The worst `sev` label among firing alerts (1-4, "sev2" too); default SEV3. Security: SEV1."""
    if security:
        return SECURITY_SEV
    labels = (a.labels.get("sev", "").strip() for a in alerts if a.status == "firing")
    sevs = [int(m.group(1)) for v in labels if (m := _SEV.fullmatch(v))]
    return min(sevs, default=DEFAULT_SEV)


def title_of(alerts: Sequence[Alert], cell: str, security: bool, common_summary: str) -> str:
    """commonAnnotations.summary, else the summary all of the group's alerts share, else the most
    frequent alertname among those firing. Stored as given (without invisible characters) and
    quoted wherever it is shown."""
    firing = [a for a in alerts if a.status == "firing"] or list(alerts)
    summaries = {a.summary for a in firing}
    title = common_summary.strip()
    if not title and len(summaries) == 1:
        title = next(iter(summaries)).strip()
    if not title:
        top = Counter(a.alertname for a in firing).most_common(1)
        title = top[0][0] if top else "Alertmanager alert"
    title = " ".join(visible(title).split())
    if security and not title.lower().startswith("security"):
        title = f"Security: {title}"
    if cell == UNKNOWN_CELL:
        title = f"{title} (no cell label)"
    if len(title) < 3:
        title = f"Alert {title}".strip()
    return title if len(title) <= TITLE_MAX else title[: TITLE_MAX - 1] + "…"


def node_of(a: Alert) -> str | None:
    for label in NODE_LABELS:
        v = a.labels.get(label, "").strip()
        if v:
            return v.rsplit(":", 1)[0] if label == "instance" else v
    return None


def counts(alerts: Iterable[Alert]) -> list[tuple[str, int]]:
    """Alerts per alertname, most first (ties by name)."""
    c = Counter(a.alertname for a in alerts)
    return sorted(c.items(), key=lambda kv: (-kv[1], kv[0]))


def nodes(alerts: Iterable[Alert]) -> list[str]:
    return sorted({n for a in alerts if (n := node_of(a))})


def started(starts_at: str) -> datetime | None:
    """An alert's startsAt (RFC 3339 as Alertmanager sends it, nanoseconds kept to the
    microsecond), or None when it has none or it is not a time."""
    try:
        at = datetime.fromisoformat(starts_at.strip())
    except ValueError:
        return None
    return at if at.tzinfo is not None else None  # Alertmanager always sends a zone


def later_episode(a: Alert, old: AlertRecord) -> bool:
    """Is ``a`` a later firing of the alert ``old`` recorded? Alertmanager keeps an alert's
    startsAt while it fires (its repeats carry the same one) and gives the fingerprint a new one
    when it fires again after resolving, so a later startsAt is a new episode, whether or not its
    resolve ever reached the incident that recorded ``old``."""
    new, was = started(a.starts_at), started(old.starts_at)
    return new is not None and was is not None and new > was


def unseen_elsewhere(alerts: Sequence[Alert], earlier: Mapping[str, AlertRecord]) -> list[Alert]:
    """Drop what belongs to the group's previous (resolved) incident: an episode of an alert it
    recorded (same startsAt or older), still firing or resolving late. A repeat of a still-firing
    alert after people resolved its incident opens nothing; an alert that fires again (resolved
    there, or a later startsAt: a resolve that came after the incident was resolved is not
    recorded there) does, and that episode's own resolve goes to the incident it fed."""
    keep = []
    for a in alerts:
        old = earlier.get(a.fingerprint)
        if old is None or later_episode(a, old) or (a.status == "firing" and old.status == "resolved"):
            keep.append(a)
    return keep


def changes(alerts: Sequence[Alert], recorded: Mapping[str, AlertRecord]) -> tuple[list[int], list[int]]:
    """Positions of the alerts that would change the incident's record (lua.ALERTS_RECORD's rule):
    firing when new or resolved there, resolved when new or firing there."""
    fired, cleared = [], []
    for i, a in enumerate(alerts):
        old = recorded.get(a.fingerprint)
        if a.status == "firing":
            if old is None or old.status != "firing":
                fired.append(i)
        elif old is None or old.status == "firing":
            cleared.append(i)
    return fired, cleared
