"""No text Firebreak keeps can carry a secret, and no argument a control character (issue 24).

Every command's free text is checked when it is parsed, through the real app: refused in one
line naming the kind, and the secret reaches neither the fake Slack's recorded calls nor the
audit log nor anywhere in Redis.
"""

from __future__ import annotations

import json

import pytest

from bot import redact
from bot.comms.secrets import scan
from bot.redact import MAX_SCAN
from tests.support.core import IC, TITLE, nowhere
from tests.support.harness import audit_entries

SLACK = "xoxb-2417-1234567890-AbCdEfGhIjKlMnOp"
AWS = "AKIAQWERTYUIOPASDFGH"
GITHUB = "ghp_" + "Z" * 36
HF = "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEF12"  # a policy pattern (policies/comms.yaml)


def said(out: str) -> str:
    """The text of a reply, whether it came as the ack's JSON body or through response_url."""
    try:
        return str(json.loads(out)["text"])
    except (ValueError, KeyError, TypeError):
        return out


@pytest.mark.parametrize(
    "text, secret, label, kind",
    [
        ("breakglass kueue-hold 30 ops lead gave me {s}", SLACK, "reason", "Slack token"),
        ("cause root the job ran with {s} baked in", AWS, "cause", "AWS access key"),
        (
            'action rotate the CI key --owner <@U2ALEX> --due 2030-01-15 --verify "the old {s} is refused"',
            GITHUB,
            "verification",
            "GitHub token",
        ),
        (
            "action move {s} to the vault --owner <@U2ALEX> --due 2030-01-15 --verify x",
            HF,
            "action",
            "Hugging Face token",
        ),
        ("sev 1 customer data readable with {s}", SLACK, "reason", "Slack token"),
        ('handoff ic <@U3BOB> --threads "rotate {s}; page vendor"', AWS, "handoff thread", "AWS access key"),
        ("postmortem impact 2026-11-30T03:05:00Z the log showed {s}", SLACK, "evidence", "Slack token"),
        ("update Chat API in us-east: fixed by rotating {s}", HF, "update", "Hugging Face token"),
        # A word no field takes (an unknown subcommand): the whole text is scanned first, so the
        # usage error that would echo the word is never made.
        ("cause {s} was pasted here", SLACK, "`cause` command", "Slack token"),
    ],
)
async def test_a_secret_in_any_free_text_is_refused_and_never_stored(app, text, secret, label, kind):
    inc = await app.declare(TITLE, sev=2, user=IC, cells=())
    before = len(app.slack.calls)
    out = said(await app.run(text.format(s=secret), user=IC, channel=inc.channel_id))
    an = "an" if kind[0] in "AEIOU" else "a"
    assert out == (
        f"That {label} contains {an} {kind}; nothing was stored. Paste a link to the secret manager "
        "entry instead, and rotate that credential now."
    )
    assert len(app.slack.calls) == before  # nothing posted, no card refreshed
    [e] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.invalid"]
    assert e["detail"]["reason"] == out
    assert f"[redacted {kind}]" in e["detail"]["text"]
    assert (await app.incident(inc.id)).sev == 2
    await nowhere(app, secret)


async def test_a_secret_at_the_audits_cut_is_redacted_whole(app):
    """The invalid-input entry keeps 500 characters: scrubbed first, the cut never leaves a head."""
    inc = await app.declare(TITLE, sev=2, user=IC, cells=())
    pad = "x" * (500 - len("breakglass kueue-hold 30 ") - 12)
    out = said(await app.run(f"breakglass kueue-hold 30 {pad} {SLACK}", user=IC, channel=inc.channel_id))
    # Too long for a reason, so it names the command rather than the field: still one line.
    assert out.startswith("That `breakglass` command contains a Slack token; nothing was stored.")
    [e] = [e for e in await audit_entries(app, inc.id) if e["action"] == "command.invalid"]
    assert SLACK[:11] not in e["detail"]["text"] and len(e["detail"]["text"]) <= 500
    await nowhere(app, SLACK[:11])


async def test_a_declare_title_with_a_secret_opens_no_channel(app):
    creates = len(app.slack.calls_to("conversations.create"))
    out = said(await app.run(f"declare GPU trouble after {SLACK} leaked", user=IC))
    assert out.startswith("That title contains a Slack token; nothing was stored.")
    assert len(app.slack.calls_to("conversations.create")) == creates
    await nowhere(app, SLACK)


async def test_a_command_past_the_scan_cap_is_refused_in_one_line(app):
    inc = await app.declare(TITLE, sev=2, user=IC, cells=())
    out = said(await app.run("update " + "a" * MAX_SCAN, user=IC, channel=inc.channel_id))
    assert out == (
        f"That command is {MAX_SCAN + 7:,} characters; Firebreak takes at most {MAX_SCAN:,}. "
        "Put the details in a document and paste its link."
    )


async def test_the_crafted_password_url_message_is_flagged_without_stalling(app):
    """40 KB of ``a-a-a-…`` took Python's re 2.9 s on the password-in-a-URL pattern; on RE2 it is
    a linear scan (bench/scan_bench.py times it). Here: the outcome. The flood is not a secret,
    and the same message with a real one is still found past the first 40,000 characters."""
    inc = await app.declare(TITLE, sev=2, user=IC, cells=())
    flood = "a-" * 20_000
    policy = app.services.policy.comms.secret_patterns
    assert scan(flood, policy) == []
    assert scan(flood + " https://admin:hunter22@db.internal/x", policy) == ["password in a URL"]
    out = said(await app.run("update " + flood[: MAX_SCAN - 100], user=IC, channel=inc.channel_id))
    assert "characters" in out and "Traceback" not in out  # too long for an update: refused, quickly


@pytest.mark.parametrize(
    "text, said_",
    [
        (
            'lever kueue-hold "edge\n/route" --cell us-east-3',
            "The target has a control character (newline) at position 5",
        ),
        (
            'lever kueue-hold research-h100 --cell "us-east-3\n"',
            "The cell has a control character (newline) at position 10",
        ),
        ('lever kueue-hold "research\x1bh100"', "The target has a control character (escape) at position 9"),
        ('declare "GPU\ntrouble"', "The title has a control character (newline) at position 4"),
    ],
)
async def test_a_control_character_in_an_argument_is_refused_with_its_position(app, text, said_):
    ch = (await app.declare(TITLE, sev=2, user=IC)).channel_id
    before = len(app.slack.calls)
    out = said(await app.run(text, user=IC, channel=ch))
    assert out.startswith(said_ + "; type it on one line."), out
    assert len(app.slack.calls) == before


async def test_prose_keeps_its_lines(app):
    inc = await app.declare(TITLE, sev=2, user=IC, cells=())
    out = said(await app.run("cause trigger a bad rollout\nof the router config", user=IC, channel=inc.channel_id))
    assert "control character" not in out


def test_the_one_search_for_a_clean_text_finds_what_each_pattern_finds():
    # find() and scrub_text() first search one alternation of every pattern (a clean text, the
    # usual case, costs one search): each pattern's own inline flags must stay its own.
    case_sensitive = [("test ticket", r"FBTESTKEY-[0-9]{6}")]
    assert redact.find("fbtestkey-123456 is lower case", case_sensitive) == []
    assert redact.find("FBTESTKEY-123456", case_sensitive) == ["test ticket"]
    assert redact.find("BEARER " + "a" * 20) == ["bearer token"]  # the (?i) pattern still ignores case
    assert redact.find(f"{SLACK} and {AWS} and {GITHUB}") == ["Slack token", "AWS access key", "GitHub token"]
    assert redact.find("declare Chat API 5xx in us-east --sev 2") == []
    clean = "nothing secret here"
    assert redact.scrub_text(clean) is clean
    assert redact.scrub_text(f"key {AWS}") == "key [redacted AWS access key]"
