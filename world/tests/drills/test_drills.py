"""Game-day drills (`firebreak console --drill NAME`): each drill plays against the demo fleet
through the real protocol (its alerts are Alertmanager webhooks to the app's own /alertmanager with
the bearer token, its changes are in the Kubernetes emulators), the person's decisions are typed
as console lines, and the end report times them and prints the postmortem draft."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator

import pytest

from bot.console.drill import DrillSession, price_text
from bot.console.main import open_console, start_drill
from bot.console.session import Console
from fbworld.drills import DrillError, drills, get
from fbworld.drills.alerts import fingerprint, payload
from fbworld.drills.library import load
from fbworld.drills.model import Webhook
from tests.support.core import run_cli

SPEED = 60.0  # a five-minute drill in five seconds
HEADINGS = ("## Summary", "## Timeline", "## Detection gap", "## Trigger and root cause", "## Action items")


@pytest.fixture
def no_clusters(monkeypatch):
    for var in ("KUBECONFIG", "PROMETHEUS_URL", "REDIS_URL", "ALERTMANAGER_TOKEN"):
        monkeypatch.delenv(var, raising=False)


@contextlib.asynccontextmanager
async def drilling(name: str, out: list[str]) -> AsyncIterator[Console]:
    async with open_console("alice", out.append, alert_token=True) as c:
        assert await start_drill(c, get(name), SPEED)
        try:
            yield c
        finally:
            assert c.drill is not None
            await c.drill.end("the test is over")


async def _run(c: Console, out: list[str], line: str, ok: bool = True) -> str:
    start = len(out)
    assert await c.line(line) is ok, "\n".join(out[start:])
    return "\n".join(out[start:])


async def _take_the_incident(c: Console, out: list[str], **seats: str) -> None:
    """Go to the incident the drill's alert opened, take the IC seat as alice, fill the other seats."""
    await _run(c, out, "channel 2")
    await _run(c, out, "/incident role ic @alice")
    for role, person in seats.items():
        await _run(c, out, f"/incident role {role} @{person}")


def _last_button(out: list[str], label: str) -> str:
    found = re.findall(rf"\[(\d+)\] {label}\b", "\n".join(out))
    assert found, f"no [{label}] button"
    return found[-1]


def _report(out: list[str]) -> str:
    text = "\n".join(out)
    assert "━━ Drill " in text and " ended at " in text, text[-3000:]
    return text[text.rindex("━━ Drill ") :]


def _decision(report: str, name: str) -> str:
    m = re.search(rf"^  {re.escape(name)}: (.*)$", report, re.M)
    assert m, f"no decision line {name!r} in:\n{report[:3000]}"
    return m.group(1)


async def _alerts_entries(c: Console) -> list[dict]:
    return [e for e in await c.svc.audit.since(0) if e["action"] == "command.alerts"]


def _taints(node: dict) -> dict[str, str]:
    return {t["key"]: t.get("value", "") for t in node["spec"].get("taints") or []}


# ---------------------------------------------------------------------------------- the CLI


def test_drill_list_names_every_drill_and_exits_0():
    out = run_cli("console", "--drill", "list")
    assert out.returncode == 0, out.stderr
    names = [line.split()[0] for line in out.stdout.splitlines()]
    assert names == sorted(drills()) and len(names) == 5
    assert "xid-storm" in names and "sandbox-metadata" in names
    assert "XID 79 storm on us-east-3: " in out.stdout


def test_an_unknown_drill_exits_2_naming_the_valid_ones():
    out = run_cli("console", "--drill", "fire-drill")
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "firebreak: unknown drill fire-drill; drills: bad-weights, cell-drain, registry-blackout, "
        "sandbox-metadata, xid-storm"
    )


def test_a_drill_refuses_to_run_on_the_clusters_of_kubeconfig(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\nclusters: []\ncontexts: []\nusers: []\n")
    out = run_cli("console", "--drill", "xid-storm", "--kubeconfig", str(kubeconfig), "--real-clusters")
    assert out.returncode == 2
    assert "runs only on the demo fleet" in out.stderr and "drop --kubeconfig" in out.stderr
    assert "Firebreak console" not in out.stdout  # refused before anything started


@pytest.mark.parametrize("speed", ["0", "-3", "fast", "5000"])
def test_a_bad_speed_is_a_usage_error(speed):
    out = run_cli("console", "--drill", "xid-storm", "--speed", speed)
    assert out.returncode == 2 and "--speed" in out.stderr


# ---------------------------------------------------------------------------------- the data


def test_a_bad_drill_file_names_the_field(tmp_path):
    bad = tmp_path / "oops.yaml"
    bad.write_text(
        "name: oops\ntitle: t\nsummary: s\nsteps:\n  - at: 10 minutes\n    say: hi\n"
        "decisions:\n  - {name: d, match: [{action: command.role}]}\n"
    )
    with pytest.raises(DrillError, match=r"oops.yaml: steps.0.at: .*'10 minutes' is not a duration"):
        load(bad)
    with pytest.raises(DrillError, match="unknown drill nope; drills: bad-weights"):
        get("nope")


def test_the_webhook_payload_has_alertmanagers_shape():
    hook = Webhook.model_validate(
        {
            "alerts": [
                {
                    "labels": {"alertname": "A", "cell": "us-east-3", "severity": "page"},
                    "annotations": {"summary": "x"},
                },
                {"labels": {"alertname": "B", "cell": "us-east-3", "severity": "ticket"}, "expr": "up == 0"},
            ]
        }
    )
    started: dict[str, float] = {}
    body = payload(hook, 1_764_000_000.0, started)
    assert body["version"] == "4" and body["status"] == "firing" and body["receiver"] == "firebreak"
    assert body["groupLabels"] == {"cell": "us-east-3"} and body["commonLabels"] == {"cell": "us-east-3"}
    assert body["commonAnnotations"] == {}  # only what every alert shares
    a, b = body["alerts"]
    assert set(a) == {"status", "labels", "annotations", "startsAt", "endsAt", "generatorURL", "fingerprint"}
    assert a["startsAt"] == "2025-11-24T16:00:00.000Z" and a["endsAt"] == "0001-01-01T00:00:00Z"
    assert b["generatorURL"].endswith("/graph?g0.expr=up%20%3D%3D%200&g0.tab=1")
    assert a["fingerprint"] == fingerprint(a["labels"]) != b["fingerprint"]
    # The same alert later keeps its startsAt, as Alertmanager's does.
    assert payload(hook, 1_764_000_600.0, started)["alerts"][0]["startsAt"] == a["startsAt"]


# ---------------------------------------------------------------------------------- the drills


async def test_xid_storm_quarantines_within_budget_and_the_fourth_is_refused(no_clusters):
    out: list[str] = []
    async with drilling("xid-storm", out) as c:
        assert c.fleet is not None
        cell = c.fleet.clusters["us-east-3"]
        said = await _run(c, out, "wait +1m40s")
        # The lone ticket opened nothing; the storm's page opened one SEV2 through /alertmanager.
        assert "(GpuXid79), firing: no page or security alert among them, so Firebreak opens nothing" in said
        assert "(GpuXid79, GpuXidStorm), firing: opened INC-1 (SEV2)" in said
        (opened,) = await _alerts_entries(c)
        assert opened["actor"] == "system" and opened["detail"]["opened"] is True and opened["detail"]["sev"] == 2
        assert opened["detail"]["alertnames_firing"] == {"GpuXidStorm": 1}
        assert cell.get("nodes", "gpu-a3-0133")["status"]["conditions"][-1]["type"] == "GpuXidCritical"

        await _take_the_incident(c, out, ops="bob")
        # Triage's fatal-XID row counts the five GPUs whose dcgm-exporter gauge went to 79 (the drill's `dcgm:`).
        said = await _run(c, out, "/incident triage")
        assert re.search(r"GPUs, fatal XID 1h\s+5\b", said) and re.search(r"GPUs, app XID 1h\s+0\b", said), said
        await _run(c, out, "as @bob")
        for node in ("gpu-a3-0117", "gpu-a3-0121", "gpu-a3-0124"):
            assert "applied and verified" in await _run(c, out, f"/incident lever node-quarantine {node} reason=xid79")
            assert _taints(cell.get("nodes", node))["gpu.corp/quarantine"] == "xid79"
        said = await _run(c, out, "/incident lever node-quarantine gpu-a3-0129 reason=xid79", ok=False)
        assert "Quarantine budget: us-east-3 already had 3 node quarantine(s) in the last hour" in said
        assert "gpu.corp/quarantine" not in _taints(cell.get("nodes", "gpu-a3-0129"))
        await _run(c, out, "drill end")

    report = _report(out)
    assert "ended by `drill end`" in report
    for name in ("took the IC seat", "quarantined a node", "quarantined the third node"):
        assert re.fullmatch(
            r"\dm \d\ds after the first signal \(\d\d:\d\d:\d\d UTC, @(alice|bob)\)", _decision(report, name)
        )
    assert "after the first signal" in _decision(report, "the rate budget refused the fourth quarantine")
    assert re.search(r"INC-1  `command.lever` by @bob: refused: .*Quarantine budget", report)
    assert re.search(r"drill   \+1:30  Alertmanager → POST /alertmanager", report)
    assert "Postmortem draft for INC-1" in report
    for heading in HEADINGS:
        assert heading in report
    # The alert's expression, answered by the simulated Prometheus, is what the postmortem evaluated.
    assert '`count by (cell) (DCGM_FI_DEV_XID_ERRORS{cell="us-east-3"} == 79) >= 3` turned true' in report


async def test_bad_weights_opens_a_quality_sev1_and_the_model_owner_aborts(no_clusters):
    out: list[str] = []
    async with drilling("bad-weights", out) as c:
        assert c.fleet is not None
        cell = c.fleet.clusters["us-east-1"]
        said = await _run(c, out, "wait +2m10s")
        assert "(ModelQualityRegression), firing: opened INC-1 (SEV1)" in said
        ro = cell.get("rollouts", "llm-70b", "serve-chat")
        assert ro["metadata"]["annotations"]["rollout.argoproj.io/revision"] == "3"
        assert ro["status"]["currentPodHash"] == "5f7d9c4b2"

        await _take_the_incident(c, out, model="carol")
        said = await _run(c, out, "/incident changed")
        assert "revision 3" in said and "pod spec changed" in said
        await _run(c, out, "as @carol")
        said = await _run(c, out, "/incident lever rollout-abort serve-chat/llm-70b")
        assert "Rollout aborted update to revision 3" in said
        ro = cell.get("rollouts", "llm-70b", "serve-chat")
        assert ro["status"]["abort"] is True and ro["status"]["phase"] == "Degraded"
        canary = cell.get("replicasets", "llm-70b-5f7d9c4b2", "serve-chat")
        assert canary["spec"]["replicas"] == 0
        await _run(c, out, "drill end")

    report = _report(out)
    assert "after the first signal" in _decision(report, "rollout aborted")
    assert "after the first signal" in _decision(report, "seated the model owner")
    assert "- SEV: SEV1" in report
    for heading in HEADINGS:
        assert heading in report


def test_sandbox_metadata_through_the_cli_script_with_break_glass(tmp_path):
    script = tmp_path / "sandbox.txt"
    script.write_text(
        "wait +1m10s\nchannel 2\n/incident role ic @alice\n/incident role security @carol\n"
        "/incident role ops @bob\nas @bob\n"
        "/incident breakglass killswitch,sandbox-quarantine 30 security lead is on the legal call\n"
        "as @alice\npress 1\nas @carol\npress 3\nas @bob\n"
        "/incident lever killswitch toolgw/toolgw-flags tenant=acme level=read\n"
        "/incident lever sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0\n"
        "wait end\n"
    )
    out = run_cli("console", "--user", "alice", "--drill", "sandbox-metadata", "--speed", "60", "--script", str(script))
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr
    text = out.stdout
    assert "(SandboxMetadataAccess), firing: opened INC-1 (SEV1)" in text
    assert "INC-1: Security: Sandbox sess-7f3a9c-0" in text
    assert "killswitch toolgw/toolgw-flags (us-east-2): applied and verified (acme.max_side_effect=read" in text
    assert "sandbox-quarantine sbx-tenant-acme/sess-7f3a9c-0 (us-east-2): applied and verified" in text
    report = _report(text.splitlines())
    assert "every step ran and every expected decision was taken" in report
    for name in ("took the IC seat", "break-glass granted", "killswitch", "sandbox quarantined"):
        assert "after the first signal" in _decision(report, name), name
    for heading in HEADINGS:
        assert heading in report


async def test_cell_drain_is_a_capacity_shift_and_route_weight_steps_with_headroom(no_clusters):
    out: list[str] = []
    async with drilling("cell-drain", out) as c:
        assert c.fleet is not None
        route = c.fleet.clusters["global"]
        said = await _run(c, out, "wait +2m10s")
        assert "(CellTTFTBurnFast), firing: opened INC-1 (SEV2)" in said
        await _take_the_incident(c, out, ops="bob")
        said = await _run(c, out, "/incident changed")
        assert "Capacity shift, not a regression" in said and "us-east-1 drained" in said
        await _run(c, out, "as @bob")
        await _run(c, out, "/incident lever route-weight edge/chat-global backend=cell-us-east-3")
        await _run(c, out, "as @alice")
        said = await _run(c, out, f"press {_last_button(out, 'Approve')}")
        assert "applied and verified" in said
        obj = route.get("httproutes", "chat-global", "edge")
        weights = {b["name"]: b["weight"] for b in obj["spec"]["rules"][0]["backendRefs"]}
        assert weights == {"cell-us-east-1": 0, "cell-us-east-2": 100, "cell-us-east-3": 50}
        await _run(c, out, "wait end")
        for _ in range(40):  # every decision taken and every step ran: the drill ends by itself
            if c.drill is not None and c.drill.ended:
                break
            await _run(c, out, "wait 0.1")
        assert c.drill is not None and c.drill.ended
    report = _report(out)
    assert "every step ran and every expected decision was taken" in report
    assert "after the first signal" in _decision(report, "route-weight stepped")


async def test_registry_blackout_freezes_keda_at_the_current_replicas(no_clusters):
    out: list[str] = []
    async with drilling("registry-blackout", out) as c:
        assert c.fleet is not None
        cell = c.fleet.clusters["us-east-2"]
        said = await _run(c, out, "wait +1m40s")
        assert "(ImagePullFailing, VllmQueueDeep), firing: opened INC-1 (SEV2)" in said
        await _take_the_incident(c, out, ops="bob")
        said = await _run(c, out, "/incident triage")
        assert re.search(r"Waiting / running\s+1\.80", said), said
        await _run(c, out, "as @bob")
        await _run(c, out, "/incident lever keda-pause serve-chat/llm-70b")
        so = cell.get("scaledobjects", "llm-70b", "serve-chat")
        assert so["metadata"]["annotations"]["autoscaling.keda.sh/paused"] == "true"  # KEDA freezes it as it is
        assert cell.get("rollouts", "llm-70b", "serve-chat")["spec"]["replicas"] == 8
        said = await _run(c, out, "/incident changed")
        assert "Failed" in said and "registry.corp" in said
        await _run(c, out, "drill end")
    report = _report(out)
    assert "after the first signal" in _decision(report, "froze llm-70b's autoscaling")
    assert "after the first signal" in _decision(report, "ran triage")


async def test_ending_at_once_reports_every_decision_not_taken(no_clusters):
    out: list[str] = []
    async with drilling("xid-storm", out) as c:
        await _run(c, out, "drill end")
        await _run(c, out, "drill end")  # ending twice prints one report
    text = "\n".join(out)
    assert text.count("━━ Drill xid-storm ended") == 1
    report = _report(out)
    assert "step(s) of the timeline did not run" in report
    assert "no alert reached the app" in report
    for d in get("xid-storm").decisions:
        assert _decision(report, d.name) == "not taken"
    assert "No incident was opened during the drill" in report


async def test_a_wrong_token_is_refused_by_the_real_webhook(no_clusters):
    out: list[str] = []
    async with open_console("alice", out.append, alert_token=True) as c:
        assert c.fleet is not None
        session = DrillSession(c.svc, c.fleet, get("xid-storm"), c.app_url, "not-the-token", out.append, str, SPEED)
        await session.start()
        await session.wait_until(40)
        await session.end("the test is over")
    assert "[drill +0:30] POST /alertmanager answered 401: unauthorized" in "\n".join(out)


async def test_wait_and_drill_without_a_drill_say_so(no_clusters):
    out: list[str] = []
    async with open_console("alice", out.append) as c:
        assert "No drill is running" in await _run(c, out, "wait +1m", ok=False)
        assert "No drill is running" in await _run(c, out, "drill end", ok=False)
        assert "Usage: `wait <seconds>`" in await _run(c, out, "wait soon", ok=False)
        assert "0 to 3600 seconds" in await _run(c, out, "wait 7200", ok=False)
        await _run(c, out, "wait 0.05")


async def test_waiting_on_a_drill_that_ended_says_so_instead_of_hanging(no_clusters):
    out: list[str] = []
    async with drilling("registry-blackout", out) as c:
        await _run(c, out, "drill end")
        said = await asyncio.wait_for(_run(c, out, "wait end", ok=False), 5)
        assert "The drill has ended" in said
        said = await asyncio.wait_for(_run(c, out, "wait +3m", ok=False), 5)
        assert "The drill has ended" in said


async def test_a_wait_past_the_last_step_runs_out_on_its_own(no_clusters):
    out: list[str] = []
    async with drilling("xid-storm", out) as c:
        last = max(s.offset for s in get("xid-storm").steps)
        await asyncio.wait_for(_run(c, out, f"wait +{int(last) + 30}s"), 30)
        assert c.drill is not None and c.drill.runner.offset() >= last + 30


def test_speed_without_a_drill_and_a_drill_under_prometheus_url_are_refused():
    out = run_cli("console", "--speed", "5")
    assert out.returncode == 2 and "use it with --drill NAME" in out.stderr
    out = run_cli("console", "--drill", "xid-storm", env={"PROMETHEUS_URL": "http://127.0.0.1:9"})
    assert out.returncode == 2
    assert "PROMETHEUS_URL is set" in out.stderr and "Unset PROMETHEUS_URL" in out.stderr


async def test_the_demo_cells_nodehealthcheck_can_be_paused_from_the_xid_storm(no_clusters):
    out: list[str] = []
    async with drilling("xid-storm", out) as c:
        assert c.fleet is not None
        cell = c.fleet.clusters["us-east-3"]
        nhc = cell.get("nodehealthchecks", "gpu-nodes")
        assert nhc is not None and "pauseRequests" not in nhc["spec"]
        assert {"type": "GpuXidCritical", "status": "True", "duration": "300s"} in nhc["spec"]["unhealthyConditions"]
        assert c.fleet.clusters["us-east-1"].get("nodehealthchecks", "gpu-nodes") is None
        await _run(c, out, "wait +1m40s")
        await _take_the_incident(c, out, ops="bob")
        await _run(c, out, "as @bob")
        dry = await _run(c, out, "/incident lever remediation-pause gpu-nodes --dry-run")
        assert "gpu-nodes" in dry and "40" in dry, dry
        said = await _run(c, out, "/incident lever remediation-pause gpu-nodes")
        assert "applied and verified" in said, said
        assert cell.get("nodehealthchecks", "gpu-nodes")["spec"]["pauseRequests"] == ["firebreak:INC-1"]
        await _run(c, out, "drill end")


async def test_xid_storm_nodehealthcheck_cordons_raise_the_alarm_once_and_the_pause_is_priced(no_clusters):
    out: list[str] = []
    async with drilling("xid-storm", out) as c:
        assert c.fleet is not None
        cell = c.fleet.clusters["us-east-3"]
        await _run(c, out, "wait +1m40s")
        await _take_the_incident(c, out, ops="bob")
        await _run(c, out, "as @bob")
        assert "applied and verified" in await _run(c, out, "/incident lever node-quarantine gpu-a3-0117 reason=xid79")
        await _run(c, out, "wait end")  # the whole timeline: NodeHealthCheck cordons 21 nodes at +10:00
        snr = "remediation.medik8s.io/self-node-remediation"
        assert sum(snr in _taints(n) for n in cell.list("nodes")) == 21
        alarms = await _alarms(c)
        for _ in range(100):  # the demo's watch reads the cells every second
            if alarms:
                break
            await asyncio.sleep(0.1)
            alarms = await _alarms(c)
        (alarm,) = alarms
        d = alarm["detail"]
        assert alarm["incident"] == "INC-1" and d["opened"] is False and d["reason"] == "rate" and d["count"] == 21
        assert d["offered"] == ["gpu-nodes"] and "NodeHealthCheck (medik8s) 20" in d["who"]
        # The NodeHealthCheck's cordons count against the floor: 21 of 40 out, a quarantine is refused.
        said = await _run(c, out, "/incident lever node-quarantine gpu-a3-0140 reason=xid79", ok=False)
        assert "Quarantine floor: us-east-3 has 21 of 40 GPU nodes quarantined" in said, said
        dry = await _run(c, out, "/incident lever remediation-pause gpu-nodes --dry-run")
        assert "firebreak:INC-1" in dry, dry
        said = await _run(c, out, "/incident lever remediation-pause gpu-nodes")
        assert "applied and verified" in said, said
        assert cell.get("nodehealthchecks", "gpu-nodes")["spec"]["pauseRequests"] == ["firebreak:INC-1"]
        await asyncio.sleep(2.5)  # more polls of the same burst: still one alarm
        assert len(await _alarms(c)) == 1
        await _run(c, out, "drill end")
    report = _report(out)
    assert re.search(r"Firebreak raised the remediation alarm: \dm \d\ds after the first signal .*Firebreak\)", report)
    assert re.search(r"paused the NodeHealthCheck: \dm \d\ds after the first signal .*@bob\)", report)
    assert re.search(
        r"Remediation alarms:\n  \d\d:\d\d:\d\d UTC us-east-3: 21 node\(s\) out in the hour \(rate\), in INC-1; "
        r"by who: NodeHealthCheck \(medik8s\) 20 .*offered remediation-pause on: gpu-nodes",
        report,
    )
    levers = report.split("Levers pulled, and what each cost:\n", 1)[1].split("Postmortem draft", 1)[0].splitlines()
    assert len(levers) == 2, levers
    assert re.fullmatch(r"  \S+ UTC INC-1 REQ-\d+ node-quarantine gpu-a3-0117 \(us-east-3\): price: .+", levers[0])
    assert "not priced" not in levers[0] and "not priced" not in levers[1], levers
    assert re.fullmatch(r"  \S+ UTC INC-1 REQ-\d+ remediation-pause gpu-nodes \(us-east-3\): price: .+", levers[1])


async def _alarms(c: Console) -> list[dict]:
    return [e for e in await c.svc.audit.since(0) if e["action"] == "command.remediation_alarm"]


def test_the_report_prints_the_price_the_audit_entry_recorded_and_never_guesses_one():
    hours = {"what": "JobSet train-llm/pretrain-405b", "unit": "GPU-hours", "value": 341.33, "how": "512 GPUs x 40 min"}
    gpus = {"what": "JobSet train-llm/pretrain-405b", "unit": "GPUs", "value": 512}
    assert price_text({"price": {"costs": [hours, gpus]}}) == (
        "JobSet train-llm/pretrain-405b: 341 GPU-hours (512 GPUs x 40 min), 512 GPUs."
    )
    unread = {"what": "JobSet train-llm/x", "unit": "GPU-hours", "value": None, "how": "no annotation"}
    assert price_text({"plan": {"price": {"costs": [unread]}}}) == "JobSet train-llm/x: unknown (no annotation)."
    assert price_text({"price": {"gangs": 1}}) == "not priced (the recorded price is not readable)"
    assert price_text({"plan": {"price": None}}) == "not priced"
    assert price_text({}) == "not priced"
