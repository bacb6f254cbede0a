"""What a delivery job carries: of each alert Firebreak acts on, what the incident records
(AlertRecord): fingerprint, status, labels, summary, startsAt, endsAt, generatorURL, as
payload.parse takes them out of Alertmanager's payload.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class AlertRecord(BaseModel):
    """One Alertmanager alert as an incident keeps it (per fingerprint), for the timeline and the
    postmortem: when it started (``starts_at``, RFC 3339 as Alertmanager sent it), where its
    expression lives (``generator_url``), its labels, and when Firebreak heard of it."""

    fingerprint: str
    status: str  # firing | resolved
    alertname: str
    labels: dict[str, str] = Field(default_factory=dict)
    summary: str = ""  # its annotations.summary
    starts_at: str = ""
    ends_at: str = ""  # set once resolved
    generator_url: str = ""
    received_at: float  # the arrival of the delivery that brought it (firing: its detection)
    resolved_at: float | None = None  # the arrival of the delivery that said it resolved


class Alert(BaseModel):
    """One alert as a delivery job carries it."""

    model_config = ConfigDict(frozen=True)

    fingerprint: str
    status: Literal["firing", "resolved"]
    labels: dict[str, str]
    summary: str = ""
    starts_at: str = ""
    ends_at: str = ""
    generator_url: str = ""

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "") or "(no alertname)"

    def record(self, received_at: float) -> AlertRecord:
        return AlertRecord(
            fingerprint=self.fingerprint,
            status=self.status,
            alertname=self.alertname,
            labels=self.labels,
            summary=self.summary,
            starts_at=self.starts_at,
            ends_at=self.ends_at,
            generator_url=self.generator_url,
            received_at=received_at,
        )


class Delivery(BaseModel):
    """One webhook call, as its job reads it back (webhook.py stored the body before answering)."""

    id: str
    received_at: float
    group_key: str = ""
    summary: str = ""  # commonAnnotations.summary
    truncated: int = 0  # alerts Alertmanager left out (its max_alerts)
    alerts: list[Alert]
