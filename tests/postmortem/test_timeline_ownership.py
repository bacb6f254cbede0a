"""The postmortem renders each capability's audit actions as that capability declared them
(`reg.timeline` in its `register`), and names none of them itself."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from bot.core.registry import Registry
from bot.core.timeline import COMMAND
from bot.postmortem import capability as postmortem
from bot.postmortem import document
from bot.runtime import CAPABILITIES

POSTMORTEM = Path(document.__file__).parent


def _alone(register: Any) -> Registry:
    reg = Registry()
    register(reg)
    return reg


def _strings(path: Path) -> set[str]:
    """Every string literal in a module (match-case patterns and f-string parts included)."""
    return {
        n.value
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant) and isinstance(n.value, str)
    }


def _others() -> dict[str, str]:
    """Every audit action another capability declares or writes through the executor -> its owner."""
    out: dict[str, str] = {}
    for register in CAPABILITIES:
        if register is postmortem.register:
            continue
        reg = _alone(register)
        owner = register.__module__
        out.update({action: owner for action in reg.timelines})
        out.update({f"{COMMAND}{name}": owner for name in reg.routes})
    return out


def _imported(path: Path) -> set[str]:
    return {
        f"{n.module}.{a.name}"
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.ImportFrom) and n.module
        for a in n.names
    }


def _named(path: Path, others: dict[str, str]) -> list[str]:
    """Another capability's actions a module names: whole (`lever.done`), or the way a switch on
    them starts (`command.`, `lever.`: the prefix stripped, then the bare name matched)."""
    prefixes = {a.split(".", 1)[0] + "." for a in others}
    found = [f"{s!r}" for s in _strings(path) if s in others or any(s.startswith(p) for p in prefixes)]
    found += [i for i in _imported(path) if i in ("bot.core.timeline.COMMAND", "bot.core.timeline.command_action")]
    return found


def test_the_postmortem_names_no_other_capabilitys_action():
    others = _others()
    found = {path.name: got for path in sorted(POSTMORTEM.glob("*.py")) if (got := _named(path, others))}
    assert not found, f"bot/postmortem names other capabilities' audit actions: {found}"


def test_the_check_sees_a_name_written_in_the_postmortem(tmp_path):
    """The check above is not vacuous: the old switch on command names is caught."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        'def f(action):\n    match action.removeprefix("command."):\n        case "assess":\n'
        '            return 1\n    return action == "lever.done"\n'
    )
    assert _named(bad, _others()) != []
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("from bot.core.timeline import COMMAND\n")
    assert _named(sneaky, _others()) == ["bot.core.timeline.COMMAND"]
    assert _named(Path(__file__).parent / "__init__.py", _others()) == []


def test_each_action_is_declared_once_by_the_capability_that_writes_it():
    seen: dict[str, str] = {}
    for register in CAPABILITIES:
        for action in _alone(register).timelines:
            assert action not in seen, f"{action} declared by {seen[action]} and {register.__module__}"
            seen[action] = register.__module__
    # A command's line is declared by the capability that registered the command.
    for register in CAPABILITIES:
        reg = _alone(register)
        for action in reg.timelines:
            if action.startswith(COMMAND):
                assert action.removeprefix(COMMAND) in reg.routes, f"{register.__module__} declares {action}"


def test_a_registered_line_twice_is_refused():
    reg = Registry()
    reg.timeline("x.y", _detail(), lambda d, by: None)
    with pytest.raises(RuntimeError, match="twice"):
        reg.timeline("x.y", _detail(), lambda d, by: None)


def _detail() -> Any:
    from bot.core.timeline import Detail

    return Detail


def _all() -> Registry:
    reg = Registry()
    for register in CAPABILITIES:
        register(reg)
    return reg


def e(action: str, actor: str = "UOPS", **detail: Any) -> dict[str, Any]:
    return {"action": action, "actor": actor, "detail": detail, "ts": "2026-11-30T03:30:00Z"}


def test_an_undeclared_action_reads_neutrally_and_a_bad_detail_falls_back_to_it():
    reg = _all()
    assert document.phrase(e("widget.frobbed", "system"), reg) == "`widget.frobbed` by Firebreak"
    assert document.phrase(e("command.widget", result="ok"), reg) == "`widget` by @UOPS"
    # A detail its declaration cannot read (an old entry's shape) still gets a line, never a crash.
    assert document.phrase(e("lever.done", request=["not", "a", "name"]), reg) == "`lever.done` by @UOPS"
    assert document.phrase(e("command.sev", args={"reason": 7}, sev_from=1, sev_to=2), reg) == "`sev` by @UOPS"


def test_every_lever_event_has_its_line():
    from levers.requests import LeverEvent
    from levers.timeline import APPLY, EVENTS

    assert set(EVENTS) | {APPLY} == set(LeverEvent) and APPLY not in EVENTS
    reg = _all()
    ids = {"request": "REQ-3", "lever": "kueue-hold", "target": "research-h100", "cell": "us-east-1"}
    assert document.phrase(e("lever.stale", **ids), reg) == "Lever REQ-3 `kueue-hold` research-h100 (us-east-1): stale"
    assert document.phrase(e("lever.undo_unsettled", "UIC", **ids), reg) == (
        "Lever REQ-3 `kueue-hold` research-h100 (us-east-1) undo not settled by @UIC"
    )
