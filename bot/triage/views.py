"""The triage table and the what-changed post, as view models (bot/chat)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.chat import quote
from bot.chat.views import Card, Context, Part, Section
from bot.triage import rules

if TYPE_CHECKING:  # snapshot.py and changed.py import this module
    from bot.triage.changed import CellReport, Report
    from bot.triage.snapshot import Row

# Slack refuses a section over 3,000 characters; a code block's fences and a margin stay under it.
SECTION_MAX = 2900
NOTES_MAX = 9  # context lines under the table (Slack allows 10 elements)
REASON_MAX = 300


def _code(text: str) -> str:
    return f"```\n{text}\n```"


def _tables(cells: Sequence[str], rows: Sequence[Row]) -> list[str]:
    """The table, split by columns into pieces that each fit one section (many cells)."""
    labels = [(quote(r.query.title), [rules.show(r.figures[c], r.query.unit) for c in cells]) for r in rows]
    pieces: list[str] = []
    start = 0
    while start < len(cells):
        end = len(cells)
        while True:
            text = rules.table("", [quote(c) for c in cells[start:end]], [(t, v[start:end]) for t, v in labels])
            if len(_code(text)) <= SECTION_MAX or end - start == 1:
                break
            end -= 1
        pieces.append(text)
        start = end
    return pieces


def _notes(cells: Sequence[str], rows: Sequence[Row]) -> list[str]:
    failed: dict[str, dict[str, list[str]]] = {}  # reason -> query title -> cells
    empty: list[str] = []
    several: list[str] = []
    nan: list[str] = []
    for r in rows:
        bad = [c for c in cells if r.figures[c].state is rules.State.failed]
        for c in bad:
            failed.setdefault(r.figures[c].reason, {}).setdefault(r.query.title, []).append(c)
        none = [c for c in cells if r.figures[c].state is rules.State.no_data]
        if none:
            empty.append(f"{r.query.title} ({', '.join(none)})")
        many = [c for c in cells if r.figures[c].series > 1]
        if many:
            several.append(f"{r.query.title} ({', '.join(many)})")
        odd = [c for c in cells if r.figures[c].value is not None and math.isnan(r.figures[c].value or 0)]
        if odd:
            nan.append(f"{r.query.title} ({', '.join(odd)})")
    total = len(rows) * len(cells)
    notes = []
    for reason, where in failed.items():
        every = sum(len(cs) for cs in where.values()) == total
        what = "every query" if every else "; ".join(f"{title} ({', '.join(cs)})" for title, cs in where.items())
        cut = reason if len(reason) <= REASON_MAX else reason[: REASON_MAX - 1] + "…"
        notes.append(f"`failed`: {quote(what)}: {quote(cut)}")
    if empty:
        notes.append(
            f"`no data` (no series matched: is the exporter scraped, with a `cell` label?): {quote('; '.join(empty))}"
        )
    if nan:
        notes.append(f"NaN (zero divided by zero, e.g. no requests in the window): {quote('; '.join(nan))}")
    if several:
        notes.append(f"Several series, the largest shown: {quote('; '.join(several))}")
    if len(notes) > NOTES_MAX:
        notes = [*notes[: NOTES_MAX - 1], f"… and {len(notes) - NOTES_MAX + 1} more notes in the logs"]
    return notes


def triage_card(
    inc_id: str, cells: Sequence[str], rows: Sequence[Row], when: str, nodes: Sequence[str] = ()
) -> tuple[Card, str]:
    """The post, and the table as plain text (for a reply when the post fails). `nodes`: per cell,
    the GPU nodes that can't take work and who made them so (already quoted)."""
    pieces = _tables(cells, rows)
    parts: list[Part] = [Section(f"*Triage for {inc_id}* at {when} UTC")]
    parts += [Section(_code(p)) for p in pieces]
    if nodes:
        parts += [Section(p) for p in _split("*GPU nodes out of service, by who*\n" + "\n".join(nodes))]
    notes = _notes(cells, rows)
    if notes:
        parts.append(Context(tuple(notes)))
    return Card(tuple(parts)), "\n\n".join(_code(p) for p in pieces)


# ------------------------------------------------------------------------------- what changed


def _split(text: str) -> list[str]:
    """``text`` in pieces of whole lines, each short enough for one section."""
    pieces: list[str] = []
    cur = ""
    for line in text.split("\n"):
        line = line if len(line) <= SECTION_MAX else line[: SECTION_MAX - 1] + "…"
        if cur and len(cur) + 1 + len(line) > SECTION_MAX:
            pieces.append(cur)
            cur = line
        else:
            cur = f"{cur}\n{line}" if cur else line
    if cur:
        pieces.append(cur)
    return pieces


def _cell_text(c: CellReport) -> str:
    lines = [f"*{quote(c.cell)}*"]
    for s in c.streams:
        if s.error is not None:
            lines.append(f"• *{s.title}*: can't be read: {quote(s.error)}")
        elif len(s.items) == 1:
            lines.append(f"• *{s.title}*: {s.items[0]}")
        else:
            lines.append(f"• *{s.title}*:")
            lines += [f"    ◦ {item}" for item in s.items]
    return "\n".join(lines)


def changed_card(r: Report) -> Card:
    """Already-quoted item text: each stream quotes what came from the cluster or Prometheus."""
    head = f"*What changed in the last {rules.hours_label(r.hours)}* for {r.incident}, as of {r.when} UTC"
    parts: list[Part] = [Section(head)]
    parts += [Section(s) for s in r.shifts]
    for c in r.cells:
        parts += [Section(p) for p in _split(_cell_text(c))]
    return Card(tuple(parts))
