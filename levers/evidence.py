"""Evidence: the target as the lever found it, kept before the lever writes (DESIGN.md section 9).

The object (less `managedFields`, which only says who wrote which field), its status, and the core/v1
events about it, as read just before the apply. Stored with the incident, as long as its audit
entries (neither expires), and its SHA-256 goes into the lever's `lever.apply` audit entry, so
the record can be checked against the chain. Reading the events is best effort: a lever never
fails because they could not be read; the evidence then says why they are missing.

The events are listed cluster-wide by the target's uid, with the `list events` grant that
`changed` already has (bot/triage/access.py)."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from bot.core.services import Services
from bot.store import Redis
from levers import messages
from levers.base import Ctx
from levers.kube import KubeError
from levers.plan import canonical
from levers.requests import LeverRequest

EVENTS_KEPT = 50  # the newest ones: a flapping object can carry thousands


def key(incident: str) -> str:
    return f"fb:inc:{{{incident}}}:evidence"  # one hash per incident: REQ-n -> the record


@dataclass(frozen=True)
class Evidence:
    record: dict[str, Any]
    digest: str  # sha256 of the canonical JSON


def digest_of(record: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(record).encode()).hexdigest()


def _event(e: dict[str, Any]) -> dict[str, Any]:
    meta = e.get("metadata") or {}
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "type": e.get("type"),
        "reason": e.get("reason"),
        "message": e.get("message"),
        "count": e.get("count"),
        "firstTimestamp": e.get("firstTimestamp"),
        "lastTimestamp": e.get("lastTimestamp") or e.get("eventTime"),
        "source": e.get("source") or {"component": e.get("reportingComponent")},
    }


async def capture(svc: Services, ctx: Ctx, rec: LeverRequest, obj: dict[str, Any]) -> Evidence:
    """Read the target's events, store the evidence with the incident, return it with its digest."""
    target = copy.deepcopy(obj)
    (target.get("metadata") or {}).pop("managedFields", None)
    uid = (obj.get("metadata") or {}).get("uid")
    events: list[dict[str, Any]] = []
    note = ""
    if not uid:
        note = "events not read: the object has no uid"
    else:
        try:
            items = await ctx.kube.list_all("/api/v1/events", {"fieldSelector": f"involvedObject.uid={uid}"})
            items.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime") or ""))
            events = [_event(e) for e in items[-EVENTS_KEPT:]]
        except KubeError as e:
            note = f"events not read: {messages.api_error(e)}"
    record = {
        "request": rec.id,
        "incident": rec.incident,
        "lever": rec.lever,
        "target": rec.target,
        "cell": rec.cell,
        "context": rec.context,
        "taken_at": svc.clock.now(),
        "object": target,
        "status": target.get("status"),
        "events": events,
        "events_note": note,
    }
    ev = Evidence(record, digest_of(record))
    await svc.redis.hset(key(rec.incident), rec.id, canonical(record))
    return ev


async def read(r: Redis, incident: str, request: str | None = None) -> list[dict[str, Any]]:
    """The incident's evidence records (one request's, or all), oldest request first, each with its
    digest recomputed from what is stored."""
    raw = await r.hgetall(key(incident))
    out = []
    for req, text in raw.items():
        if request is not None and req != request:
            continue
        record = json.loads(text)
        out.append({"digest": digest_of(record), **record})
    return sorted(out, key=lambda r: int(str(r["request"]).split("-")[-1]))
