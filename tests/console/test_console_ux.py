"""The console beyond commands: filling a form, posting a message, stable button numbers, quiet logs."""

from __future__ import annotations

import json

from bot.clock import ManualClock
from bot.console.main import LOG_PATH, open_console
from bot.incidents.store import repo
from tests.support.core import run_cli
from tests.support.harness import T0


def _number(console, label: str) -> int:
    return max(n for n, b in console.render.buttons.items() if b.label == label)


async def test_the_post_update_form_can_be_typed_into_and_submitted(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    out: list[str] = []
    clock = ManualClock(T0)
    async with open_console("erin", out.append, clock=clock) as c:
        assert await c.line("/incident declare Chat latency --sev 2 --product Chat --region us-east")
        clock.advance(16 * 60)
        await c.svc.scheduler.tick()  # the first-update reminder, with its buttons
        assert await c.line(f"press {_number(c, 'Post update')}")
        assert any(line.startswith("modal opened:") for line in out)
        assert await c.line("Chat, us-east: latency back to normal")  # plain text fills the open form
        assert await c.line("submit")
        assert c.modal is None
        assert any("only @erin sees: Update posted." in line for line in out), "\n".join(out)
        inc = await repo(c.svc).get("INC-1")
        assert inc.last_update_text == "Chat, us-east: latency back to normal"


async def test_a_refused_form_stays_open_with_the_reason(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    out: list[str] = []
    clock = ManualClock(T0)
    async with open_console("erin", out.append, clock=clock) as c:
        assert await c.line("/incident declare Chat latency --sev 2 --cell us-east-3")
        clock.advance(16 * 60)
        await c.svc.scheduler.tick()
        assert await c.line(f"press {_number(c, 'Post update')}")
        assert await c.line("type us-east-3 is slow")
        assert not await c.line("submit")
        assert c.modal is not None and any("the form says: Not posted" in line for line in out)
        assert await c.line("cancel") and c.modal is None


async def test_say_posts_a_message_event_and_a_pasted_secret_is_flagged(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    out: list[str] = []
    async with open_console("erin", out.append) as c:
        assert await c.line("/incident declare GPU hang")
        assert await c.line("say the token is hf_abcdefghijklmnopqrstuvwxyz0123456789")
        assert any("looks like it contains a Hugging Face token" in line for line in out), "\n".join(out)
        entries = await c.svc.audit.since(0)
        flag = [e for e in entries if e["action"] == "command.secret_flag"]
        assert flag and flag[0]["detail"]["source"] == "event" and "hf_" not in json.dumps(flag)


async def test_an_edited_messages_old_button_numbers_stop_working(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    out: list[str] = []
    async with open_console("erin", out.append) as c:
        assert await c.line("/incident declare Router flapping")
        assert await c.line("/incident handoff ic @carol")
        accept = _number(c, "Accept")
        assert await c.line("as @carol") and await c.line(f"press {accept}")
        assert not await c.line(f"press {accept}")  # the handoff message was edited: its Accept is gone
        assert out[-1].startswith(f"Button [{accept}] was replaced when its message was edited")


async def test_a_spelled_out_mention_teaches_the_name(monkeypatch):
    monkeypatch.delenv("REDIS_URL", raising=False)
    out: list[str] = []
    async with open_console("erin", out.append) as c:
        assert await c.line("/incident declare Router flapping")
        assert await c.line("/incident role ops <@UBOB|bob>")
        assert any("only @erin sees: @bob is now Ops lead in INC-1." in line for line in out), "\n".join(out)


def test_console_logs_go_to_a_file_not_between_the_replies(tmp_path):
    script = tmp_path / "s.txt"
    script.write_text("/incident declare GPU hang\n/incident status\n")
    before = LOG_PATH.stat().st_size if LOG_PATH.exists() else 0
    out = run_cli("console", "--script", str(script))
    assert out.returncode == 0, out.stdout + out.stderr
    assert f"Firebreak's own log goes to {LOG_PATH}." in out.stdout
    assert "request_done" not in out.stdout + out.stderr
    assert "request_done" in LOG_PATH.read_text(encoding="utf-8")[before:]
