"""Alertmanager's webhook payload (version 4), as Alertmanager builds it for a receiver that groups
by ``cell``: common labels and annotations are what every alert shares, each alert carries its
fingerprint (Alertmanager's FNV-1a of the label set) and a generatorURL whose ``g0.expr`` is the
rule's expression, so the postmortem can look the condition up in Prometheus."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fbworld.drills.model import AlertSpec, Webhook

EXTERNAL_URL = "http://alertmanager.demo:9093"
PROMETHEUS_URL = "http://prometheus.demo:9090"
ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time: a firing alert has no end yet
_FNV_OFFSET, _FNV_PRIME, _MASK = 14695981039346656037, 1099511628211, 2**64 - 1
_SEP = b"\xff"  # prometheus/common model.SeparatorByte


def fingerprint(labels: Mapping[str, str]) -> str:
    """prometheus/common model.LabelSet.Fingerprint, as Alertmanager prints it (%016x)."""
    h = _FNV_OFFSET
    for name in sorted(labels):
        for chunk in (name.encode(), _SEP, labels[name].encode(), _SEP):
            for byte in chunk:
                h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return f"{h:016x}"


def rfc3339(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def generator_url(expr: str | None) -> str:
    base = f"{PROMETHEUS_URL}/graph"
    return f"{base}?g0.expr={quote(expr, safe='')}&g0.tab=1" if expr else base


def _common(maps: Sequence[Mapping[str, str]]) -> dict[str, str]:
    first, *rest = maps
    return {k: v for k, v in first.items() if all(m.get(k) == v for m in rest)}


def payload(hook: Webhook, now: float, started: dict[str, float]) -> dict[str, Any]:
    """The delivery's JSON. ``started`` remembers when each fingerprint first fired, so a later
    delivery of the same alert (still firing, or resolved) keeps its startsAt, as Alertmanager does."""
    alerts = [_alert(a, now, started) for a in hook.alerts]
    common = _common([a.labels for a in hook.alerts])
    group = {"cell": common["cell"]} if "cell" in common else {}
    return {
        "version": "4",
        "groupKey": "{}:{" + ",".join(f'{k}="{v}"' for k, v in group.items()) + "}",
        "truncatedAlerts": 0,
        "status": "firing" if any(a.status == "firing" for a in hook.alerts) else "resolved",
        "receiver": hook.receiver,
        "groupLabels": group,
        "commonLabels": common,
        "commonAnnotations": _common([a.annotations for a in hook.alerts]),
        "externalURL": EXTERNAL_URL,
        "alerts": alerts,
    }


def _alert(a: AlertSpec, now: float, started: dict[str, float]) -> dict[str, Any]:
    fp = fingerprint(a.labels)
    # A resolved alert ends its run: firing again later starts a new one.
    starts = started.pop(fp, now) if a.status == "resolved" else started.setdefault(fp, now)
    return {
        "status": a.status,
        "labels": dict(a.labels),
        "annotations": dict(a.annotations),
        "startsAt": rfc3339(starts),
        "endsAt": rfc3339(now) if a.status == "resolved" else ZERO_TIME,
        "generatorURL": generator_url(a.expr),
        "fingerprint": fp,
    }
