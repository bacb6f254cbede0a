"""`/incident postmortem`: the document (document.py) posted as a Markdown file in the incident
channel through Slack's external upload flow (the Chat port's upload_file), with a one-line
comment. The same bytes `firebreak postmortem INC-n` prints. Nothing is stored: posting again
posts the postmortem as it is then (each post is a new file)."""

from __future__ import annotations

from bot import logs
from bot.chat import ChatError
from bot.core.request import Outcome, Refusal, Request
from bot.core.services import Services
from bot.incidents.models import Incident
from bot.postmortem import document, figures
from bot.postmortem.commands import Postmortem
from bot.postmortem.document import SHIPPING_KINDS, Figures, Gathered

log = logs.get(__name__)


def filename(inc_id: str, draft: bool) -> str:
    return f"{inc_id}-postmortem{'-draft' if draft else ''}.md"


def comment(g: Gathered) -> str:
    """One line under the file: the figures people look for first, and what is still missing."""
    f = Figures.of(g)
    inc = g.inc
    parts = [f"TTD {figures.duration(f.ttd)}"]
    if f.ttr is not None:
        parts.append(f"TTR {figures.duration(f.ttr)}")
    if f.gpu.recorded:
        parts.append(f"GPU-hours lost: {figures.thousands(f.gpu.total)}")
    open_items = sum(1 for it in g.items if it.state == "open")
    parts.append(f"{len(g.items)} action item{'s' if len(g.items) != 1 else ''} ({open_items} open)")
    missing = [c for c in ("trigger", "root", "detection") if c not in g.pm.causes]
    if missing:
        parts.append("missing: " + ", ".join(f"cause {c}" for c in missing))
    elif not any(it.kind in SHIPPING_KINDS for it in g.items):
        parts.append("no alert, runbook, guardrail or game-day item yet")
    head = f"DRAFT postmortem for {inc.id} (still {inc.status.value})" if inc.is_open else f"Postmortem for {inc.id}"
    return f"{head}: " + " · ".join(parts)


async def postmortem(svc: Services, req: Request, cmd: Postmortem, inc: Incident) -> Outcome:
    """Build the document and share it in the incident channel."""
    if not inc.channel_id:
        raise Refusal(f"{inc.id} has no channel to post in; run `firebreak postmortem {inc.id}` to print it.")
    g = await document.gather(svc, inc.id)
    text = document.render(g)
    name = filename(inc.id, inc.is_open)
    title = f"{inc.id} postmortem" + (" (DRAFT)" if inc.is_open else "")
    line = comment(g)
    audit = {
        "file_name": name,
        "bytes": len(text.encode()),
        "draft": inc.is_open,
        "impact_start": g.impact.at,
        "impact_source": g.impact.source,
    }
    try:
        file_id = await svc.chat.upload_file(inc.channel_id, name, text, title, comment=line)
    except ChatError as e:
        log.warning("postmortem_upload_failed", method=e.method, error=e.error)
        return Outcome(
            result="error",
            message=f"Slack refused the postmortem file ({e.method}: {e.error}); nothing was posted. "
            f"Try again, or print it with `firebreak postmortem {inc.id}`.",
            audit={**audit, "slack_error": e.error},
        )
    draft = " It is a DRAFT: the incident is still open." if inc.is_open else ""
    return Outcome(
        message=f"Posted {inc.id}'s postmortem in the channel as `{name}`.{draft}",
        audit={**audit, "file": file_id},
    )
