"""How lever requests read in chat: short, with the REQ id, saying what happened and what next."""

from __future__ import annotations

from typing import Any

from bot.chat.text import code_block, inert, literal, person
from bot.clusters import KubeError
from levers.catalogue import LEVERS
from levers.plan import canonical
from levers.price import Price
from levers.requests import LeverRequest, LeverState

NOT_PULLED = "Not pulled, nothing changed: "


def _effect(rec: LeverRequest) -> str:
    """The plan's effect line: it names what the lever found in the cluster (a ScaledObject's target, a
    backend), so it reaches chat inert (bot/chat/text.py)."""
    return inert(str(rec.plan.get("effect") or ""))


def _said(rec: LeverRequest, text: str) -> str:
    """A verdict or a reason for chat: cluster data inside it (Argo's status message, the API server's
    error echoing a name) made inert; only the request's own people stay mentioned."""
    return inert(text, tuple(u for u in (rec.requester, rec.approved_by, rec.undone_by) if u))


def no_context(cell: str, context: str, fleet: bool, known: list[str] | None) -> str:
    """A cell Firebreak has no kube context for: say which context is missing, and where."""
    if known is None:
        what = f"the fleet context `{context}`" if fleet else f"cell {cell}"
        return (
            f"{NOT_PULLED}Firebreak has no kube config for {what} (KUBECONFIG unset). "
            "Whoever runs Firebreak must set KUBECONFIG (one context per cell)."
        )
    name = f"`{context}` (the fleet context)" if fleet else f"`{context}` for cell {cell}"
    hint = "" if fleet else " Pick one with `--cell <cell>`."
    return f"{NOT_PULLED}no kube context {name} in KUBECONFIG (contexts: {', '.join(known) or 'none'}).{hint}"


def api_error(e: KubeError) -> str:
    """The API server's answer, with the causes behind a generic message (a 422's details.causes), short."""
    text = str(e)
    causes = [c if len(c) <= 160 else c[:157] + "…" for c in e.causes if c and c not in text][:3]
    return f"{text} ({'; '.join(causes)})" if causes else text


def plan_text(rec: LeverRequest) -> str:
    """The exact API call(s) and the kubectl equivalent, for dry-runs and approval cards."""
    calls = rec.plan.get("calls") or []
    wire = "\n".join(
        f"{c['method']} {c['path']}\nContent-Type: {c['content_type']}\n{canonical(c['body'])}" for c in calls
    )
    # The plan carries cluster data (names, annotation values): kept inside its blocks (bot/chat/text.py).
    return f"API:\n{code_block(wire)}\nkubectl:\n{code_block(rec.plan.get('kubectl', ''))}"


def server_said(answers: list[dict[str, Any]]) -> str:
    """What the API server answered the dryRun=All request(s)."""
    refused = [a for a in answers if not a["accepted"]]
    if not refused:
        return "The API server accepted it (dryRun=All: RBAC, admission and schema checked; nothing stored)."
    said = inert("; ".join(f"{a['call']}: {a['error']}" for a in refused))  # its message echoes cluster data
    return f"The API server REFUSED it (dryRun=All), so a real pull would fail: {said}."


def price_line(rec: LeverRequest) -> str:
    """The request's price as raw bullet lines (levers/price.py), or that it has none (planned before
    levers stated prices). It holds cluster data (an annotation's value): chat text goes through
    price_text; the approval card escapes it itself."""
    price = Price.from_record(rec.plan.get("price"))
    if price is None:
        return "not stated (planned before levers stated prices)"
    return "\n".join(price.lines()) or "nothing to state"


def price_text(rec: LeverRequest) -> str:
    """The price for chat, the one layout every reply and post uses, made inert (bot/chat/text.py
    literal: nothing in an annotation pings or links). A figure that could not be read says
    `unknown` and why; none is ever shown as 0."""
    return literal(f"Price (read now):\n{price_line(rec)}")


def applying(rec: LeverRequest) -> str:
    """Posted in the incident channel just before the write: what it does, and what it costs."""
    who = (
        f"approved by {person(rec.approved_by)}" if rec.approved_by and rec.approved_by != "policy" else "within policy"
    )
    return (
        f"{rec.label}: applying now ({who}, asked by {person(rec.requester)}): {_effect(rec)}.\n"
        f"{price_text(rec)}\nkubectl:\n{code_block(rec.plan.get('kubectl', ''))}"
    )


def dry_run(rec: LeverRequest) -> str:
    notes = "".join(f"\n{_said(rec, n)}" for n in rec.notes)
    needs = inert("; ".join(rec.needs_approval))
    approval = f"\nWould need approval: {needs}." if rec.needs_approval else ""
    server = f"\n{server_said(rec.result['dry_run'])}" if "dry_run" in rec.result else ""
    return (
        f"{rec.label} (dry run): plan: {_effect(rec)}.{notes}\n{price_text(rec)}{approval}{server}\n"
        f"{plan_text(rec)}\n"
        "Nothing was changed."
    )


def undo_hint(rec: LeverRequest) -> str:
    lever = LEVERS[rec.lever]
    if lever.reversible:
        return f"Undo: /incident undo {rec.id}"
    return f"No Firebreak undo: {lever.not_reversible_why}."


def done(rec: LeverRequest, verified: bool, text: str, rv: str | None) -> str:
    rv_part = f", rv {inert(rv)}" if rv else ""
    text = _said(rec, text)
    if verified:
        return f"{rec.label}: applied and verified ({text}{rv_part}). {undo_hint(rec)}\n{price_text(rec)}"
    return f"{rec.label}: applied{rv_part} but NOT verified: {text}. {undo_hint(rec)}\n{price_text(rec)}"


def failed(rec: LeverRequest, reason: str) -> str:
    return f"{rec.label}: failed: {_said(rec, reason)}."


def needs_approval(rec: LeverRequest) -> str:
    return (
        f"{rec.label} needs approval ({inert('; '.join(rec.needs_approval))}): posted for approval. "
        f"Once approved: {_effect(rec)}; nothing has changed yet.\n{price_text(rec)}"
    )


def status_line(recs: list[LeverRequest]) -> str | None:
    shown = {
        LeverState.pending_approval: "awaiting approval",
        LeverState.approved: "approved",
        LeverState.executing: "running",
        LeverState.done: "applied",
        LeverState.undoing: "being undone",
    }
    items = [
        f"{r.label} {shown[r.state]}"
        + (f" (undo: /incident undo {r.id})" if r.state is LeverState.done and LEVERS[r.lever].reversible else "")
        for r in recs
        if r.state in shown
    ]
    return ("Open levers: " + "; ".join(items)) if items else None


def audit_plan(rec: LeverRequest) -> dict[str, Any]:
    return {
        **rec.ids(),
        "context": rec.context,
        "plan": rec.plan,
        "pre_state": rec.pre_state,
        "digest": rec.digest,
        "price": rec.plan.get("price"),
    }
