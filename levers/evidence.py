"""Evidence: the target as the lever found it, kept before the lever writes (docs/levers.md, "Audit").

The object (less `managedFields`, which only says who wrote which field), its status, and the core/v1
events about it, as read just before the apply. Kept as the audit keeps its entries: scrubbed of
secrets (bot/redact.py) before it is stored, and as long as the incident's audit entries (neither
has a retention setting: both stay until an operator deletes them). What may carry a secret that no
pattern names is not kept at all, only its SHA-256 (`dropped`: JSON pointer -> digest): a container's
`env[].value`, a ConfigMap's or Secret's `data`, `binaryData` and `stringData` values, and kubectl's
last-applied-configuration annotation (a whole earlier copy of the object). Someone holding a value can
check it against the digest (a guessable value can be guessed from it, as from any hash); nobody reads it
from Redis. The record's SHA-256 goes into the lever's `lever.apply` audit entry, so the record can be
checked against the chain. Reading the events is best effort: a lever never fails because they could
not be read; the evidence then says why they are missing.

The events are listed cluster-wide by the target's uid, with the `list events` grant that
`changed` already has (bot/triage/access.py)."""

from __future__ import annotations

import copy
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from bot.clusters import KubeError
from bot.core.services import Services
from bot.redact import scrub
from bot.store import Redis
from levers import messages
from levers.base import Ctx
from levers.plan import canonical
from levers.requests import LeverRequest

EVENTS_KEPT = 50  # the newest ones: a flapping object can carry thousands
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
DATA_FIELDS = ("data", "binaryData", "stringData")  # a ConfigMap's or a Secret's content


def key(incident: str) -> str:
    return f"fb:inc:{{{incident}}}:evidence"  # one hash per incident: REQ-n -> the record


@dataclass(frozen=True)
class Evidence:
    record: dict[str, Any]
    digest: str  # sha256 of the canonical JSON


def digest_of(record: dict[str, Any]) -> str:
    return hashlib.sha256(canonical(record).encode()).hexdigest()


def _sha256(value: Any) -> str:
    """A dropped value's digest: of the string itself (`printf %s "$value" | sha256sum` matches), else of
    its canonical JSON."""
    text = value if isinstance(value, str) else canonical(value)
    return hashlib.sha256(text.encode()).hexdigest()


def _pointer(*parts: str | int) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _drop(parent: dict[str, Any], key: str, at: str, dropped: dict[str, str]) -> None:
    digest = _sha256(parent[key])
    parent[key] = f"[dropped, sha256 {digest}]"
    dropped[at] = digest


def _env_values(value: Any, at: tuple[str | int, ...], dropped: dict[str, str]) -> None:
    """Every container's `env[].value`, wherever a pod template sits (a Rollout's, a JobSet's nested ones)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == "env" and isinstance(v, list):
                for i, var in enumerate(v):
                    if isinstance(var, dict) and "value" in var:
                        _drop(var, "value", _pointer(*at, k, i, "value"), dropped)
            else:
                _env_values(v, (*at, k), dropped)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _env_values(v, (*at, i), dropped)


def kept(obj: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The object as evidence keeps it, and what was dropped from it (JSON pointer -> SHA-256)."""
    target = copy.deepcopy(obj)
    meta: dict[str, Any] = target["metadata"] if isinstance(target.get("metadata"), dict) else {}
    meta.pop("managedFields", None)
    dropped: dict[str, str] = {}
    annotations = meta.get("annotations")
    if isinstance(annotations, dict) and LAST_APPLIED in annotations:
        _drop(annotations, LAST_APPLIED, _pointer("metadata", "annotations", LAST_APPLIED), dropped)
    for fld in DATA_FIELDS:
        content = target.get(fld)
        if isinstance(content, dict):
            for k in list(content):
                _drop(content, k, _pointer(fld, k), dropped)
    _env_values({k: v for k, v in target.items() if k != "metadata"}, (), dropped)
    return target, dropped


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
    target, dropped = kept(obj)
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
    # Scrubbed like the audit's entries: a token in an annotation, an arg or an event message is redacted.
    record: dict[str, Any] = scrub(
        {
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
            "dropped": dropped,
        }
    )
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
