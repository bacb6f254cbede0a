"""What the incident's messages say: the pinned card and the handoff message (plain view models)."""

from __future__ import annotations

from bot.chat import Button, Buttons, Card, Context, Fields, Header, Press, Section, person, quote
from bot.clock import hhmm
from bot.ids import SYSTEM_ACTOR
from bot.incidents.commands import Accept
from bot.incidents.models import HandoffRecord, Incident
from bot.policy.roles import ROLE_TITLES, ROLES

SEV_EMOJI = {1: ":red_circle:", 2: ":large_orange_circle:", 3: ":large_yellow_circle:", 4: ":white_circle:"}


def _roles_text(inc: Incident) -> str:
    lines = [f"*{ROLE_TITLES[r]}*: {person(inc.roles[r].user)}" for r in ROLES if r in inc.roles]
    if "ic" not in inc.roles and inc.is_open:
        # Opened by an alert with nobody on call: the seat is anyone's to take.
        lines.insert(0, f"*{ROLE_TITLES['ic']}*: _empty_: take it with `/incident role ic @you`")
    return "\n".join(lines) or "_no roles assigned_"


def _due_text(inc: Incident) -> str:
    if inc.next_update_due is None:
        return "no update due" if inc.status.value != "active" else "next update: not scheduled"
    return f"next update due {hhmm(inc.next_update_due)} UTC"


def card_text(inc: Incident) -> str:
    # Titles, reasons, products and threads are people's words: quoted, so they never ping or link.
    return f"{inc.id} SEV{inc.sev} {inc.status.value}: {quote(inc.title)} ({_due_text(inc)})"


def incident_card(inc: Incident) -> Card:
    scope = ", ".join(inc.cells) or "no cells named"
    public = quote(" × ".join(x for x in (", ".join(inc.products), ", ".join(inc.regions)) if x))
    if inc.declared_by == SYSTEM_ACTOR:
        ctx = [f"opened by Firebreak from Alertmanager alerts at {hhmm(inc.declared_at)} UTC"]
    else:
        ctx = [f"declared by {person(inc.declared_by)} at {hhmm(inc.declared_at)} UTC"]
    if inc.private:
        ctx.append("private: only those invited see this channel; stakeholders hear only the IC's updates")
    if public:
        ctx.append(f"public scope: {public}")
    if inc.sev_reason:
        ctx.append(f"SEV reason: {quote(inc.sev_reason[:200])}")
    return Card.of(
        Header(f"{inc.id}: {quote(inc.title)}"),
        Fields(
            (
                f"*Severity*\n{SEV_EMOJI[inc.sev]} SEV{inc.sev}",
                f"*Status*\n{inc.status.value}",
                f"*Cells*\n{scope}",
                f"*Comms*\n{_due_text(inc)}",
            )
        ),
        Section(_roles_text(inc)),
        Context((" · ".join(ctx),)),
    )


def handoff_text(h: HandoffRecord, inc: Incident, now: float) -> str:
    # docs/commands.md's `handoff` line: "IC handing to @x at 04:00 UTC; open threads: A, B; next update 04:30 UTC".
    threads = quote(", ".join(h.threads)) if h.threads else "none"
    due = f"{hhmm(inc.next_update_due)} UTC" if inc.next_update_due else "not scheduled"
    return (
        f"{h.role.upper() if h.role == 'ic' else ROLE_TITLES[h.role]} handing to {person(h.to_user)} "
        f"at {hhmm(now)} UTC; "
        f"open threads: {threads}; next update {due}"
    )


def handoff_card(h: HandoffRecord, inc: Incident, now: float) -> Card:
    accept = Button("Accept", Press(Accept(handoff=h.id), h.incident), style="primary")
    return Card.of(Section(handoff_text(h, inc, now)), Buttons(f"handoff:{h.incident}", (accept,)))


def handoff_done_card(h: HandoffRecord, inc: Incident, accepted_at: float) -> Card:
    return Card.of(
        Section(handoff_text(h, inc, h.requested_at)),
        Context((f":white_check_mark: accepted by {person(h.to_user)} at {hhmm(accepted_at)} UTC",)),
    )
