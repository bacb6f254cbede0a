"""Process metrics served on /metrics (prometheus_client, this registry only).

The names are a contract: deploy/'s PrometheusRule alerts on them, and docs/operating.md
("Telemetry and shutdown") lists them. Counters are per process; sum them across
replicas. ``firebreak_approvals_pending`` is read from Redis at scrape time, so
every replica reports the same cluster-wide value: aggregate it with max, not sum.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

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
# Slack shows the person an error when the ack takes over 3 s: the buckets are dense around it.
ACK_SECONDS = Histogram(
    "firebreak_ack_seconds",
    "Slack request received to its 2xx answer (the ack), HTTP mode",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 6.0, 10.0),
    registry=REGISTRY,
)
LEVER_EXECUTIONS = Counter(
    "firebreak_lever_executions",
    "Lever requests settled, by lever and outcome (done/verified, done/unverified, failed, stale, undone, undo_failed)",
    ["lever", "outcome"],
    registry=REGISTRY,
)
APPROVALS_PENDING = Gauge(
    "firebreak_approvals_pending",
    "Approval windows open (lever requests and break-glass grants awaiting votes), cluster-wide, read at scrape",
    registry=REGISTRY,
)
# Set by each replica's signer (bot/audit/sign.py Checkpointer): 0 while the newest signed checkpoint
# covers the chain head, else how long this replica has seen the head past it. It saws between 0 and
# the cadence (60 s) in normal running; growing past it, something stops the signing (a claim held
# in Redis, a failing Redis, a key the replicas cannot use). Aggregate it with max.
AUDIT_CHECKPOINT_AGE = Gauge(
    "firebreak_audit_checkpoint_age_seconds",
    "Seconds this replica has seen the audit chain head without a signed checkpoint covering it (0: covered)",
    registry=REGISTRY,
)
REMINDER_LATENESS = Histogram(
    "firebreak_reminder_lateness_seconds",
    "Due time to posted, for update reminders and escalations",
    ["kind"],
    buckets=(0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0),
    registry=REGISTRY,
)
REMINDERS_LATE = Counter(
    "firebreak_reminders_late",
    "Reminders and escalations posted later than the scheduler's tolerance after their due",
    ["kind"],
    registry=REGISTRY,
)
SCHEDULER_LAG = Histogram(
    "firebreak_scheduler_lag_seconds",
    "A timed job's due time to its handler starting",
    ["kind"],
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0),
    registry=REGISTRY,
)
# The outbound integrations' metrics (bot/runtime.py INTEGRATIONS names each one's): what each
# service answered when it did not answer as asked, so a dashboard tells "Slack is failing" from
# "Kubernetes in us-east-3 is" from "Prometheus is" without reading logs.
SLACK_API_ERRORS = Counter(
    "firebreak_slack_api_errors",
    "Slack Web API error answers, each attempt counted (retried or not): code is the HTTP status, "
    "Slack's error string on a 200 with ok=false, or timeout / unreachable",
    ["method", "code"],
    registry=REGISTRY,
)
KUBE_API_ERRORS = Counter(
    "firebreak_kube_api_errors",
    "Kubernetes API error answers, each attempt counted (retried or not): code is the HTTP status, "
    "or timeout / unreachable / credentials",
    ["context", "code"],
    registry=REGISTRY,
)
PROMETHEUS_QUERY_ERRORS = Counter(
    "firebreak_prometheus_query_errors",
    "Prometheus queries left without an answer, by endpoint (query, query_range) and why: timeout, "
    "unreachable, tls, auth, rejected, http, not_json, malformed, ca_file, token_file",
    ["endpoint", "why"],
    registry=REGISTRY,
)


def lever_settled(lever: str, state: str, verified: bool | None = None) -> None:
    """A lever request reached an outcome: ``state`` is its new state (done, failed, stale, undone)
    or ``undo_failed``; a ``done`` is split by its read-back."""
    outcome = f"done/{'verified' if verified else 'unverified'}" if state == "done" else state
    LEVER_EXECUTIONS.labels(lever, outcome).inc()


def reminder_posted(kind: str, lateness: float, claimed_late: bool, tolerance: float) -> None:
    """A reminder (``remind``) or escalation (``escalate``) was posted ``lateness`` seconds after
    its due. Late: the scheduler delivered it late (``claimed_late``, e.g. every replica was down),
    or it was posted more than ``tolerance`` (the scheduler's) after its due."""
    REMINDER_LATENESS.labels(kind).observe(max(0.0, lateness))
    if claimed_late or lateness > tolerance:
        REMINDERS_LATE.labels(kind).inc()
