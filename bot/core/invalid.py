"""Auditing input that never became a request (a usage error, an unknown button or form).

Such input has no command to execute, so it gets its own audit entry here, tied
to the incident of the channel it came from so `audit export --incident` shows
it. Best effort: the person already has their answer, so a store failure is
logged, not raised.

Each string of the detail is scrubbed (bot/redact.py) and only then cut to
KEEP characters: cut first, a secret at the cut would lose the tail its pattern
needs and its head would be stored.
"""

from __future__ import annotations

from typing import Any

from bot import logs, redact
from bot.core.services import Services

log = logs.get(__name__)

KEEP = 500  # characters of each string kept


def _kept(value: Any) -> Any:
    if isinstance(value, str):
        return redact.scrub_text(value)[:KEEP]
    if isinstance(value, dict):
        return {k: _kept(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_kept(v) for v in value]
    return value


async def record(
    svc: Services,
    action: str,
    *,
    actor: str,
    detail: dict[str, Any],
    channel_id: str | None = None,
    incident: str | None = None,
) -> None:
    try:
        if incident is None and channel_id:
            incident = await svc.incidents.by_channel(channel_id)
        await svc.audit.append(action, actor=actor, incident=incident, detail=_kept(detail))
    except Exception:  # the refusal is answered whether or not its audit entry could be written
        log.exception("invalid_input_not_audited", action=action)
