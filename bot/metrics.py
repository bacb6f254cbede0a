"""Process metrics served on /metrics (prometheus_client)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram

REGISTRY = CollectorRegistry()

REQUESTS = Counter(
    "firebreak_requests",
    "Requests executed, by command and result",
    ["command", "result", "source"],
    registry=REGISTRY,
)
REQUEST_SECONDS = Histogram(
    "firebreak_request_seconds",
    "Time to execute a request after its ack",
    ["command"],
    registry=REGISTRY,
)
