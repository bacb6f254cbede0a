"""The postmortem document end to end: alerts posted through the real `/alertmanager` path with
`startsAt` in the past, a real Prometheus backfilled so that the alert's expression turned true at
a known time (01:00 UTC, two hours before the alert said it started), the incident run through its
commands on the ManualClock, then `/incident postmortem`: the file shared through Slack's external
upload flow must equal the golden postmortem and `firebreak postmortem INC-1`'s output byte for byte.

Set UPDATE_GOLDEN=1 to rewrite tests/postmortem/golden/ after a deliberate change (and read the diff).
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote as urlquote

import pytest

from bot.incidents.models import Incident
from bot.postmortem import figures as fig
from bot.signals.store import store as signals_store
from fbworld.dcgm import XID_ERRORS
from tests.support.core import run_cli
from tests.support.harness import T0, RunningApp
from tests.support.messages import say
from tests.support.ports import free_port
from tests.support.prometheus import (
    Exporter,
    Gpu,
    PrometheusServer,
    Series,
    dcgm_backfill,
    ensure_services_installed,
)
from tests.support.signals import CELL_A, ONCALL_A, TOKEN, incidents, payload, policy_dir, post, settle, wire

GOLDEN = Path(__file__).parent / "golden"
HOUR = 3600.0
IMPACT = T0 - 2 * HOUR - 10 * 60  # 01:00:00 UTC: the XID 79 first shows (T0 is 03:10 UTC)
BLIP = (T0 - 5 * HOUR - 10 * 60, 20 * 60)  # 2026-11-29 22:00 for 20 min: an earlier run
STARTS_AT = "2026-11-30T03:02:00.123456789Z"  # what Alertmanager says (the rule's `for:` hid two hours)
EXPR = f'max by (cell) (DCGM_FI_DEV_XID_ERRORS{{cell="{CELL_A}"}}) > 0'
SCRIBE, OPS = "USCRIBE", "UOPS"


# Written out here, not taken from the document module, so a section dropped or moved there fails.
EXPECTED_SECTIONS = [
    "Summary",
    "What the mitigations cost",
    "Timeline",
    "Detection gap",
    "Trigger and root cause",
    "Action items",
]


def generator_url(expr: str) -> str:
    return f"http://prometheus.{CELL_A}:9090/graph?g0.expr={urlquote(expr, safe='')}&g0.tab=1"


def xid_series(start: float, end: float, step: float = 60.0) -> list[Series]:
    """dcgm-exporter's DCGM_FI_DEV_XID_ERRORS for two GPUs of us-east-1: host 0 reports XID 79 at
    IMPACT (the gauge holds it from then on); host 1 reports XID 48 at BLIP and is reset 20 minutes
    later (XID 48 needs a GPU reset; the gauge reads 0 again): an earlier run the postmortem must not
    take. A new XID is a new series (err_code/err_msg follow the value)."""
    ts = [start + i * step for i in range(int((end - start) // step) + 1)]
    gpus = [
        Gpu("gpu-us-east-1-0", 0, target={"cell": CELL_A}).xid(IMPACT, 79),
        Gpu("gpu-us-east-1-1", 0, target={"cell": CELL_A}).xid(BLIP[0], 48).reload(BLIP[0] + BLIP[1]),
    ]
    return dcgm_backfill(Exporter(), gpus, ts, [XID_ERRORS])


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    ensure_services_installed()
    prom = PrometheusServer(tmp_path_factory.mktemp("prom"), xid_series(T0 - 30 * HOUR, T0 + 4 * HOUR))
    asyncio.run(prom.start())
    yield prom
    asyncio.run(prom.stop())


@pytest.fixture
def app_settings(request: pytest.FixtureRequest, prometheus: PrometheusServer, tmp_path: Path) -> dict[str, Any]:
    """``request.param``: another PROMETHEUS_URL (the app builds its one client from it at start)."""
    url = getattr(request, "param", None) or prometheus.url
    return {"alertmanager_token": TOKEN, "firebreak_policy_dir": policy_dir(tmp_path), "prometheus_url": url}


# The incident ----------------------------------------------------------------------------------


def alerts(status: str = "firing") -> list[dict[str, Any]]:
    xid = wire(
        "GPUXid79",
        cell=CELL_A,
        sev="1",
        node="gpu-us-east-1-0",
        summary="GPU fell off the bus in us-east-1",
        fingerprint="a1f0c0de00000001",
        starts_at=STARTS_AT,
        status=status,
    )
    xid["generatorURL"] = generator_url(EXPR)
    stalled = wire(
        "TrainingStepStalled",
        cell=CELL_A,
        fingerprint="a1f0c0de00000002",
        starts_at="2026-11-30T03:04:00Z",
        status=status,
    )
    stalled["generatorURL"] = "https://grafana.example.com/alerting/grafana/stalled/view"  # no g0.expr
    return [xid, stalled]


async def at(app: RunningApp, hhmm: str) -> None:
    """Set the ManualClock to hh:mm UTC on 2026-11-30 (T0's day)."""
    h, m = (int(x) for x in hhmm.split(":"))
    app.clock.set(T0 - (3 * 60 + 10) * 60 + h * HOUR + m * 60)


async def opened(app: RunningApp) -> Incident:
    """The alerts arrive at 03:05 (received), the delivery job opens INC-1 at 03:06 (declared)."""
    await at(app, "03:05")
    status, _ = await post(app, payload(alerts(), summary="GPU fell off the bus in us-east-1"))
    assert status == 200
    await at(app, "03:06")
    (inc,) = await settle(app, lambda: incidents(app))
    return inc


async def run_incident(app: RunningApp, *, facts: bool = True) -> Incident:
    """The incident of the golden postmortem, from the first alert to the facts and items."""
    inc = await opened(app)
    await at(app, "03:20")
    await say(app, "assess --gpus 4096", ONCALL_A, inc.channel_id or "", expect="Matrix says")
    await at(app, "03:25")
    await say(app, f"role scribe <@{SCRIBE}>", ONCALL_A, inc.channel_id or "", expect="is now")
    await say(app, f"role ops <@{OPS}>", ONCALL_A, inc.channel_id or "", expect="is now")
    await at(app, "03:40")
    await say(
        app,
        "update Draining the node with XID 79 | off the bus; the job restarts from its 00:30 checkpoint",
        ONCALL_A,
        inc.channel_id or "",
        expect="Update posted",
    )
    await at(app, "04:10")
    await say(app, "assess --gpus 1024", ONCALL_A, inc.channel_id or "", expect="Matrix says")
    await at(app, "05:00")
    await say(app, "mitigated", ONCALL_A, inc.channel_id or "", expect="is now mitigated")
    await at(app, "05:10")
    status, _ = await post(app, payload(alerts("resolved")))
    assert status == 200

    async def cleared() -> bool:
        recs = await signals_store(app.services).alert_records(inc.id)
        return all(r.resolved_at for r in recs.values())

    await settle(app, cleared)
    await at(app, "05:30")
    await say(app, "resolved", ONCALL_A, inc.channel_id or "", expect="is now resolved")
    if not facts:
        return inc
    await at(app, "06:00")
    await say(
        app,
        "cause detection the XID rule had `for: 2h`, so a GPU off the bus paged two hours late",
        SCRIBE,
        inc.channel_id or "",
    )
    await say(app, "cause trigger driver 550.127.05 rolled out to us-east-1 at 00:55", SCRIBE, inc.channel_id or "")
    await say(
        app,
        "cause root class: driver the 550.127.05 driver drops GPUs off the bus under NCCL all-reduce at 4K GPUs",
        SCRIBE,
        inc.channel_id or "",
    )
    await say(app, "postmortem rework 1.5", ONCALL_A, inc.channel_id or "")
    await say(app, "postmortem impact-figures requests=48200 tokens=1200000", ONCALL_A, inc.channel_id or "")
    await at(app, "06:05")
    await say(
        app,
        f"action Page on XID 79 within 5 minutes (drop `for: 2h`) --owner <@{SCRIBE}> --due 2026-12-15 "
        '--verify "inject XID 79 on a staging node | it pages within 5 min" --kind alert',
        ONCALL_A,
        inc.channel_id or "",
        expect="AI-1",
    )
    await say(
        app,
        f"action Keep driver 550.127.05 out of the fleet image --owner <@{OPS}> --due 2026-12-05 "
        '--verify "no node reports 550.127.05" --kind guardrail',
        ONCALL_A,
        inc.channel_id or "",
        expect="AI-2",
    )
    await at(app, "06:07")
    await say(
        app, "action done AI-2 fleet image gpu-2026-12-01 ships 550.144.03", OPS, inc.channel_id or "", expect="AI-2"
    )
    await at(app, "06:10")
    await say(
        app,
        "postmortem sev 2 the job restarted from its checkpoint; no users were hurt",
        ONCALL_A,
        inc.channel_id or "",
        expect="SEV2",
    )
    await at(app, "06:15")
    return inc


async def posted_postmortem(app: RunningApp, inc: Incident) -> tuple[str, Any]:
    """`/incident postmortem`: the reply, and the one file it shared in the incident channel."""
    before = len(app.slack.files(inc.channel_id))
    reply = await say(app, "postmortem", SCRIBE, inc.channel_id or "")
    files = app.slack.files(inc.channel_id)
    assert len(files) == before + 1, reply
    return reply, files[-1]


def sections(text: str) -> list[str]:
    return re.findall(r"^## (.*)$", text, flags=re.MULTILINE)


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"differs from {path} (UPDATE_GOLDEN=1 rewrites it)"


# Tests -----------------------------------------------------------------------------------------


async def test_the_posted_postmortem_is_the_golden_one_and_what_the_cli_prints(app, prometheus, redis_url):
    inc = await run_incident(app)
    reply, f = await posted_postmortem(app, inc)
    assert reply == f"Posted {inc.id}'s postmortem in the channel as `{inc.id}-postmortem.md`."

    # Slack's external upload flow, completed and shared in the incident channel with one line.
    assert f.completed and f.channels == [inc.channel_id] and f.uploads == 1
    assert f.name == "INC-1-postmortem.md" and f.title == "INC-1 postmortem"
    assert f.initial_comment == (
        "Postmortem for INC-1: TTD 2h 05m · TTR 4h 30m · GPU-hours lost: 15,360 · 2 action items (1 open)"
    )
    text = f.content.decode()
    check_golden("INC-1.md", text)
    assert sections(text) == EXPECTED_SECTIONS

    cli = await asyncio.to_thread(
        run_cli, "postmortem", inc.id, env={"REDIS_URL": redis_url, "PROMETHEUS_URL": prometheus.url}
    )
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.encode() == f.content


async def test_impact_start_is_where_the_expression_turned_true_not_the_alerts_startsAt(app):
    inc = await run_incident(app)
    _, f = await posted_postmortem(app, inc)
    text = f.content.decode()
    # Found in Prometheus: 01:00, two hours before the startsAt Alertmanager sent (03:02), and not
    # the earlier XID 48 run of the day before (a gap breaks a run).
    assert "- Impact start: 2026-11-30 01:00:00 UTC, from the expression of `GPUXid79` evaluated in Prometheus" in text
    assert "true since 01:00 without a break to its startsAt 03:02" in text
    assert "22:0" not in text.split("## Timeline")[0]
    assert "- TTD 2h 05m · TTM 4h 00m · TTR 4h 30m (each from impact start)" in text
    # Every `assess --gpus N` up to mitigation (the first from impact start) plus rework × the latest N.
    assert "- GPU-hours lost: 15,360" in text
    assert "4,096 GPUs × 3h 10m (from impact start, 01:00 to 04:10) = 12,971" in text
    assert "1,024 GPUs × 0h 50m (from 04:10 to mitigation) = 853" in text
    assert "rework: 1,024 GPUs × 1.5 h of progress thrown away = 1,536" in text
    # An alert whose generatorURL has no expression says so, and its startsAt stands.
    assert "`TrainingStepStalled`: its generatorURL has no expression (g0.expr) to evaluate" in text


@pytest.mark.parametrize("app_settings", [f"http://127.0.0.1:{free_port()}"], ids=["nothing-listening"], indirect=True)
async def test_prometheus_unreachable_is_said_and_the_startsAt_stands(app, tmp_path):
    inc = await run_incident(app)
    _, f = await posted_postmortem(app, inc)
    text = f.content.decode()
    assert f"`{EXPR}` not evaluated: Prometheus can't be reached (ConnectionError); its startsAt 03:02 stands" in text
    assert "- Impact start: 2026-11-30 03:02:00 UTC, the startsAt of `GPUXid79`" in text
    assert "- TTD 0h 03m" in text  # 03:05 received, minus the 03:02:00.12 startsAt


async def test_postmortem_impact_overrides_what_prometheus_found_with_its_evidence(app):
    inc = await run_incident(app, facts=False)
    await say(
        app,
        "postmortem impact 2026-11-30T00:40Z loss curve flat from step 81,200 (grafana)",
        ONCALL_A,
        inc.channel_id or "",
    )
    _, f = await posted_postmortem(app, inc)
    text = f.content.decode()
    assert "- Impact start: 2026-11-30 00:40:00 UTC, set with `postmortem impact`" in text
    assert "  - set by @UONCALLA on 2026-11-30 05:30:00 UTC: loss curve flat from step 81,200 (grafana)" in text
    assert "TTD 2h 25m" in text


async def test_an_open_incident_gets_a_draft_marked_as_one(app):
    inc = await opened(app)
    await at(app, "03:30")
    await say(app, "assess --gpus 512", ONCALL_A, inc.channel_id or "", expect="Matrix says")
    await at(app, "04:00")
    reply, f = await posted_postmortem(app, inc)
    assert reply.endswith("It is a DRAFT: the incident is still open.")
    assert f.name == "INC-1-postmortem-draft.md" and f.title == "INC-1 postmortem (DRAFT)"
    assert f.initial_comment.startswith("DRAFT postmortem for INC-1 (still active): TTD 2h 05m · ")
    text = f.content.decode()
    assert text.splitlines()[2] == (
        "> **DRAFT**: INC-1 is active, not resolved. Times and figures run to 2026-11-30 04:00:00 UTC and will change."
    )
    assert sections(text) == EXPECTED_SECTIONS
    assert "- TTD 2h 05m · TTM not yet (not mitigated) · TTR not yet (not resolved)" in text
    assert "512 GPUs × 3h 00m (from impact start, 01:00 to now, 04:00 (not mitigated yet)) = 1,536" in text
    # Nothing recorded yet: each missing piece is flagged, with the command that fills it.
    assert "Why detection took that long: missing: run `/incident cause detection <why>`." in text
    assert "- Trigger: missing: run `/incident cause trigger <what set it off>`." in text
    assert "- Root cause: missing: run `/incident cause root class: <name> <why it could happen>`." in text
    assert text.rstrip().endswith("--kind alert|runbook|guardrail|gameday`.")
    assert "No action items." in text


async def test_items_without_an_alert_runbook_guardrail_or_gameday_are_flagged(app):
    inc = await opened(app)
    await at(app, "03:30")
    await say(
        app,
        'action write it up --owner <@UALEX> --due 2026-12-15 --verify "it is written"',
        ONCALL_A,
        inc.channel_id or "",
        expect="AI-1",
    )
    _, f = await posted_postmortem(app, inc)
    text = f.content.decode()
    assert "| AI-1 | write it up | @UALEX | 2026-12-15 | it is written | other | open |  |" in text
    assert "None of these is an alert, runbook step, guardrail or game-day scenario" in text
    assert f.initial_comment.endswith("missing: cause trigger, cause root, cause detection")


async def test_user_text_cannot_break_the_document(app):
    """Pipes, newlines, headings, mass pings and HTML in what people type stay inside their line or cell."""
    inc = await opened(app)
    await at(app, "03:30")
    hostile = "a | b\n## Injected\n<!channel> <script>x</script> \\| c"
    await say(app, f"update {hostile}", ONCALL_A, inc.channel_id or "")
    await say(app, f"cause trigger {hostile}", ONCALL_A, inc.channel_id or "")
    await say(
        app,
        f'action {hostile} --owner <@UALEX> --due 2026-12-15 --verify "v | w" --kind runbook',
        ONCALL_A,
        inc.channel_id or "",
    )
    _, f = await posted_postmortem(app, inc)
    text = f.content.decode()
    assert sections(text) == EXPECTED_SECTIONS
    assert "<!channel>" not in text and "<script>" not in text
    assert "&lt;!channel&gt; &lt;script&gt;x&lt;/script&gt;" in text
    row = next(line for line in text.splitlines() if line.startswith("| AI-1 |"))
    # Eight cells exactly: every pipe typed is escaped (a typed `\|` keeps its backslash).
    assert len(re.findall(r"(?<!\\)\|", row)) == 9, row
    assert "a \\| b ## Injected" in row and "v \\| w" in row and "\\\\\\| c" in row


async def test_a_slack_refusal_of_the_upload_says_nothing_was_posted(app):
    inc = await opened(app)
    app.slack.fail_next("files.completeUploadExternal", "channel_not_found")
    out = await say(app, "postmortem", ONCALL_A, inc.channel_id or "")
    assert out.startswith("Slack refused the postmortem file (files.completeUploadExternal: channel_not_found)")
    assert "nothing was posted" in out and "firebreak postmortem INC-1" in out
    assert app.slack.files(inc.channel_id) == []


# The figures, pure (bot/postmortem/figures.py) ---------------------------------------------------


def test_durations_and_counts_are_printed_as_people_read_them():
    assert fig.duration(2 * HOUR + 5 * 60) == "2h 05m"
    assert fig.duration(0) == "0h 00m"
    assert fig.duration(29) == "0h 00m" and fig.duration(30) == "0h 01m" and fig.duration(90) == "0h 02m"
    assert fig.duration(27 * HOUR + 59 * 60 + 45) == "28h 00m"  # hours keep counting past a day
    assert fig.duration(-5 * 60) == "-0h 05m"
    assert fig.thousands(24576) == "24,576" and fig.thousands(0.5) == "1" and fig.thousands(1_200_000) == "1,200,000"
    assert fig.median([3.0, 1.0, 2.0, 10.0]) == 2.5 and fig.median([]) is None


def test_gpu_hours_lost_counts_each_assess_until_the_next_or_mitigation():
    start, mitigated = T0 - 2 * HOUR, T0 + HOUR
    # The first from impact start; each until the next; one after mitigation never was in force.
    got = fig.gpu_hours([(T0, 4096), (T0 + 0.5 * HOUR, 1024), (T0 + 2 * HOUR, 8)], start, mitigated, 1.5)
    assert [(b.gpus, b.hours) for b in got.burns] == [(4096, 2.5), (1024, 0.5)]
    assert (got.rework_gpus, got.rework, got.total) == (1024, 1536, 4096 * 2.5 + 512 + 1536)
    none = fig.gpu_hours([], start, mitigated, 6.0)
    assert not none.recorded and none.total == 0 and none.rework == 0


def test_alertmanager_times_are_read_to_the_nanosecond_and_go_zero_time_is_none():
    assert fig.parse_time("2026-11-30T03:10:00.123456789Z") == pytest.approx(T0 + 0.123456)
    assert fig.parse_time("2026-11-30T04:10:00+01:00") == T0
    assert fig.parse_time("0001-01-01T00:00:00Z") is None
    assert fig.parse_time("soon") is None and fig.parse_time("") is None


def test_timeline_phrases_for_levers_refusals_and_the_unknown():
    from bot.core.registry import Registry
    from bot.postmortem import document
    from bot.runtime import CAPABILITIES

    reg = Registry()
    for register in CAPABILITIES:
        register(reg)

    def phrase(entry: dict[str, Any]) -> str | None:
        return document.phrase(entry, reg)

    def e(action: str, actor: str = "UOPS", **detail: Any) -> dict[str, Any]:
        return {"action": action, "actor": actor, "detail": detail, "ts": "2026-11-30T03:30:00Z"}

    ids = {"request": "REQ-3", "lever": "kueue-hold", "target": "research-h100", "cell": "us-east-1"}
    pull = {"lever": "kueue-hold", "target": "research-h100", "cell": None, "dry_run": False}
    assert phrase(e("command.lever", result="ok", args=pull, state="done")) == (
        "@UOPS pulled `kueue-hold` research-h100 (done)"
    )
    assert phrase(e("command.lever", result="ok", args={**pull, "dry_run": True})) is None  # nothing changed
    assert phrase(e("lever.apply", **ids)) is None  # its outcome follows
    assert phrase(e("lever.done", **ids, verified=True)) == (
        "Lever REQ-3 `kueue-hold` research-h100 (us-east-1) applied (verified), requested by @UOPS"
    )
    assert phrase(e("lever.undo", "UIC", **ids)) == "Lever REQ-3 `kueue-hold` research-h100 (us-east-1) undone by @UIC"
    assert phrase(e("lever.failed", **ids)) == "Lever REQ-3 `kueue-hold` research-h100 (us-east-1): failed"
    # Refusals and reads are not events; an interrupted command is, and says so.
    assert phrase(e("command.sev", result="refused", args={"sev": 3})) is None
    assert phrase(e("command.status", result="ok", args={})) is None
    assert phrase(e("command.mitigated", result="interrupted")) == (
        "`mitigated` by @UOPS was interrupted part-way (see the audit log)"
    )
    # Anything else falls back to its action's name; Firebreak's own work is Firebreak's.
    assert phrase(e("breakglass.used", "system")) == "`breakglass.used` by Firebreak"
    assert phrase(e("command.breakglass", result="ok", args={})) == "`breakglass` by @UOPS"
