"""The manifest asks for exactly the bot scopes and events the app needs.

Which Web API methods the app can call is read from its code (bot/, levers/), not listed by hand,
so a new call cannot be missed: every Slack client method called (``client.files_upload_v2`` is
the methods slack_sdk's own code calls for it), every method named to the gateway's wrappers
(``api_call`` / ``_call`` / ``_read``), every string that is a Web API method's name. The scopes
each needs come from the one table the Slack emulator enforces (fbworld.slack.scopes, which cites
Slack's reference). The emulator itself gives the tests' token the manifest's scopes, so a test of
a flow that needs a scope the manifest lacks fails as it would in a real workspace.
"""

from __future__ import annotations

import ast
import functools
import inspect
from pathlib import Path

import slack_sdk.web.async_client as sdk

from bot.slack import events
from fbworld.slack.scopes import (
    EVENT_SCOPES,
    MESSAGE_EVENTS,
    METHOD_SCOPES,
    POST_AS_NONMEMBER,
    PRIVATE,
    PUBLIC,
    manifest,
    manifest_events,
    manifest_scopes,
    scopes_for,
)
from tests.support.core import REPO

PRODUCT = [REPO / "bot", REPO / "levers"]
# Functions whose first argument names the Web API method they call (slack_sdk's, the gateway's).
WRAPPERS = frozenset({"api_call", "_call", "_read"})
# Incident channels are public or private (`declare --private`, every security alert); so can the
# security and stakeholder channels be. Every conversation method is used with both kinds.
KINDS = (PUBLIC, PRIVATE)
# Bolt's single-workspace authorization calls auth.test on the first request (no scope).
BOLT_CALLS = frozenset({"auth.test"})


@functools.cache
def sdk_methods() -> dict[str, set[str]]:
    """slack_sdk's AsyncWebClient: each method -> the Web API methods it calls, read from its code
    (``self.api_call("x.y", ...)``, and through the other methods it calls)."""
    tree = ast.parse(inspect.getsource(sdk))
    [cls] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "AsyncWebClient"]
    direct: dict[str, set[str]] = {}
    calls: dict[str, set[str]] = {}
    for fn in cls.body:
        if not isinstance(fn, ast.AsyncFunctionDef | ast.FunctionDef):
            continue
        direct[fn.name], calls[fn.name] = set(), set()
        for node in ast.walk(fn):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if not (isinstance(node.func.value, ast.Name) and node.func.value.id == "self"):
                continue
            if node.func.attr == "api_call" and node.args and isinstance(node.args[0], ast.Constant):
                direct[fn.name].add(str(node.args[0].value))
            else:
                calls[fn.name].add(node.func.attr)
    resolved: dict[str, set[str]] = {}

    def resolve(name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        if name not in direct or name in seen:
            return set()
        if name not in resolved:
            got = set(direct[name])
            for other in calls[name]:
                got |= resolve(other, seen | {name})
            resolved[name] = got
        return resolved[name]

    return {name: found for name in direct if (found := resolve(name))}


def _imports_slack(tree: ast.Module) -> bool:
    for node in ast.walk(tree):
        names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        if any(n.split(".")[0] in ("slack_sdk", "slack_bolt") for n in names):
            return True
    return False


class _Scan(ast.NodeVisitor):
    """One module's Web API calls, each call seen with the function it is in."""

    def __init__(self, where: str, slack_module: bool, by_sdk: dict[str, set[str]], api_names: set[str]) -> None:
        self.where, self.slack_module, self.by_sdk, self.api_names = where, slack_module, by_sdk, api_names
        self.found: dict[str, set[str]] = {}
        self.unnamed: list[str] = []
        self.fn: ast.FunctionDef | ast.AsyncFunctionDef | None = None

    def _in(self, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.fn = self.fn, fn
        self.generic_visit(fn)
        self.fn = outer

    visit_FunctionDef = visit_AsyncFunctionDef = _in

    def visit_Constant(self, node: ast.Constant) -> None:
        if isinstance(node.value, str) and node.value in self.api_names:
            self.found.setdefault(node.value, set()).add(f"{self.where}:{node.lineno}")

    def visit_Call(self, node: ast.Call) -> None:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name in self.by_sdk and name != "api_call":
            for m in self.by_sdk[name]:
                self.found.setdefault(m, set()).add(f"{self.where}:{node.lineno} ({name})")
        if name in WRAPPERS and self.slack_module and node.args:
            first = node.args[0]
            literal = isinstance(first, ast.Constant) and isinstance(first.value, str)
            fn = self.fn
            passed_on = (
                isinstance(first, ast.Name)
                and fn is not None
                and fn.name in WRAPPERS
                and first.id in {a.arg for a in fn.args.args}
            )
            if not literal and not passed_on:
                self.unnamed.append(f"{self.where}:{node.lineno}: {ast.unparse(node)[:80]}")
        self.generic_visit(node)


@functools.cache
def product_calls() -> tuple[dict[str, frozenset[str]], tuple[str, ...]]:
    """Every Web API method the product's code can call -> where; and the calls whose method the
    code does not name (a wrapper handed something other than a literal or its own parameter)."""
    by_sdk = sdk_methods()
    api_names = set().union(*by_sdk.values())
    found: dict[str, set[str]] = {}
    unnamed: list[str] = []
    for root in PRODUCT:
        for path in sorted(root.rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            slack_module = _imports_slack(tree) or path.parent.name == "slack"
            scan = _Scan(str(path.relative_to(REPO)), slack_module, by_sdk, api_names)
            scan.visit(tree)
            for m, where in scan.found.items():
                found.setdefault(m, set()).update(where)
            unnamed.extend(scan.unnamed)
    return {m: frozenset(w) for m, w in found.items()}, tuple(unnamed)


def test_the_scan_reads_slack_sdk_and_the_gateway():
    """Not vacuous: slack_sdk's client resolves as its code says, and the gateway's calls are found."""
    by_sdk = sdk_methods()
    assert by_sdk["files_upload_v2"] == {"files.getUploadURLExternal", "files.completeUploadExternal"}
    assert by_sdk["conversations_create"] == {"conversations.create"}
    found, _ = product_calls()
    assert {"conversations.create", "chat.postMessage", "usergroups.list", "files.completeUploadExternal"} <= set(found)
    assert any(w.startswith("bot/slack/gateway.py") for w in found["conversations.create"])


def test_every_method_the_product_calls_is_named_and_known_to_the_emulator():
    found, unnamed = product_calls()
    assert unnamed == (), f"Web API calls whose method the code does not name: {unnamed}"
    unknown = {m: sorted(w) for m, w in found.items() if m not in METHOD_SCOPES}
    assert unknown == {}, (
        "the product calls Web API methods the Slack emulator does not serve: serve them and give their bot "
        f"scopes (Slack's method reference) in fbworld/slack/scopes.py METHOD_SCOPES: {unknown}"
    )
    assert set(METHOD_SCOPES) >= BOLT_CALLS


def needed_scopes() -> dict[str, str]:
    """Every scope the app needs -> why (the first method or feature that needs it)."""
    found, _ = product_calls()
    why: dict[str, str] = {}
    for method in sorted(set(found) | BOLT_CALLS):
        for scope in sorted(scopes_for(method, KINDS)):
            why.setdefault(scope, f"{method} ({sorted(found.get(method, {'Bolt'}))[0]})")
    # The stakeholder and security channels take posts without inviting the bot (docs/operating.md).
    why.setdefault(POST_AS_NONMEMBER, "chat.postMessage in a public channel the bot was not invited to")
    if (manifest().get("features") or {}).get("slash_commands"):
        why.setdefault("commands", "the slash command")
    for event in needed_events():
        why.setdefault(EVENT_SCOPES[event], f"the {event} event")
    return why


def needed_events() -> set[str]:
    """The app listens to message events (secret scanning) in incident channels, public and private."""
    assert {"message"} == events.EVENT_TYPES, "a new event type: subscribe to it in the manifest and add it here"
    return {MESSAGE_EVENTS[k] for k in KINDS}


def test_the_manifest_asks_for_every_scope_the_app_needs_and_no_other():
    need, asked = needed_scopes(), manifest_scopes()
    missing = {s: why for s, why in need.items() if s not in asked}
    assert missing == {}, f"deploy/slack-app-manifest.yaml lacks scopes the app needs: {missing}"
    unneeded = sorted(set(asked) - set(need))
    assert unneeded == [], f"the manifest asks for scopes nothing in the app uses: {unneeded}"
    assert len(asked) == len(set(asked))


def test_the_manifest_subscribes_to_the_events_the_app_handles_with_their_scopes():
    subscribed = manifest_events()
    assert set(subscribed) == needed_events() and len(subscribed) == len(set(subscribed))
    assert {EVENT_SCOPES[e] for e in subscribed} <= set(manifest_scopes())


def test_each_scope_says_why_in_the_manifest():
    """A comment on every scope's line (the reviewer of an install request reads them)."""
    lines = Path(REPO / "deploy" / "slack-app-manifest.yaml").read_text().splitlines()
    for scope in manifest_scopes():
        [line] = [ln for ln in lines if ln.strip().startswith(f"- {scope} ") or ln.strip() == f"- {scope}"]
        assert "#" in line and len(line.split("#", 1)[1].strip()) > 10, line
