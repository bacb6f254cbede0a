"""Alertmanager's webhook payload (version 4): checked, and the alerts Firebreak acts on taken out.

Pure: the webhook (webhook.py) runs it before answering, so a bad payload gets a clear 400; the
delivery job (jobs.py) runs it again on the body the webhook stored. Only the fields Firebreak
reads are checked; others (Alertmanager adds some across versions) are ignored. Checked by hand
rather than by a model: it runs before the answer, for every alert of a storm.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from bot.signals import rules


class Refused(Exception):
    """The payload is not one Firebreak takes: the HTTP status and a reason naming what is wrong."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status, self.reason = status, reason


def _bad(where: str, what: str) -> Refused:
    return Refused(400, f"bad_payload: {where}: {what}")


def _strings(value: object, where: str) -> dict[str, str]:
    # A JSON object's keys are strings already; its values must be too (str.join refuses anything
    # else, and is the quickest check there is: a storm's every label passes here).
    if isinstance(value, dict):
        try:
            "".join(value.values())
        except TypeError:
            pass
        else:
            return value
    raise _bad(where, "must be an object of strings")


def _string(a: dict[str, Any], name: str, where: str, limit: int) -> str:
    v = a.get(name)
    if v is None:
        return ""
    if type(v) is not str or len(v) > limit:
        raise _bad(f"{where}.{name}", f"must be a string of at most {limit} characters")
    return v


def fingerprint_of(labels: dict[str, str]) -> str:
    """For an alert sent without one (Alertmanager always sends it): its label set, hashed."""
    canon = "\x00".join(f"{k}\x01{v}" for k, v in sorted(labels.items()))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


_STATUSES = ("firing", "resolved")
_LIMITS = (("fingerprint", 128), ("startsAt", 64), ("endsAt", 64), ("generatorURL", 8192))


def _explain(a: object, i: int) -> Refused:
    """What is wrong with an alert the quick check refused, field by field."""
    where = f"alerts.{i}"
    if not isinstance(a, dict):
        return _bad(where, "must be an object")
    if a.get("status") not in _STATUSES:
        return _bad(f"{where}.status", 'must be "firing" or "resolved"')
    _strings(a.get("labels"), f"{where}.labels")
    _strings(a.get("annotations") or {}, f"{where}.annotations")
    for name, limit in _LIMITS:
        _string(a, name, where, limit)
    return _bad(where, "is not an alert")  # not reached: one of the checks above raised


def _alert(a: Any, i: int) -> dict[str, Any]:
    """One alert of the payload, checked, in the job's shape (models.Alert). The quick path is one
    expression per alert (a storm's every alert passes here before the answer); _explain says
    what is wrong when it fails."""
    try:
        status, labels, notes = a.get("status"), a.get("labels"), a.get("annotations") or {}
        fp, starts, ends, url = (a.get(name) or "" for name, _ in _LIMITS)
        "".join(labels.values())  # values must be strings (str.join refuses anything else)
        "".join(notes.values())
        ok = (
            status in _STATUSES
            and type(labels) is dict
            and type(notes) is dict
            and len(fp) <= 128
            and len(starts) <= 64
            and len(ends) <= 64
            and len(url) <= 8192
            and "".join((fp, starts, ends, url)) is not None
        )
    except (AttributeError, TypeError):
        ok = False
    if not ok:
        raise _explain(a, i)
    return {
        "fingerprint": fp or fingerprint_of(labels),
        "status": status,
        "labels": labels,
        "summary": notes.get("summary", ""),
        "starts_at": starts,
        # A firing alert's endsAt is Alertmanager's guess at a timeout (or year 1), not an end.
        "ends_at": ends if status == "resolved" else "",
        "generator_url": url,
    }


@dataclass(frozen=True)
class Parsed:
    """A checked payload: the alerts Firebreak acts on (pages, security alerts) in the job's shape."""

    alerts: int  # in the payload
    handled: list[dict[str, Any]]
    summary: str  # commonAnnotations.summary
    truncated: int
    group_key: str


def parse(text: str) -> Parsed:
    """The payload, or Refused(400) naming what is wrong."""
    try:
        data: Any = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        raise Refused(400, "malformed_json: the body is not JSON") from None
    if not isinstance(data, dict):
        raise Refused(400, "not_an_object: the body must be a JSON object (Alertmanager's webhook payload)")
    version = data.get("version")
    if version != "4":
        shown = json.dumps(version)[:20]
        raise Refused(400, f"unsupported_version: version {shown}; Firebreak takes Alertmanager's webhook version 4")
    alerts = data.get("alerts")
    if not isinstance(alerts, list):
        raise _bad("alerts", "must be a list")
    common = _strings(data.get("commonAnnotations") or {}, "commonAnnotations")
    truncated = data.get("truncatedAlerts") or 0
    if type(truncated) is not int or truncated < 0:
        raise _bad("truncatedAlerts", "must be a whole number, 0 or more")
    group_key = data.get("groupKey") or ""
    if type(group_key) is not str:
        raise _bad("groupKey", "must be a string")
    checked = [_alert(a, i) for i, a in enumerate(alerts)]
    return Parsed(
        alerts=len(alerts),
        handled=[a for a in checked if rules.handled(a["labels"])],
        summary=common.get("summary", ""),
        truncated=truncated,
        group_key=group_key[:500],
    )
