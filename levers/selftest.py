"""The admission self-test: in each cell, do the admission policies still refuse a forbidden write
sent as Firebreak's own identity? (deploy/admission; issue 35 items 5 and 13)

RBAC lets Firebreak patch objects its levers change; only the ValidatingAdmissionPolicies keep those
patches to the levers' fields, and only for the identity their matchConditions name. A policy that
was deleted, unbound, or names another identity than the one a context authenticates as (a cloud
identity bound in RBAC but not in the policies) lets any field through, and nothing else would say so.

So for each kube context, one write the policies must refuse is sent as Firebreak itself, with
dryRun=All (the API server runs authorization and admission, then stores nothing): a label
`firebreak.io/self-test` on a node (RBAC grants patching nodes for node-quarantine; the node
policies allow only its taint and labels). The outcome:

- refused by a ValidatingAdmissionPolicy: ``ok``;
- accepted: ``let through``, and the replica is NOT ready (/readyz 503, saying which context and
  why), so a deploy with broken admission does not take traffic;
- anything else (the cell unreachable, RBAC refusing the patch, no node to send it to): ``unchecked``
  with why, reported in /readyz but not a reason to be unready: a cell being down must not take
  Firebreak down with it.

It runs at start in each replica (a start hook) and again when /readyz finds the last result older
than RECHECK_S; /readyz itself answers from the last result at once.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from bot import logs
from bot.clusters import KubeError, UnknownCell
from bot.core.services import Services
from levers.plan import MERGE, ApiCall

log = logs.get(__name__)

NAME = "admission"  # its key in /readyz
RECHECK_S = 300.0  # a result older than this is refreshed (in the background) when /readyz asks
FIRST_WAIT_S = 0.5  # /readyz waits this long for a first result before saying "checking"
LABEL = "firebreak.io/self-test"
POLICY_REFUSAL = "ValidatingAdmissionPolicy"  # how the API server names a policy's denial


class Verdict(StrEnum):
    ok = "ok"
    let_through = "let through"
    unchecked = "unchecked"


@dataclass(frozen=True)
class Result:
    context: str
    verdict: Verdict
    why: str

    def __str__(self) -> str:
        return f"{self.verdict}: {self.why}"


def probe(node: str) -> ApiCall:
    """The forbidden write: a label no lever sets, on a node (sent only with dryRun=All)."""
    body = {"metadata": {"labels": {LABEL: "forbidden"}}}
    return ApiCall("PATCH", f"/api/v1/nodes/{node}", MERGE, body, "")


async def check(svc: Services, context: str) -> Result:
    """One context's verdict (never raises for what the cell answers)."""
    try:
        client = await svc.clusters.client(context)
        listed = await client.get("/api/v1/nodes", {"limit": "1"})
        items = listed.get("items") or []
        if not items:
            return Result(context, Verdict.unchecked, "the cell has no node to send the forbidden dry run to")
        node = items[0]["metadata"]["name"]
        await client.send(probe(node), dry_run=True)
    except UnknownCell as e:
        return Result(context, Verdict.unchecked, str(e))
    except KubeError as e:
        if e.code == 403 and POLICY_REFUSAL in e.message:
            return Result(context, Verdict.ok, "a forbidden dry run as Firebreak was refused by the admission policies")
        return Result(context, Verdict.unchecked, f"the forbidden dry run got {e}"[:300])
    return Result(
        context,
        Verdict.let_through,
        f"a forbidden dry run as Firebreak (label {LABEL} on node {node}) was let through: deploy/admission's "
        "policies are missing or unbound here, or their matchConditions name another identity than this "
        "context authenticates as (python -m tools.deploygen --identity)",
    )


@dataclass
class SelfTest:
    """The last results of this replica (each replica checks with its own credentials)."""

    results: dict[str, Result] = field(default_factory=dict)
    at: float | None = None  # time.monotonic() of the last finished run
    running: asyncio.Task[None] | None = None

    @classmethod
    def of(cls, svc: Services) -> SelfTest:
        return cls()

    def stale(self) -> bool:
        return self.at is None or time.monotonic() - self.at > RECHECK_S


def _state(svc: Services) -> SelfTest:
    return svc.part(SelfTest.of)


async def run(svc: Services) -> dict[str, Result]:
    """Check every kube context at once; keep and log the results."""
    contexts = await svc.clusters.contexts() or []
    results = await asyncio.gather(*(check(svc, c) for c in contexts))
    state = _state(svc)
    state.results, state.at = {r.context: r for r in results}, time.monotonic()
    for r in results:
        if r.verdict is Verdict.let_through:
            log.error("admission_self_test_let_through", context=r.context, why=r.why)
        elif r.verdict is Verdict.unchecked:
            log.warning("admission_self_test_unchecked", context=r.context, why=r.why)
        else:
            log.info("admission_self_test_ok", context=r.context)
    return state.results


def _refresh(svc: Services) -> asyncio.Task[None]:
    state = _state(svc)
    if state.running is None or state.running.done():

        async def go() -> None:
            try:
                await run(svc)
            except Exception:  # logged; the next /readyz tries again
                log.exception("admission_self_test_failed")

        state.running = asyncio.get_running_loop().create_task(go())
    return state.running


async def at_start(svc: Services) -> None:
    """The start hook: the first run, in each replica."""
    await _refresh(svc)


async def readiness(svc: Services) -> tuple[str, bool, Any] | None:
    """/readyz: ("admission", ready, each context's verdict); None without a kubeconfig (no cell to check)."""
    if not await svc.clusters.contexts():
        return None
    state = _state(svc)
    if state.stale():
        task = _refresh(svc)
        if state.at is None:
            await asyncio.wait({task}, timeout=FIRST_WAIT_S)
    if state.at is None:
        return NAME, False, "checking: the first forbidden dry run per cell has not answered yet"
    bad = [r for r in state.results.values() if r.verdict is Verdict.let_through]
    return NAME, not bad, {c: str(r) for c, r in sorted(state.results.items())}
