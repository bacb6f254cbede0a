"""Lever request states are LeverState end to end: every state the code writes is a member, Redis
holds their strings, and the transition script's in-flight states are the enum's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from bot.store import Keys, connect
from levers import lua
from levers.requests import IN_FLIGHT, STATES, LeverEvent, LeverRequest, LeverState
from levers.store import LeverStore, Moved

REPO = Path(__file__).resolve().parents[2]
WRITERS = [p for d in ("levers", "bot") for p in (REPO / d).rglob("*.py") if "demo" not in p.parts]


def _enum_member(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "LeverState"


def _written() -> list[tuple[str, int, ast.expr]]:
    """Every state a transition moves from or to, and every state a LeverRequest is built with."""
    out = []
    for path in WRITERS:
        for n in ast.walk(ast.parse(path.read_text())):
            if not isinstance(n, ast.Call):
                continue
            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
            if name == "transition" and len(n.args) >= 3:
                froms = n.args[1].elts if isinstance(n.args[1], ast.Set) else [n.args[1]]
                out += [(path.name, n.lineno, x) for x in [*froms, n.args[2]]]
            if name == "LeverRequest":
                out += [(path.name, n.lineno, k.value) for k in n.keywords if k.arg == "state"]
    return out


def test_every_state_the_code_writes_is_a_lever_state():
    written = _written()
    assert len(written) > 20  # the executor, undo, reconcile, approvals and pull all write states
    literal = [(f, line) for f, line, x in written if isinstance(x, ast.Constant)]
    assert not literal, f"a lever state written as a plain string: {literal}"
    # Names (a variable holding the state) are typed LeverState, which mypy --strict checks.
    for f, line, x in written:
        if _enum_member(x):
            assert x.attr in LeverState.__members__, f"{f}:{line}: LeverState.{x.attr}"


def test_refused_is_a_state_that_is_reported_never_stored():
    assert LeverState.refused not in STATES and set(STATES) | {LeverState.refused} == set(LeverState)
    assert all(s.value == s.name for s in LeverState)  # the strings Redis and the audit hold


def test_a_state_outside_the_enum_is_refused_by_the_record():
    with pytest.raises(ValidationError):
        LeverRequest(
            id="REQ-1", incident="INC-1", lever="kueue-hold", target="q", cell="c", context="c",
            requester="U", state="half-done", created_at=0,
        )  # fmt: skip


def test_the_transition_scripts_in_flight_states_are_the_enums():
    named = set(re.findall(r"to == '([a-z_]+)'", lua.TRANSITION))
    assert named == {s.value for s in IN_FLIGHT}
    assert {int(m) for m in re.findall(r"return (-?\d+)", lua.TRANSITION)} == {m.value for m in Moved}


def test_every_lever_event_is_an_action_of_its_own():
    assert {e.action for e in LeverEvent} == {f"lever.{e.value}" for e in LeverEvent}
    assert {LeverEvent.settled(s) for s in (LeverState.done, LeverState.failed, LeverState.stale)} <= set(LeverEvent)


async def test_redis_holds_the_states_strings_and_a_state_it_never_holds_is_refused(redis_url):
    r = connect(redis_url)
    try:
        store = LeverStore(r)
        rec = LeverRequest(
            id="REQ-77", incident="INC-9", lever="kueue-hold", target="q", cell="c", context="c",
            requester="U", state=LeverState.approved, created_at=1.0,
        )  # fmt: skip
        await store.create(rec)
        assert await r.hget(Keys.levers("req:REQ-77"), "state") in (b"approved", "approved")
        assert await store.transition("REQ-77", {LeverState.approved}, LeverState.executing, started_at=2.0)
        got = await store.get("REQ-77")
        assert got is not None and got.state is LeverState.executing
        assert [x.id for x in await store.in_flight()] == ["REQ-77"]
        assert not await store.transition("REQ-77", {LeverState.approved}, LeverState.executing)  # Moved.NOT_FROM
        with pytest.raises(ValueError, match="not one the store holds"):
            await store.transition("REQ-77", {LeverState.executing}, LeverState.refused)
        with pytest.raises(ValueError, match="not one the store holds"):
            await store.create(rec.model_copy(update={"id": "REQ-78", "state": LeverState.refused}))
        assert await store.get("REQ-78") is None
    finally:
        await r.aclose()
