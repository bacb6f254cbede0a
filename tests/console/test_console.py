"""`firebreak console`: a scripted session in a child process, as a newcomer would run it."""

from __future__ import annotations

import subprocess
import sys

from tests.support.core import REPO, run_cli

SESSION = """\
# declare, hand out a role, raise, resolve
/incident declare GPU hang in us-east --sev 3 --cell us-east-3
/incident role ops @bob
/incident sev 2 training fleet stalled
/incident resolved
audit
"""


def test_scripted_session_shows_the_card_the_replies_and_the_audit(tmp_path):
    script = tmp_path / "gameday.txt"
    script.write_text(SESSION)
    out = run_cli("console", "--script", str(script), "--user", "alice")
    assert out.returncode == 0, out.stdout + out.stderr
    text = out.stdout
    assert "EMBEDDED IN-MEMORY STORE" in text and "REDIS_URL is not set" in out.stderr
    # The card, pinned, then edited in place as the incident moves.
    assert "━━ INC-1: GPU hang in us-east ━━" in text
    assert "📌 pinned: INC-1 SEV3 active" in text
    assert "*Severity*: 🟠 SEV2" in text and "*Ops lead*: @bob" in text
    assert "*Status*: resolved" in text
    # Replies only the actor sees, and the auto-switch into the incident channel.
    assert "only @alice sees: Declared INC-1 (SEV3)" in text
    assert "(you are now in #inc-" in text and "@alice #inc-" in text
    assert "only @alice sees: INC-1 is now SEV2 (was SEV3)." in text
    # The audit: one entry per line that ran a command, chain verified.
    for n, action in enumerate(["command.declare", "command.role", "command.sev", "command.resolved"], 1):
        assert f"  {n}  " in text and action in text
    assert "audit chain OK (4 entries)" in text


def test_a_failing_line_makes_the_script_exit_non_zero(tmp_path):
    script = tmp_path / "bad.txt"
    script.write_text("/incident declare Disk full --sev 2\n/incident sev 9 worse\nfrobnicate\n/incident status\n")
    out = run_cli("console", "--script", str(script))
    assert out.returncode == 1
    assert "Usage: `/incident sev <1-4> <reason>`" in out.stdout
    assert "Unknown console command `frobnicate`" in out.stdout
    assert "*INC-1* SEV2 · active · Disk full" in out.stdout  # later lines still ran
    assert out.stdout.strip().endswith("script: 2 line(s) failed: line 2, 3")
    assert "Traceback" not in out.stdout + out.stderr


def test_buttons_are_numbered_and_pressed_as_the_current_user(tmp_path):
    script = tmp_path / "handoff.txt"
    script.write_text(
        '/incident declare Router flapping\n/incident handoff ic @carol --threads "bgp; comms"\n'
        "as @carol\npress 1\n/incident status\n"
    )
    out = run_cli("console", "--script", str(script), "--user", "alice")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "IC handing to @carol" in out.stdout and "[1] Accept" in out.stdout
    assert "(pressing [1] Accept as @carol)" in out.stdout
    assert "only @carol sees: You are now Incident Commander in INC-1." in out.stdout
    assert "Roles: ic @carol" in out.stdout


def test_interactive_session_reads_stdin_until_quit():
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "console"],
        cwd=REPO,
        capture_output=True,
        text=True,
        input="help\n/incident declare Queue stuck\nchannel\nchannel general\nquit\n",
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "press N" in proc.stdout and "Declared INC-1 (SEV3)" in proc.stdout
    assert " 1. #general" in proc.stdout and "*2. #inc-" in proc.stdout
    assert "(you are now in #general)" in proc.stdout


def test_unreadable_script_is_a_one_line_error(tmp_path):
    out = run_cli("console", "--script", str(tmp_path / "missing.txt"))
    assert out.returncode == 2
    assert out.stderr.strip() == f"firebreak: cannot read script {tmp_path / 'missing.txt'}: No such file or directory"
