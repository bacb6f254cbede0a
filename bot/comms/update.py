"""`/incident update <text>`: check public granularity, record (resets the cadence), post.

The update goes to the incident channel and, as the public summary, to
FIREBREAK_STAKEHOLDER_CHANNEL. Text naming a cell or a node is refused before
anything is recorded or posted, with the words and a product × region rewrite.
Text holding a secret never gets here: every command's text is refused when it is
parsed (bot/core/registry.py, the Command base in bot/core/request.py), naming the
kind, never the secret; the audit log scrubs each entry's detail with the same
patterns (bot/redact.py) before it is hashed and stored.

The reminder's "Post update" button opens the same update as a form, prefilled with the
last one; the form is refused on the field by the same checks (``parse_form``, ``check_form``).
"""

from __future__ import annotations

from pydantic import ValidationError

from bot.chat import ChatError, FieldError, channel_ref, person, quote
from bot.clock import hhmm
from bot.comms import public, views
from bot.comms.commands import UpdateForm
from bot.comms.nodes import quarantined_nodes
from bot.comms.store import UpdateRecorded, store
from bot.core.eligibility import Verdict, eligibility
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.commands import Update
from bot.incidents.models import Incident
from bot.incidents.posts import announce, joined, refresh_card
from bot.incidents.store import repo
from bot.policy.models import first_error


async def public_problem(svc: Services, inc: Incident, text: str) -> tuple[str, list[str]] | None:
    """Why ``text`` cannot be the public summary (message, offending words), or None."""
    rules, nodes = svc.policy.comms.public, await quarantined_nodes(svc, inc)
    bad = public.offending(text, rules, [*inc.cells, *nodes])
    if bad:
        words = ", ".join(f"`{quote(w)}`" for w in bad)
        return (
            f"Not posted: public updates are product × region, and this names {words}. "
            f"Try: `/incident update {quote(public.rewrite(text, bad, rules, nodes, inc))}`",
            bad,
        )
    links = public.unlisted_links(text, rules, inc)
    if links:
        sites = " or ".join(f"`{quote(s)}`" for s in rules.links)
        return (
            f"Not posted: a public update links only to {sites + ' or ' if sites else ''}this incident's "
            f"channel (policies/comms.yaml public.links), and this links to "
            f"{', '.join(f'`{quote(w)}`' for w in links)}. Write it without the link, or ask an admin to add "
            "the site to public.links.",
            links,
        )
    return None


async def _publish(
    svc: Services, inc: Incident, text: str, now: float, posted_here: bool, actor: str, may: Verdict
) -> str:
    """Post the public summary; returns what the reply should say about it. Only someone in the
    `publish` seat (``may``) speaks to stakeholders as Firebreak: anyone may declare and so be an IC.
    A private incident's update goes out only when its IC posts it: that is the IC's decision."""
    if not may.ok:
        # Not Verdict.refusal: its "nothing changed" is untrue here, the update is in the channel.
        until = "; nothing is published until it answers" if may.unanswered else ""
        return f"Not posted to the stakeholder channel: {may.why}{until}."
    if inc.private and actor != inc.holder("ic"):
        return f"Not posted to the stakeholder channel: {inc.id} is private, so only its IC's own updates go there."
    channel = svc.settings.firebreak_stakeholder_channel
    if not channel:
        if not posted_here:
            return "No stakeholder channel either: FIREBREAK_STAKEHOLDER_CHANNEL is not set."
        return "Posted in the incident channel only: FIREBREAK_STAKEHOLDER_CHANNEL is not set."
    scope = " · ".join(x for x in (", ".join(inc.products), public.region_of(inc)) if x and x != "<region>")
    head = f"*{inc.id}* ({quote(scope)})" if scope else f"*{inc.id}*"
    try:
        # Posted where the poster may not even be a member: their words must not ping or link.
        await svc.chat.post(channel, f":mega: {head} update at {hhmm(now)} UTC: {quote(text)}")
    except ChatError as f:
        return f"(the stakeholder channel post failed: {f.error}; post it there by hand)"
    return f"Also posted to {channel_ref(channel)}."


async def update(svc: Services, req: Request, cmd: Update, inc: Incident) -> Outcome:
    bad = await public_problem(svc, inc, cmd.text)
    if bad:
        raise Refusal(bad[0], offending=bad[1])
    now = svc.clock.now()
    change = await store(svc).record_update(inc.id, cmd.text, now, svc.policy.cadence.interval_minutes)
    if change.code is not UpdateRecorded.RECORDED:
        raise Refusal(f"{inc.id} is resolved; updates now go in the postmortem.")
    warn = await announce(
        svc, inc.id, f":mega: *Update* from {person(req.actor)} ({inc.id}, SEV{inc.sev}): {quote(cmd.text)}"
    )
    # Checked after the update is recorded: a refused publish still keeps the incident's cadence.
    may = await eligibility(svc).check(req.actor, "publish", inc.cells)
    published = await _publish(svc, inc, cmd.text, now, posted_here=warn is None, actor=req.actor, may=may)
    warn2 = await refresh_card(svc, inc.id)
    due = f" Next update due {hhmm(change.due)} UTC." if change.due else ""
    return Outcome(
        # Recorded (the cadence clock restarts) even when the channel post failed: say which.
        message=joined(f"Update {'recorded' if warn else 'posted'}.{due}", warn, published, warn2),
        audit={
            "next_update_due": change.due,
            "stakeholder_channel": svc.settings.firebreak_stakeholder_channel,
            "stakeholder_allowed": may.ok and (not inc.private or req.actor == inc.holder("ic")),
            "publish": "eligible" if may.ok else may.audit()["eligibility"],
        },
    )


# The update form (the reminder's "Post update" button) -----------------------------------------


async def update_form(svc: Services, req: Request, cmd: UpdateForm, inc: Incident) -> Outcome:
    if not req.trigger_id:
        raise Refusal("Use `/incident update <text>` to post an update.")
    try:
        await svc.chat.open_form(req.trigger_id, views.update_form(inc.id, inc.title, inc.last_update_text))
    except ChatError as f:
        raise Refusal(f"Slack did not open the form ({f.error}); use `/incident update <text>`.") from None
    return Outcome(message="", audit={"prefilled": bool(inc.last_update_text)})


def parse_form(values: dict[str, str]) -> Update:
    """The submitted form -> the update; bad input stays on the form with the reason."""
    text = values.get("text", "").strip()
    if not text:
        raise FieldError("text", "Write the update: what users see, in which product and region.")
    if len(text) > 3000:
        raise FieldError("text", "Keep it under 3000 characters.")
    try:
        return Update(text=text)
    except ValidationError as exc:  # a secret or a control character: said on the field
        raise FieldError("text", first_error(exc).message) from None


async def check_form(svc: Services, cmd: Update, inc_id: str | None) -> FieldError | None:
    """The rules `/incident update` applies, run on the form itself so the person keeps what they typed."""
    inc = await repo(svc).get(inc_id) if inc_id else None
    if inc is None:
        return None
    bad = await public_problem(svc, inc, cmd.text)
    return FieldError("text", bad[0][:2000]) if bad else None
