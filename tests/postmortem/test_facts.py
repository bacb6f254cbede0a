"""The postmortem's facts through the real app: `postmortem impact|rework|impact-figures` and
`cause detection|trigger|root`. Each happy path is stored and audited; each bad input gets one
reply that says what to type instead, and nothing is recorded."""

from __future__ import annotations

from datetime import date

import pytest

from bot.postmortem import rules
from bot.postmortem.store import facts, facts_key, resolved_incident_ids
from tests.support.harness import T0, RunningApp, audit_entries

# T0 is 2026-11-30 03:10:00 UTC.
BEFORE = "2026-11-30T02:40Z"  # 30 minutes before the declaration
EVIDENCE = "TTFT p99 panel: 0.8 s to 9 s at 02:40, https://grafana.example/d/ttft"


async def pm_state(app: RunningApp, inc_id: str) -> dict[str, str]:
    return await app.services.redis.hgetall(facts_key(inc_id))


async def entries(app: RunningApp, inc_id: str, action: str) -> list[dict]:
    return [e for e in await audit_entries(app, inc_id) if e["action"] == action]


# impact --------------------------------------------------------------------------------------


async def test_impact_start_is_recorded_with_its_evidence_and_who(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    clock.advance(300)
    out = await app.run(f"postmortem impact {BEFORE} {EVIDENCE}", channel=inc.channel_id)
    assert out == f"Impact start for {inc.id}'s postmortem: 2026-11-30 02:40 UTC ({EVIDENCE})."
    got = (await facts(app.services, inc.id)).impact_override
    assert got is not None
    assert (got.at, got.evidence, got.by, got.set_at) == (T0 - 1800, EVIDENCE, "U_IC", T0 + 300)
    [e] = await entries(app, inc.id, "command.postmortem")
    assert e["detail"]["result"] == "ok" and e["detail"]["impact_at"] == T0 - 1800
    assert e["detail"]["previous"] is None


async def test_setting_the_impact_again_replaces_it_and_the_audit_keeps_the_one_before(app):
    inc = await app.declare("GPU hang", sev=2)
    await app.run(f"postmortem impact {BEFORE} first look", channel=inc.channel_id)
    out = await app.run("postmortem impact 2026-11-30T02:10:30+00:00 the KV-cache panel", channel=inc.channel_id)
    assert "2026-11-30 02:10 UTC" in out and "It replaces 2026-11-30 02:40 UTC." in out
    got = (await facts(app.services, inc.id)).impact_override
    assert got is not None and got.at == T0 - 3570 and got.evidence == "the KV-cache panel"
    last = (await entries(app, inc.id, "command.postmortem"))[-1]
    assert '"evidence":"first look"' in last["detail"]["previous"]


async def test_an_offset_is_converted_to_utc_and_a_time_without_one_is_utc(app):
    inc = await app.declare("GPU hang", sev=2)
    await app.run("postmortem impact 2026-11-29T21:40-05:00 the panel", channel=inc.channel_id)
    assert (await facts(app.services, inc.id)).impact_override.at == T0 - 1800  # type: ignore[union-attr]
    await app.run("postmortem impact 2026-11-30T02:50 the panel", channel=inc.channel_id)
    assert (await facts(app.services, inc.id)).impact_override.at == T0 - 1200  # type: ignore[union-attr]


async def test_impact_after_detection_is_kept_with_a_note(app, clock):
    """An alert on a leading signal can fire before anyone is hurt: accepted, and said."""
    inc = await app.declare("GPU hang", sev=2)
    clock.advance(1800)
    out = await app.run("postmortem impact 2026-11-30T03:20Z users hurt from 03:20", channel=inc.channel_id)
    assert "Note: that is after detection (2026-11-30 03:10 UTC), so TTD reads negative" in out
    assert (await facts(app.services, inc.id)).impact_override is not None
    [e] = await entries(app, inc.id, "command.postmortem")
    assert e["detail"]["after_detection"] is True


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        (
            "postmortem impact 2026-11-30T03:30Z the panel",
            "2026-11-30 03:30 UTC is in the future (it is 2026-11-30 03:15 UTC now): give the time the impact "
            "started. Nothing was recorded.",
        ),
        ("postmortem impact 2026-10-01T00:00Z the panel", "is more than 30 days before the declaration"),
    ],
)
async def test_impact_refused_by_time_records_nothing(app, clock, typed, says):
    inc = await app.declare("GPU hang", sev=2)
    clock.advance(300)
    out = await app.run(typed, channel=inc.channel_id)
    assert says in out
    assert await pm_state(app, inc.id) == {}
    [e] = await entries(app, inc.id, "command.postmortem")
    assert e["detail"]["result"] == "refused"


async def test_impact_after_mitigation_is_refused(app, clock):
    inc = await app.declare("GPU hang", sev=2)
    clock.advance(600)
    await app.run("mitigated", channel=inc.channel_id)
    clock.advance(600)
    out = await app.run("postmortem impact 2026-11-30T03:25Z the panel", channel=inc.channel_id)
    assert out.startswith("2026-11-30 03:25 UTC is after the incident was mitigated (2026-11-30 03:20 UTC)")
    assert await pm_state(app, inc.id) == {}


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("postmortem impact yesterday the panel", "`yesterday` is not a time: give the impact start as an ISO-8601"),
        ("postmortem impact 2026-13-01T00:00Z the panel", "is not a real date and time"),
        ("postmortem impact 30/11/2026 the panel", "like `2026-11-30T01:05Z`"),
        (f"postmortem impact {BEFORE}", "say how you know it started then, after the time"),
        (f"postmortem impact {BEFORE}    ", "say how you know it started then"),
        ("postmortem impact", "give the impact start and your evidence"),
        ("postmortem rework -1", "rework is zero or more hours"),
        ("postmortem rework nan", "rework is zero or more hours"),
        ("postmortem rework inf", "rework is zero or more hours"),
        ("postmortem rework lots", "is not a number of hours"),
        ("postmortem rework", "give the hours of progress thrown away"),
        ("postmortem rework 2 3", "give the hours of progress thrown away"),
        ("postmortem impact-figures", "give requests failed, tokens refunded or both"),
        ("postmortem impact-figures requests=-5", "is not a whole number of zero or more"),
        ("postmortem impact-figures requests=1.5", "is not a whole number of zero or more"),
        ("postmortem impact-figures users=5", "`users=5` is not a figure"),
        ("postmortem impact-figures requests=1 requests=2", "`requests=` given twice"),
        ("postmortem retro", "`retro` is not a postmortem command"),
    ],
)
async def test_bad_input_gets_one_reply_saying_what_to_type_and_records_nothing(app, typed, says):
    inc = await app.declare("GPU hang", sev=2)
    out = await app.run(typed, channel=inc.channel_id)
    assert says in out, out
    assert "Usage:" in out  # and the usage, once
    assert await pm_state(app, inc.id) == {}
    assert await entries(app, inc.id, "command.postmortem") == []  # never reached the handler
    assert [e["detail"]["reason"] for e in await entries(app, inc.id, "command.invalid")] != []


# rework, figures -------------------------------------------------------------------------------


async def test_rework_and_figures_are_recorded_and_overwritten_one_at_a_time(app):
    inc = await app.declare("GPU hang", sev=2)
    ch = inc.channel_id
    assert "6.5 h of progress thrown away" in await app.run("postmortem rework 6.5", channel=ch)
    out = await app.run("postmortem impact-figures requests=120,000 tokens=3_500_000", channel=ch)
    assert out == f"Impact figures for {inc.id}: requests failed 120,000, tokens refunded 3,500,000."
    out = await app.run("postmortem impact-figures requests=130000", channel=ch)
    assert out == f"Impact figures for {inc.id}: requests failed 130,000."
    assert "(was 6.5 h)" in await app.run("postmortem rework 0", channel=ch)
    f = await facts(app.services, inc.id)
    assert (f.rework_hours, f.requests_failed, f.tokens_refunded) == (0.0, 130000, 3500000)
    audits = [e["detail"] for e in await entries(app, inc.id, "command.postmortem")]
    assert audits[2]["previous"] == {"requests_failed": 120000}
    assert audits[3]["previous"] == 6.5


# causes ----------------------------------------------------------------------------------------


async def test_the_three_causes_are_kept_apart_and_a_missing_one_is_named(app):
    inc = await app.declare("GPU hang", sev=2)
    ch = inc.channel_id
    out = await app.run("cause trigger a node-image rollout to 40 % of us-east-3", channel=ch)
    assert out == (
        f"Trigger for {inc.id}: a node-image rollout to 40 % of us-east-3\n"
        "Still missing: `cause root`; trigger and root cause are kept apart."
    )
    out = await app.run("cause root class: driver; 550.127 hangs under NCCL all-reduce", channel=ch)
    assert out == f"Root cause for {inc.id}: class: driver 550.127 hangs under NCCL all-reduce"
    await app.run("cause detection the XID alert pages only above 5 nodes", channel=ch)
    f = await facts(app.services, inc.id)
    assert f.causes["trigger"].text == "a node-image rollout to 40 % of us-east-3"
    assert f.causes["trigger"].root_class is None
    assert (f.causes["root"].root_class, f.causes["root"].text) == (
        "driver",
        "class: driver 550.127 hangs under NCCL all-reduce",
    )
    assert f.causes["detection"].by == "U_IC"


async def test_a_cause_set_again_is_overwritten_and_the_audit_keeps_the_text_before(app):
    inc = await app.declare("GPU hang", sev=2)
    ch = inc.channel_id
    await app.run("cause root a bad driver", channel=ch, user="U_IC")
    assert "is now" in await app.run("role scribe <@UBOB>", channel=ch, user="U_IC")
    out = await app.run("cause root class: config-push the canary skipped us-east-3", channel=ch, user="UBOB")
    assert "\nIt replaces: a bad driver (<@U_IC>)\n" in out
    f = await facts(app.services, inc.id)
    assert f.causes["root"].root_class == "config-push" and f.causes["root"].by == "UBOB"
    last = (await entries(app, inc.id, "command.cause"))[-1]["detail"]
    assert (last["previous"], last["previous_by"], last["root_class"]) == ("a bad driver", "U_IC", "config-push")


@pytest.mark.parametrize(
    ("typed", "says"),
    [
        ("cause", "say which cause"),
        ("cause why it broke", "`why` is not one of them"),
        ("cause root", "say what it was: `cause root <text>`"),
        ("cause root class: Driver Bug hangs", "`Driver` is not a root-cause class"),
        ("cause root class: driver_bug hangs", "like `cause root class: driver-bug <what went wrong>`"),
        ("cause root class: driver", "say what the root cause was after the class"),
        ("cause trigger class: driver a rollout", "only `cause root` takes a `class:`"),
    ],
)
async def test_bad_causes_are_refused_and_nothing_is_recorded(app, typed, says):
    inc = await app.declare("GPU hang", sev=2)
    out = await app.run(typed, channel=inc.channel_id)
    assert says in out, out
    assert await pm_state(app, inc.id) == {}


async def test_facts_are_still_answered_after_resolve(app):
    inc = await app.declare("GPU hang", sev=2)
    ch = inc.channel_id
    await app.run("resolved", channel=ch)
    assert (await app.run("cause trigger a config push", channel=ch)).startswith("Trigger for")
    assert "Impact figures" in await app.run("postmortem impact-figures tokens=5", channel=ch)
    assert "impact start" in (await app.run(f"postmortem impact {BEFORE} {EVIDENCE}", channel=ch)).lower()
    # Still closed to what an incident does while open:
    assert "is resolved; here you can still use" in await app.run("sev 1 worse", channel=ch)


async def test_outside_an_incident_channel_nothing_is_recorded(app):
    out = await app.run("cause root a bad driver", channel="C_GENERAL")
    assert out.startswith("`cause` works inside an incident channel")


async def test_resolved_incident_ids_reads_the_incidents_themselves(app, clock):
    a = await app.declare("one", sev=2)
    b = await app.declare("two", sev=2)
    c = await app.declare("three", sev=2)
    await app.run("resolved", channel=a.channel_id)
    clock.advance(86400)
    await app.run("resolved", channel=c.channel_id)
    assert await resolved_incident_ids(app.services, None) == [a.id, c.id]
    assert await resolved_incident_ids(app.services, T0 + 86400) == [c.id]
    assert await resolved_incident_ids(app.services, T0 + 86401) == []
    assert b.id not in await resolved_incident_ids(app.services, None)


# the pure rules --------------------------------------------------------------------------------


def test_parse_utc():
    assert rules.parse_utc("2026-11-30T02:40Z") == T0 - 1800
    assert rules.parse_utc("2026-11-30T02:40:00.000+00:00") == T0 - 1800
    assert rules.parse_utc("2026-11-30 02:40") == T0 - 1800
    for bad in ("", "02:40", "2026-11-30", "2026-11-30T25:00Z", "now"):
        with pytest.raises(ValueError):
            rules.parse_utc(bad)


def test_impact_refusal_and_note():
    declared = T0
    assert rules.impact_refusal(T0 - 60, T0, declared, None, None) is None
    assert "in the future" in (rules.impact_refusal(T0 + 1, T0, declared, None, None) or "")
    assert "after the incident was resolved" in (rules.impact_refusal(T0 - 10, T0, declared, None, T0 - 20) or "")
    assert rules.impact_refusal(T0 - 30 * 86400, T0, declared, None, None) is None
    assert "30 days" in (rules.impact_refusal(T0 - 30 * 86400 - 1, T0, declared, None, None) or "")
    assert rules.impact_note(T0 - 1, T0) is None and rules.impact_note(T0 + 1, T0) is not None


def test_split_root():
    assert rules.split_root("the driver") == (None, "the driver")
    assert rules.split_root("class: driver the driver") == ("driver", "the driver")
    assert rules.split_root("Class:driver - the driver") == ("driver", "the driver")
    assert rules.split_root("class: config-push, canary skipped") == ("config-push", "canary skipped")
    assert rules.root_text("CLASS: kv-cache: eviction storm") == ("kv-cache", "class: kv-cache eviction storm")
    for bad in ("class: Driver x", "class: -x y", "class: a--b y", "class: x", "class:  ; y"):
        with pytest.raises(ValueError):
            rules.split_root(bad)


def test_counts_and_hours():
    assert rules.parse_count("requests", "1,200") == 1200
    assert rules.parse_hours("0") == 0.0 and rules.parse_hours("6.5") == 6.5
    for bad in ("-1", "1e400", "nan", "x"):
        with pytest.raises(ValueError):
            rules.parse_hours(bad)
    for bad in ("-1", "1.5", "١٢", "", "1e3"):
        with pytest.raises(ValueError):
            rules.parse_count("tokens", bad)


def test_today_is_utc():
    assert rules.today(T0) == date(2026, 11, 30)
