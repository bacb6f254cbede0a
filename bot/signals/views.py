"""What signals posts: one summary per delivery in the incident channel, and the security
channel's line. Every piece of alert text (label values, summaries, names) is an outsider's
words: made literal (no @channel ping, no mentions, no links; bot/chat/text.py) and set in
code spans (no bold, italics or strikes)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.chat.text import channel_ref, person
from bot.chat.text import code as _code
from bot.signals import rules
from bot.signals.models import Alert

MAX_KINDS = 8
MAX_NODES = 10
MAX_VALUE = 80


def code(value: str) -> str:
    """An outsider's value shown literally, in a code span it cannot close, on one line."""
    return _code(value, MAX_VALUE)


def _kinds(alerts: Sequence[Alert]) -> str:
    c = rules.counts(alerts)
    shown = ", ".join(f"{code(name)} ×{n}" for name, n in c[:MAX_KINDS])
    more = len(c) - MAX_KINDS
    return shown + (f", and {more} more kinds" if more > 0 else "")


def _nodes(alerts: Sequence[Alert]) -> str:
    ns = rules.nodes(alerts)
    if not ns:
        return ""
    shown = ", ".join(code(n) for n in ns[:MAX_NODES])
    more = len(ns) - MAX_NODES
    noun = "node" if len(ns) == 1 else "nodes"
    return f" {len(ns)} {noun}: {shown}" + (f" and {more} more" if more > 0 else "") + "."


def _n(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def summary(
    *,
    cell: str,
    fired: Sequence[Alert],
    cleared: Sequence[Alert],
    unlabelled: int,
    truncated: int,
    head: str | None = None,
    tail: Sequence[str] = (),
) -> str:
    """The one message a delivery posts in an incident channel: counts per alertname and the
    nodes, for what fired and what resolved; never a line per alert."""
    lines = [head] if head else []
    where = code(cell)
    if fired:
        lines.append(f":rotating_light: {_n(len(fired), 'alert')} firing in {where}: {_kinds(fired)}.{_nodes(fired)}")
    if cleared:
        lines.append(f":white_check_mark: {_n(len(cleared), 'alert')} resolved: {_kinds(cleared)}.{_nodes(cleared)}")
    if unlabelled:
        lines.append(
            f":warning: {_n(unlabelled, 'alert')} of this delivery had no usable `cell` label, so they are grouped "
            f"under `{rules.UNKNOWN_CELL}`. Fix the alert rules' labels; the alerts are kept here."
        )
    if truncated:
        lines.append(
            f":warning: Alertmanager left {_n(truncated, 'alert')} out of this delivery (its `max_alerts`); "
            "Alertmanager's own page lists them."
        )
    lines.extend(tail)
    return "\n".join(lines)


def opened_head(inc_id: str, cell: str, ic: str | None, security: bool) -> str:
    what = "Security alert: SEV1 by policy. " if security else ""
    if ic:
        return f":pager: {inc_id} opened from Alertmanager. {what}IC: {person(ic)} (on call for {code(cell)})."
    return (
        f":pager: {inc_id} opened from Alertmanager. {what}Nobody is on call for {code(cell)} "
        "(policies/oncall.yaml), so the IC seat is empty: whoever policies/roles.yaml makes eligible "
        "for it can take it with `/incident role ic @yourself`."
    )


def linked(inc_id: str | None, channel: str | None) -> str:
    if inc_id is None:
        return "No other incident is open for this cell."
    return f"Open incident of the same cell: {inc_id}" + (f" in {channel_ref(channel)}." if channel else ".")


def security_line(
    inc_id: str,
    channel: str | None,
    cell: str,
    fired: Sequence[Alert],
    cleared: Sequence[Alert],
    link: str,
    opened: bool,
) -> str:
    where = f" in {channel_ref(channel)}" if channel else ""
    verb = "opened" if opened else "updated"
    parts = [f":lock: Security alert in {code(cell)}: {inc_id} (SEV1) {verb}{where}."]
    if fired:
        parts.append(f"Firing: {_kinds(fired)}.")
    if cleared:
        parts.append(f"Resolved: {_kinds(cleared)}.")
    parts.append(link)
    return " ".join(parts)


def security_unopened(cell: str, why: str, fired: Sequence[Alert], link: str) -> str:
    """The security channel's line when a security alert's incident could not be opened: the alert
    still reaches the people who act on it, with the reason, and how to open it by hand."""
    parts = [f":lock: Security alert in {code(cell)}: Firebreak could not open its incident. {why}"]
    if fired:
        parts.append(f"Firing: {_kinds(fired)}.")
    parts.append(link)
    parts.append(
        "Firebreak tries again; until a line here says the incident opened, open it by hand: "
        + _code(f"/incident declare <title> --sev 1 --cell {cell} --private", 2 * MAX_VALUE)
    )
    return " ".join(parts)


def sev_hint(inc_id: str, inc_sev: int, alert_sev: int) -> str | None:
    """When new alerts say worse than the incident is: the IC decides (SEV only goes up, by a person)."""
    if alert_sev >= inc_sev:
        return None
    return (
        f":arrow_up: These alerts say SEV{alert_sev}; {inc_id} is SEV{inc_sev}. "
        f"The IC raises it with `/incident sev {alert_sev} <reason>`."
    )
