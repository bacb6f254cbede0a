"""Running it: restarts keep state, health and readiness, start-up refusals, Slack edge cases."""

from __future__ import annotations

import aiohttp

from bot.incidents.store import repo
from bot.server import UNSIGNED
from tests.support.core import BOB, IC, TITLE, run_cli
from tests.support.harness import start_app
from tests.support.ports import free_port

TOKENS = {"SLACK_BOT_TOKEN": "xoxb-test", "SLACK_SIGNING_SECRET": "s3cret"}


async def _get(url: str) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s, s.get(url) as resp:
        return resp.status, await resp.json()


async def test_state_survives_a_restart_of_the_app(slack, redis_url, clock):
    app = await start_app(slack, redis_url, clock)
    try:
        ch = (await app.declare(TITLE, sev=3, user=IC)).channel_id
        await app.run(f"role ops <@{BOB}>", user=IC, channel=ch)
        await app.run("sev 1 users down", user=IC, channel=ch)
    finally:
        await app.stop()
    slack.responses.clear()  # the new process numbers its response_url keys from the start again
    app2 = await start_app(slack, redis_url, clock)
    try:
        out = await app2.run("status", user=BOB, channel=ch)
        assert "*INC-1* SEV1 · active · GPU hang in us-east" in out
        assert f"Roles: ic <@{IC}>, ops <@{BOB}>" in out
        await app2.run("declare Second incident", user=IC)
        assert (await repo(app2.services).open_ids()) == ["INC-1", "INC-2"]  # the counter survived too
    finally:
        await app2.stop()


async def test_healthz_and_readyz(app):
    assert await _get(app.url + "/healthz") == (200, {"ok": True})
    assert await _get(app.url + "/readyz") == (200, {"ok": True, "redis": True, "audit": UNSIGNED})


async def test_readyz_is_503_when_redis_is_unreachable(slack, clock):
    app = await start_app(slack, f"redis://127.0.0.1:{free_port()}/0", clock)
    try:
        assert await _get(app.url + "/healthz") == (200, {"ok": True})
        assert await _get(app.url + "/readyz") == (503, {"ok": False, "redis": False, "audit": UNSIGNED})
    finally:
        await app.runner.cleanup()


def test_a_bad_policy_file_is_refused_at_start_with_file_line_reason(tmp_path):
    (tmp_path / "severity.yaml").write_text(
        "users:\n  - {sev: 1, burn_at_least: 14.4}\n  - {sev: 9, burn_at_least: 6}\n"
        "gpu_hours: []\nquality: 1\nsecurity: 1\n"
    )
    out = run_cli("serve", "--port", "0", env={**TOKENS, "FIREBREAK_POLICY_DIR": str(tmp_path)})
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith(f"firebreak: {tmp_path}/severity.yaml:3: users.1.sev: ")
    assert "less than or equal to 4" in last


def test_a_policy_file_that_is_not_yaml_is_refused_with_its_line(tmp_path):
    (tmp_path / "commands.yaml").write_text("commands:\n  sev: {allowed: [ic]\n  role: x\n")
    out = run_cli("serve", "--port", "0", env={**TOKENS, "FIREBREAK_POLICY_DIR": str(tmp_path)})
    assert out.returncode == 2
    assert f"firebreak: {tmp_path}/commands.yaml:" in out.stderr and "not valid YAML" in out.stderr


def test_missing_slack_bot_token_is_one_line_and_exit_2():
    out = run_cli("serve", env={"SLACK_SIGNING_SECRET": "s3cret"})
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "firebreak: missing SLACK_BOT_TOKEN: set it in the environment "
        "(or run `firebreak console` to try Firebreak without Slack)"
    ]
    assert out.stdout == ""


async def test_channel_name_taken_gets_a_suffix(app):
    app.slack.add_channel("inc-20261130-1-gpu-hang-in-us-east")
    await app.declare(TITLE, sev=3, user=IC)
    ch = app.slack.state.find_by_name("inc-20261130-1-gpu-hang-in-us-east-2").id  # as Slack created it
    names = [c.args["name"] for c in app.slack.calls_to("conversations.create")]
    assert names == ["inc-20261130-1-gpu-hang-in-us-east", "inc-20261130-1-gpu-hang-in-us-east-2"]
    inc = await app.incident("INC-1")
    assert (inc.channel_id, inc.channel_name) == (ch, "inc-20261130-1-gpu-hang-in-us-east-2")
    assert app.slack.channel(ch).pins == [inc.card_ts]


async def test_channel_name_is_capped_at_80_characters(app):
    await app.run("declare " + "very long title " * 12, user=IC)
    name = app.slack.calls_to("conversations.create")[0].args["name"]
    assert len(name) <= 80 and name.startswith("inc-20261130-1-very-long-title") and not name.endswith("-")


async def test_channel_name_folds_accents_instead_of_dropping_words(app):
    out = await app.run("declare Pánico ñandú in us-east-3", user="U_IC")
    assert "Declared INC-1" in out, out
    name = app.slack.calls_to("conversations.create")[-1].args["name"]
    assert name == "inc-20261130-1-panico-nandu-in-us-east-3"
