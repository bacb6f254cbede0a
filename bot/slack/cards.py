"""Block Kit views of the incident, built with slack_sdk.models (validated on send)."""
from __future__ import annotations

from typing import Sequence

from slack_sdk.models.blocks import (
    ActionsBlock,
    Block,
    ButtonElement,
    ContextBlock,
    HeaderBlock,
    MarkdownTextObject,
    SectionBlock,
)

from bot.clock import hhmm
from bot.incidents.models import HandoffRecord, Incident
from bot.incidents.roles import ROLE_TITLES, ROLES

SEV_EMOJI = {1: ":red_circle:", 2: ":large_orange_circle:", 3: ":large_yellow_circle:", 4: ":white_circle:"}


def _roles_text(inc: Incident) -> str:
    lines = [f"*{ROLE_TITLES[r]}*: <@{inc.roles[r].user}>" for r in ROLES if r in inc.roles]
    return "\n".join(lines) or "_no roles assigned_"


def _due_text(inc: Incident) -> str:
    if inc.next_update_due is None:
        return "no update due" if inc.status.value != "active" else "next update: not scheduled"
    return f"next update due {hhmm(inc.next_update_due)} UTC"


def card_text(inc: Incident) -> str:
    return f"{inc.id} SEV{inc.sev} {inc.status.value}: {inc.title} ({_due_text(inc)})"


def incident_card(inc: Incident) -> list[Block]:
    scope = ", ".join(inc.cells) or "no cells named"
    public = " × ".join(x for x in (", ".join(inc.products), ", ".join(inc.regions)) if x)
    fields = [
        MarkdownTextObject(text=f"*Severity*\n{SEV_EMOJI[inc.sev]} SEV{inc.sev}"),
        MarkdownTextObject(text=f"*Status*\n{inc.status.value}"),
        MarkdownTextObject(text=f"*Cells*\n{scope}"),
        MarkdownTextObject(text=f"*Comms*\n{_due_text(inc)}"),
    ]
    blocks: list[Block] = [
        HeaderBlock(text=f"{inc.id}: {inc.title}"[:150]),
        SectionBlock(fields=fields),
        SectionBlock(text=MarkdownTextObject(text=_roles_text(inc))),
    ]
    ctx = [f"declared by <@{inc.declared_by}> at {hhmm(inc.declared_at)} UTC"]
    if public:
        ctx.append(f"public scope: {public}")
    if inc.sev_reason:
        ctx.append(f"SEV reason: {inc.sev_reason[:200]}")
    blocks.append(ContextBlock(elements=[MarkdownTextObject(text=" · ".join(ctx))]))
    return blocks


def handoff_text(h: HandoffRecord, inc: Incident, now: float) -> str:
    # DESIGN's shape: "IC handing to @x at 04:00 UTC; open threads: A, B; next update 04:30 UTC".
    threads = ", ".join(h.threads) if h.threads else "none"
    due = f"{hhmm(inc.next_update_due)} UTC" if inc.next_update_due else "not scheduled"
    return (
        f"{h.role.upper() if h.role == 'ic' else ROLE_TITLES[h.role]} handing to <@{h.to_user}> at {hhmm(now)} UTC; "
        f"open threads: {threads}; next update {due}"
    )


def handoff_blocks(h: HandoffRecord, inc: Incident, now: float) -> list[Block]:
    return [
        SectionBlock(text=MarkdownTextObject(text=handoff_text(h, inc, now))),
        ActionsBlock(
            block_id=f"handoff:{h.incident}",
            elements=[
                ButtonElement(
                    text="Accept", action_id="handoff.accept", value=f"{h.incident}/{h.id}", style="primary"
                )
            ],
        ),
    ]


def handoff_done_blocks(h: HandoffRecord, inc: Incident, accepted_at: float) -> list[Block]:
    return [
        SectionBlock(text=MarkdownTextObject(text=handoff_text(h, inc, h.requested_at))),
        ContextBlock(
            elements=[MarkdownTextObject(text=f":white_check_mark: accepted by <@{h.to_user}> at {hhmm(accepted_at)} UTC")]
        ),
    ]


def lines(text: str) -> Sequence[Block]:
    return [SectionBlock(text=MarkdownTextObject(text=text[:3000]))]
