"""Pure rules for the postmortem's facts and action items: parsing what people type, what is
refused, and when an owner is reminded. No I/O: every function takes the time it needs.

Decisions (docs/signals-and-postmortem.md, "The facts", says them to users):
- Impact start (`postmortem impact`) is an ISO-8601 time in UTC (`2026-11-30T01:05Z`; an offset is
  converted, a time without one is taken as UTC). Refused: in the future, after the incident was
  mitigated or resolved (impact cannot start after it stopped), or more than LOOKBACK_DAYS before
  the declaration (a mistyped year). After detection it is accepted with a note: an alert on a
  leading signal can fire before users are hurt (TTD then reads negative, which is the point).
- A due date is a calendar date, `YYYY-MM-DD`, in UTC: today is allowed, yesterday is not, nor
  more than MAX_DUE_DAYS ahead (an item a year out does not ship).
- The owner is reminded at REMIND_HOUR_UTC on the due date (or at once, when the item is added
  later that day), then every REMIND_EVERY_S until the item is closed. A round missed while every
  process was down is not replayed: the next round after the late one is the next one due.
- An item is closed by its owner or the incident's IC, with non-empty evidence, once.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, date, datetime, time, timedelta

LOOKBACK_DAYS = 30
MAX_DUE_DAYS = 366
REMIND_HOUR_UTC = 9
REMIND_EVERY_S = 86400.0

IMPACT_EXAMPLE = "2026-11-30T01:05Z"
ROOT_CLASS = re.compile(r"^[a-z][a-z0-9]*(?:-[a-z0-9]+)*$")
# `class: <name>` then the text, set off by a space, `;`, `,`, `:` or ` - ` (figures.py reads it the same way).
_CLASS_PREFIX = re.compile(r"^\s*class\s*:\s*([^\s;,:]*)\s*(?:[;,:]|-+\s)?\s*(.*)$", re.IGNORECASE | re.DOTALL)
_ISO = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$", re.IGNORECASE)
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ACTION_ID = re.compile(r"^AI-([1-9][0-9]*)$", re.IGNORECASE)


def utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


# Impact start -------------------------------------------------------------------------------


def parse_utc(text: str) -> float:
    """An ISO-8601 time -> epoch seconds (UTC when no offset is given). ValueError says what to type."""
    t = text.strip()
    hint = f"give the impact start as an ISO-8601 time in UTC, like `{IMPACT_EXAMPLE}`"
    if not _ISO.fullmatch(t):
        raise ValueError(f"`{t[:40]}` is not a time: {hint}")
    try:
        dt = datetime.fromisoformat(t.upper().replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"`{t[:40]}` is not a real date and time: {hint}") from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return dt.timestamp()


def impact_refusal(
    at: float,
    now: float,
    declared_at: float,
    mitigated_at: float | None,
    resolved_at: float | None,
) -> str | None:
    """Why this impact start cannot be right (None: it can)."""
    if at > now:
        return f"{utc(at)} is in the future (it is {utc(now)} now): give the time the impact started."
    for label, end in (("mitigated", mitigated_at), ("resolved", resolved_at)):
        if end is not None and at > end:
            return (
                f"{utc(at)} is after the incident was {label} ({utc(end)}): impact starts before it stops. "
                "Give the time users or jobs were first hurt."
            )
    if at < declared_at - LOOKBACK_DAYS * 86400:
        return (
            f"{utc(at)} is more than {LOOKBACK_DAYS} days before the declaration ({utc(declared_at)}): "
            "check the date (a postmortem of something that old needs its own incident)."
        )
    return None


def impact_note(at: float, detected_at: float) -> str | None:
    """Accepted, but worth saying: impact that started after the first signal."""
    if at > detected_at:
        return (
            f"Note: that is after detection ({utc(detected_at)}), so TTD reads negative: "
            "the first signal came before the impact."
        )
    return None


# Figures --------------------------------------------------------------------------------------


def parse_hours(text: str) -> float:
    try:
        h = float(text.strip().replace(",", "").replace("_", ""))
    except ValueError:
        raise ValueError(f"`{text.strip()[:30]}` is not a number of hours: use e.g. `postmortem rework 6.5`") from None
    if not math.isfinite(h) or h < 0:
        raise ValueError(f"`{text.strip()[:30]}`: rework is zero or more hours, e.g. `postmortem rework 6.5`")
    if h > 1_000_000:
        raise ValueError(f"{h:g} hours is more than a century of rework: check the figure")
    return h


def parse_count(name: str, text: str) -> int:
    """A non-negative whole number (`12,400` and `12_400` read as 12400)."""
    raw = text.strip().replace(",", "").replace("_", "")
    if not raw.isdigit() or not raw.isascii():
        raise ValueError(
            f"`{name}={text.strip()[:30]}` is not a whole number of zero or more: "
            "use e.g. `postmortem impact-figures requests=120000 tokens=3500000`"
        )
    n = int(raw)
    if n > 10**15:
        raise ValueError(f"`{name}={n}` is too large to be real: check the figure")
    return n


# Causes ---------------------------------------------------------------------------------------


def split_root(text: str) -> tuple[str | None, str]:
    """`class: <name> <text>` -> (name, text after it); no prefix -> (None, text).
    ValueError when the prefix names no valid class."""
    m = _CLASS_PREFIX.match(text)
    if not m:
        return None, text.strip()
    name, rest = m.group(1), m.group(2).strip()
    if not ROOT_CLASS.fullmatch(name) or len(name) > 40:
        want = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "driver"
        raise ValueError(
            f"`{name[:40] or '(nothing)'}` is not a root-cause class: one lowercase word or words joined by "
            f"dashes, like `cause root class: {want} <what went wrong>`"
        )
    if not rest:
        raise ValueError(f"say what the root cause was after the class: `cause root class: {name} <what went wrong>`")
    return name, rest


def root_text(text: str) -> tuple[str | None, str]:
    """The root cause as stored: (class, text with a normalised `class: <name> ` prefix)."""
    cls, rest = split_root(text)
    return cls, (f"class: {cls} {rest}" if cls else rest)


# Action items ---------------------------------------------------------------------------------


def parse_due(text: str) -> date:
    t = text.strip()
    if not _DATE.fullmatch(t):
        raise ValueError(f"`--due {t[:30]}` is not a date: use YYYY-MM-DD, like `--due 2026-12-15`")
    try:
        return date.fromisoformat(t)
    except ValueError:
        raise ValueError(f"`--due {t[:30]}` is not a real date: use YYYY-MM-DD, like `--due 2026-12-15`") from None


def today(now: float) -> date:
    return datetime.fromtimestamp(now, tz=UTC).date()


def due_refusal(due: date, now: float) -> str | None:
    """Why this due date cannot be right (None: it can)."""
    d0 = today(now)
    if due < d0:
        return (
            f"`--due {due.isoformat()}` is in the past (today is {d0.isoformat()} UTC): "
            f"give today or a later date, like `--due {(d0 + timedelta(days=14)).isoformat()}`."
        )
    if due > d0 + timedelta(days=MAX_DUE_DAYS):
        return (
            f"`--due {due.isoformat()}` is more than a year away: an item that far out won't ship. "
            "Pick a date within a year (split the work if it is that big)."
        )
    return None


def parse_action_id(text: str) -> str:
    m = _ACTION_ID.fullmatch(text.strip())
    if not m:
        raise ValueError(f"`{text.strip()[:20]}` is not an action item: name it like `AI-3`")
    return f"AI-{m.group(1)}"


def reminder_base(due: date) -> float:
    """REMIND_HOUR_UTC on the due date."""
    return datetime.combine(due, time(REMIND_HOUR_UTC), tzinfo=UTC).timestamp()


def reminder_at(due: date, round_: int, created_at: float) -> float:
    """When reminder ``round_`` (1, 2, …) is due: round 1 at the base (or at creation, when the item
    was added after it), round k at the base + (k - 1) intervals."""
    base = reminder_base(due)
    if round_ == 1:
        return max(base, created_at)
    return base + (round_ - 1) * REMIND_EVERY_S


def next_round(due: date, round_: int, created_at: float, now: float) -> int:
    """The round after ``round_`` that is still ahead of ``now`` (rounds missed while every process
    was down are not replayed one after another)."""
    nxt = round_ + 1
    while reminder_at(due, nxt, created_at) <= now:
        nxt += 1
    return nxt


def overdue_days(due: date, now: float) -> int:
    return max(0, (today(now) - due).days)


def may_close(actor: str, owner: str, ic: str | None) -> bool:
    """An item is closed by its owner or the incident's IC."""
    return actor == owner or (ic is not None and actor == ic)
