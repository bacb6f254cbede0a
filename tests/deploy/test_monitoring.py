"""The Prometheus Operator objects (deploy/components/monitoring): valid against their CRDs, the
alerts' PromQL accepted by promtool, and the alerts firing on the series Firebreak serves."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from prometheus_client.metrics import MetricWrapperBase

from bot import metrics
from tests.support.deploy import one, render
from tests.support.services import find_binary

CRDS = Path(__file__).resolve().parent / "crds"
# The series the brief for the alerts names: each is alerted on.
ALERTED = {
    "firebreak_requests_total",
    "firebreak_ack_seconds",
    "firebreak_lever_executions_total",
    "firebreak_approvals_pending",
    "firebreak_reminders_late_total",
    "firebreak_scheduler_lag_seconds",
    "firebreak_slack_api_errors_total",
    "firebreak_kube_api_errors_total",
    "firebreak_audit_checkpoint_age_seconds",
}


def served() -> dict[str, set[str]]:
    """{series name: its labels} for every metric bot/metrics.py registers (a counter's series ends in
    _total; a histogram's buckets add `le`)."""
    out: dict[str, set[str]] = {}
    for m in vars(metrics).values():
        if isinstance(m, MetricWrapperBase):
            labels = set(m._labelnames)
            if m._type == "counter":
                out[f"{m._name}_total"] = labels
            elif m._type == "histogram":
                out[m._name] = labels | {"le"}
            else:
                out[m._name] = labels
    return out


ALERTS = {
    "FirebreakDown",
    "FirebreakReplicaDown",
    "FirebreakNotReady",
    "FirebreakCommandErrors",
    "FirebreakSlowAcks",
    "FirebreakRemindersLate",
    "FirebreakSchedulerLag",
    "FirebreakApprovalsPiling",
    "FirebreakLeverFailures",
    "FirebreakSlackApiErrors",
    "FirebreakKubeApiErrors",
    "FirebreakAuditCheckpointsStalled",
}


def crd_schema(kind: str) -> dict[str, Any]:
    for f in CRDS.glob("*.yaml"):
        crd = yaml.safe_load(f.read_text())
        if crd["spec"]["names"]["kind"] == kind:
            [v1] = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
            return v1["schema"]["openAPIV3Schema"]
    raise LookupError(kind)


def unknown_fields(obj: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Fields the API server would prune (or refuse, with kubectl's strict field validation): not in the
    structural schema and not under x-kubernetes-preserve-unknown-fields. jsonschema alone lets them by,
    because CRD schemas say nothing of additionalProperties."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    out: list[str] = []
    if isinstance(obj, dict):
        props, extra = schema.get("properties"), schema.get("additionalProperties")
        for key, value in obj.items():
            if path == "" and key == "metadata":
                continue  # ObjectMeta: the API server's own
            if props is not None and key in props:
                out += unknown_fields(value, props[key], f"{path}.{key}")
            elif isinstance(extra, dict):
                out += unknown_fields(value, extra, f"{path}.{key}")
            elif extra is not True:
                out.append(f"{path}.{key}")
    elif isinstance(obj, list) and isinstance(schema.get("items"), dict):
        for i, value in enumerate(obj):
            out += unknown_fields(value, schema["items"], f"{path}[{i}]")
    return out


def check(obj: dict[str, Any]) -> list[str]:
    schema = crd_schema(obj["kind"])
    errors = [f"{'.'.join(map(str, e.path))}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(obj)]
    return errors + [f"{p}: unknown field" for p in unknown_fields(obj, schema)]


def monitoring() -> list[dict[str, Any]]:
    return render("overlays/fleet")


@pytest.mark.parametrize("kind", ["PrometheusRule", "ServiceMonitor"])
def test_valid_against_the_prometheus_operator_crd(kind):
    assert check(one(monitoring(), kind, "firebreak")) == []


def test_the_crd_check_catches_a_typo_and_a_wrong_type():
    rule = one(monitoring(), "PrometheusRule", "firebreak")
    rule["spec"]["groups"][0]["rules"][0]["for_"] = "2m"
    rule["spec"]["groups"][0]["interval"] = 30
    problems = check(rule)
    assert any("for_: unknown field" in p for p in problems), problems
    assert any("interval" in p for p in problems), problems


def test_the_servicemonitor_scrapes_the_firebreak_service_as_job_firebreak():
    objs = monitoring()
    sm, svc = one(objs, "ServiceMonitor", "firebreak"), one(objs, "Service", "firebreak")
    assert sm["spec"]["selector"]["matchLabels"].items() <= svc["metadata"]["labels"].items()
    assert [e["port"] for e in sm["spec"]["endpoints"]] == [p["name"] for p in svc["spec"]["ports"]]
    assert svc["metadata"]["labels"][sm["spec"]["jobLabel"]] == "firebreak"  # the alerts' job="firebreak"


def _rules() -> list[dict[str, Any]]:
    return one(monitoring(), "PrometheusRule", "firebreak")["spec"]["groups"]


def test_the_alerts_cover_the_bot_and_use_only_its_series():
    rules = [r for g in _rules() for r in g["rules"]]
    assert {r["alert"] for r in rules} == ALERTS
    for r in rules:
        assert r["labels"]["severity"] in ("critical", "warning", "info") and r["annotations"]["summary"], r
    used = {m.removesuffix("_bucket") for r in rules for m in re.findall(r"\bfirebreak_[a-z_]+", r["expr"])}
    series = served()
    assert used <= set(series), f"alerts on series Firebreak does not serve: {used - set(series)}"
    assert used >= ALERTED, ALERTED - used
    for r in rules:
        for metric, matchers in re.findall(r"\b(firebreak_[a-z_]+)\{([^}]*)\}", r["expr"]):
            labels = {m.split("=")[0].strip("!~ ") for m in matchers.split(",") if m}
            assert labels <= series[metric.removesuffix("_bucket")], (r["alert"], labels)
        for by in re.findall(r"\bby \(([^)]*)\)", r["expr"]):
            named = {b.strip() for b in by.split(",")}
            metric = re.findall(r"\bfirebreak_[a-z_]+", r["expr"])
            if metric:
                assert named <= series[metric[0].removesuffix("_bucket")], (r["alert"], named)


def test_promtool_accepts_the_rules(tmp_path):
    f = tmp_path / "rules.yaml"
    f.write_text(yaml.safe_dump({"groups": _rules()}))
    done = subprocess.run([find_binary("promtool"), "check", "rules", str(f)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


# Input series (one sample a minute) and the alerts expected from them, as `promtool test rules` reads.
UNIT_TESTS = [
    {
        "interval": "1m",
        "input_series": [
            {"series": 'up{job="firebreak", instance="10.0.0.1:3000"}', "values": "0x10"},
            {"series": 'up{job="firebreak", instance="10.0.0.2:3000"}', "values": "0x10"},
        ],
        "alert_rule_test": [
            {"eval_time": "1m", "alertname": "FirebreakDown", "exp_alerts": []},  # not for 2 minutes yet
            {
                "eval_time": "5m",
                "alertname": "FirebreakDown",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "critical"},
                        "exp_annotations": {"summary": "No Firebreak replica is being scraped"},
                    }
                ],
            },
        ],
    },
    {
        # Not scraped at all (no `up` series): down too.
        "interval": "1m",
        "input_series": [
            {"series": 'firebreak_requests_total{command="sev",result="ok",source="slack"}', "values": "0x10"}
        ],
        "alert_rule_test": [
            {
                "eval_time": "5m",
                "alertname": "FirebreakDown",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "critical", "job": "firebreak"},
                        "exp_annotations": {"summary": "No Firebreak replica is being scraped"},
                    }
                ],
            }
        ],
    },
    {
        "interval": "1m",
        "input_series": [
            {"series": 'up{job="firebreak", instance="10.0.0.1:3000"}', "values": "1x30"},
            {"series": 'up{job="firebreak", instance="10.0.0.2:3000"}', "values": "1x30"},
            # 6 errors to 54 successes a minute: 10% of commands fail.
            {"series": 'firebreak_requests_total{command="lever",result="error",source="slack"}', "values": "0+6x30"},
            {"series": 'firebreak_requests_total{command="lever",result="ok",source="slack"}', "values": "0+54x30"},
            {"series": 'firebreak_requests_total{command="sev",result="refused",source="slack"}', "values": "0+0x30"},
            # Every ack between 2.5 s and 5 s.
            {"series": 'firebreak_ack_seconds_bucket{le="1"}', "values": "0+0x30"},
            {"series": 'firebreak_ack_seconds_bucket{le="2.5"}', "values": "0+0x30"},
            {"series": 'firebreak_ack_seconds_bucket{le="5"}', "values": "0+10x30"},
            {"series": 'firebreak_ack_seconds_bucket{le="+Inf"}', "values": "0+10x30"},
            {"series": 'firebreak_kube_api_errors_total{context="us-east-3",code="403"}', "values": "0+1x30"},
            {"series": 'firebreak_kube_api_errors_total{context="us-east-1",code="500"}', "values": "0x30"},
            # Mistyped targets: answers, not an API server in trouble.
            {"series": 'firebreak_kube_api_errors_total{context="us-east-1",code="404"}', "values": "0+2x30"},
            # Every timed job starting 10 to 30 s late.
            {"series": 'firebreak_scheduler_lag_seconds_bucket{kind="cadence.remind",le="10"}', "values": "0+0x30"},
            {"series": 'firebreak_scheduler_lag_seconds_bucket{kind="cadence.remind",le="30"}', "values": "0+2x30"},
            {"series": 'firebreak_scheduler_lag_seconds_bucket{kind="cadence.remind",le="+Inf"}', "values": "0+2x30"},
            {"series": 'firebreak_reminders_late_total{kind="remind"}', "values": "0 0 0 1 1 1 1"},
            {
                "series": 'firebreak_lever_executions_total{lever="node-quarantine",outcome="done/verified"}',
                "values": "0+1x30",
            },
        ],
        "alert_rule_test": [
            {"eval_time": "5m", "alertname": "FirebreakDown", "exp_alerts": []},
            {"eval_time": "5m", "alertname": "FirebreakCommandErrors", "exp_alerts": []},  # not for 10m yet
            {
                "eval_time": "20m",
                "alertname": "FirebreakCommandErrors",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "warning"},
                        "exp_annotations": {"summary": "More than 5% of Firebreak's commands end in an error"},
                    }
                ],
            },
            {
                "eval_time": "20m",
                "alertname": "FirebreakSlowAcks",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "warning"},
                        "exp_annotations": {
                            "summary": "Firebreak's p99 acknowledgement is near Slack's 3-second limit"
                        },
                    }
                ],
            },
            {
                "eval_time": "20m",
                "alertname": "FirebreakSchedulerLag",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "warning"},
                        "exp_annotations": {"summary": "Firebreak's timers run late"},
                    }
                ],
            },
            {
                "eval_time": "5m",
                "alertname": "FirebreakRemindersLate",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "warning", "kind": "remind"},
                        "exp_annotations": {"summary": "Firebreak posted reminders late (remind)"},
                    }
                ],
            },
            {"eval_time": "20m", "alertname": "FirebreakLeverFailures", "exp_alerts": []},  # done/verified only
            {
                "eval_time": "20m",
                "alertname": "FirebreakKubeApiErrors",
                "exp_alerts": [
                    {
                        "exp_labels": {"severity": "warning", "context": "us-east-3", "code": "403"},
                        "exp_annotations": {"summary": "Kubernetes API errors in context us-east-3 (403)"},
                    }
                ],
            },
        ],
    },
]


def test_the_alerts_fire_on_firebreak_series(tmp_path):
    groups = _rules()
    for rule in (r for g in groups for r in g["rules"]):
        del rule["annotations"]["description"]  # the summaries (templated) are compared; the prose is not
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    tests = tmp_path / "tests.yaml"
    tests.write_text(yaml.safe_dump({"rule_files": [rules.name], "evaluation_interval": "1m", "tests": UNIT_TESTS}))
    done = subprocess.run(
        [find_binary("promtool"), "test", "rules", tests.name], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
