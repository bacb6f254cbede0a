"""`firebreak console`: a scripted session in a child process, as a newcomer would run it."""

from __future__ import annotations

import re
import subprocess
import sys

from levers.catalogue import LEVERS
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
    assert "EMBEDDED IN-MEMORY STORE" in text and "no --redis: state lives in memory" in out.stderr
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


# Every lever of the catalogue, dry-run on the demo fleet as its docs (docs/operating.md) name them.
LEVER_LINES = {
    "kueue-hold": "research-h100",
    "kueue-hold-drain": "research-h100",
    "jobset-suspend": "train-llm/pretrain-405b",
    "node-quarantine": "gpu-a3-0117 reason=xid79",
    "route-weight": "edge/chat-global backend=cell-us-east-3",
    "keda-pause": "serve-chat/llm-70b",
    "killswitch": "toolgw/toolgw-flags tenant=acme level=read",
    "rollout-abort": "serve-chat/llm-70b",
    "sandbox-quarantine": "sbx-tenant-acme/sess-7f3a9c-0",
    "remediation-pause": "gpu-nodes",
}


SUSPENDED = r": (?P<gpu_hours>\d+) GPU-hours \(512 GPUs x (?P<minutes>\d+) min since the last checkpoint"


def test_every_levers_plan_in_the_console_states_its_price(tmp_path):
    assert sorted(LEVER_LINES) == sorted(LEVERS), "a lever the console test does not pull"
    script = tmp_path / "prices.txt"
    script.write_text(
        "/incident declare Price every lever --sev 2 --cell us-east-3\n"
        + "".join(f"/incident role {seat} @you\n" for seat in ("ops", "model", "security"))
        + "".join(f"/incident lever {name} {args} --dry-run\n" for name, args in LEVER_LINES.items())
    )
    out = run_cli("console", "--script", str(script), "--user", "you")
    assert out.returncode == 0, out.stdout + out.stderr
    # One section per pulled lever: its typed line up to the next prompt.
    sections = {
        m.group(1): m.group(2)
        for m in re.finditer(r"> /incident lever (\S+) .*?--dry-run\n(.*?)(?=\n@you |\Z)", out.stdout, re.S)
    }
    assert sorted(sections) == sorted(LEVER_LINES)
    prices: dict[str, list[str]] = {}
    for name, text in sections.items():
        assert "(dry run): plan:" in text and "Price (read now):" in text, (name, text)
        lines = text.split("Price (read now):", 1)[1].splitlines()
        prices[name] = [ln.strip() for ln in lines if ln.strip().startswith("• ")]
        assert prices[name], (name, text)
        # The demo answers every figure a default query names: none is unknown for want of a series.
        assert not any("not one the demo fleet simulates" in ln for ln in prices[name]), (name, prices[name])
    # What the demo fleet holds, priced from it (docs/operating.md): the 512-GPU pretraining gang
    # checkpointed 40 minutes before the fleet started, the route's third cell serving 40 req/s…
    # (the price grows by the minute from the fleet's start: 341 at 40 min, 352 at 41 min 15 s)
    [suspend] = [m for ln in prices["jobset-suspend"] if (m := re.search(SUSPENDED, ln))]
    assert 341 <= int(suspend["gpu_hours"]) <= 352 and suspend["minutes"] in ("40", "41"), suspend.group(0)
    assert (
        "• traffic moved off cell-us-east-3: 16 req/s (cell-us-east-3 serves 40 req/s now (its cell's vLLM finished"
        " requests, all routes); the step takes 40%)" in prices["route-weight"]
    )
    assert any(
        ln.startswith("• receiver cell-us-east-1 (us-east-1): 40 → 48 req/s after the step")
        for ln in prices["route-weight"]
    )
    # The demo's trigger asks the demo's Prometheus, which is Firebreak's too: the figure says whose.
    assert any(
        "): 6 now (15 min ago 6: flat; Firebreak's Prometheus, the trigger's serverAddress)" in ln
        for ln in prices["keda-pause"]
    ), "\n".join(prices["keda-pause"])
    assert any("admitted workloads evicted: 512 GPUs" in ln for ln in prices["kueue-hold-drain"])
    assert any(
        ln.endswith("revision 1 (ReplicaSet llm-70b-6d9f7c8b5, pod-template-hash 6d9f7c8b5)")
        for ln in prices["rollout-abort"]
    )
    assert any("40 nodes (40 healthy now)" in ln for ln in prices["remediation-pause"])
    # …and no default query for a tool gateway's calls or a sandbox's sessions: unknown, saying why.
    for name in ("killswitch", "sandbox-quarantine"):
        assert any(": unknown (policy price." in ln for ln in prices[name]), prices[name]
