"""Shared steps for the lever tests. Users: U_IC declares (`app.declare`); OPS, MODEL, SEC get roles."""

from __future__ import annotations

import asyncio
import copy
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bot.core.registry import Hook, Port
from fbworld.kube import FakeKubeCluster
from levers.plan import ApiCall
from levers.store import lever_store
from tests.support.harness import RunningApp
from tests.support.messages import channel_texts as channel_texts
from tests.support.messages import say

# Always truthy, so `if KUBECTL:` never quietly skips the kubectl reference run:
# a missing kubectl fails in kubectl() below.
KUBECTL = shutil.which("kubectl") or "kubectl"
OPS, MODEL, SEC, NOBODY = "U0OPS", "U0MODEL", "U0SEC", "U0NOBODY"
PROVENANCE = ("firebreak.io/request", "firebreak.io/incident")
F = TypeVar("F")


@dataclass
class Cells:
    east3: FakeKubeCluster
    east1: FakeKubeCluster
    fleet: FakeKubeCluster
    kubeconfig: Path


def replace_hook(app: RunningApp, hook: Hook[F] | Port[F], *fns: F) -> None:
    """Make ``fns`` the only functions filling ``hook`` (a Port: the one function) in this app. The
    registry is the app's own (built per app), so nothing leaks into other tests."""
    if isinstance(hook, Port):
        (app.services.registry._ports[hook.name],) = fns
    else:
        app.services.registry._hooks[hook.name] = list(fns)


async def start_hooks(app: RunningApp) -> None:
    """Run the app's start hooks once, as a scheduler loop does when a process starts.
    (Candidate for tests/support/harness.py.)"""
    for hook in app.services.scheduler.startup:
        await hook()


async def kubectl(kubeconfig: Path, context: str, *args: str) -> str:
    if shutil.which(KUBECTL) is None:
        raise RuntimeError("kubectl is required: install it (it is on the machine image; see .ci/run)")
    proc = await asyncio.create_subprocess_exec(
        KUBECTL,
        "--kubeconfig",
        str(kubeconfig),
        "--context",
        context,
        # Discovery cached per kubeconfig, not in ~/.kube/cache by host:port: test servers reuse
        # ports, and a cache from another server's API versions makes kubectl ask for the wrong one.
        "--cache-dir",
        str(kubeconfig.parent / ".kube-cache"),
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


def comparable(obj: dict[str, Any] | None, drop_provenance: bool = True) -> dict[str, Any]:
    """The object without server bookkeeping (and, optionally, Firebreak's provenance annotations)."""
    assert obj is not None
    o = copy.deepcopy(obj)
    meta = o["metadata"]
    for k in ("resourceVersion", "generation", "managedFields"):
        meta.pop(k, None)
    if drop_provenance and "annotations" in meta:
        for k in PROVENANCE:
            meta["annotations"].pop(k, None)
        if not meta["annotations"]:
            del meta["annotations"]
    return o


def patches(cell: FakeKubeCluster) -> list:
    """The writes that could store something (a dryRun=All request stores nothing)."""
    return [r for r in cell.requests if r.method != "GET" and r.query.get("dryRun") != "All"]


async def _stored(app, cells, text: str, user: str, channel: str) -> str:
    """A lever planned and stored (dry-run state moved on as the dead process would have)."""
    out = await say(app, text + " --dry-run", user, channel)
    rid = out.split()[0]
    assert rid.startswith("REQ-") and "(dry run)" in out, out
    return rid


async def _crashed_executing(app, rid: str, started: float) -> None:
    assert await lever_store(app.services).transition(rid, {"planned"}, "executing", started_at=started, dry_run=False)


async def _send(app, rid: str, calls: slice = slice(None)) -> None:
    """What the dead process had sent before it died."""
    rec = await lever_store(app.services).get(rid)
    client = await app.services.clusters.client(rec.context)
    for call in rec.plan["calls"][calls]:
        await client.send(ApiCall.from_dict(call))


async def a_fleet_alias_needs_the_fleet_approval(app: RunningApp, cells: Any) -> Any:
    """Context `local` reaches the fleet's API server (however its kubeconfig spells it): a lever
    pulled there waits for the fleet approval and writes nothing; a cell on its own server does
    not. The incident, for the caller's further checks."""
    inc = await app.declare(cells=("local",), roles={"ops": OPS})
    out = await say(app, "lever route-weight edge/chat-global --cell local backend=cell-us-east-1", OPS, inc.channel_id)
    assert "needs approval" in out and "`local` points at the fleet context's API server (`global`)" in out, out
    assert not patches(cells.fleet)
    [rec] = await lever_store(app.services).for_incident(inc.id)
    assert (rec.state, rec.cell, rec.context) == ("pending_approval", "fleet", "local")
    await app.run("scope add us-east-3", user="U_IC", channel=inc.channel_id)
    out = await say(app, "lever kueue-hold research-h100 --cell us-east-3", OPS, inc.channel_id)
    assert "applied and verified" in out, out
    return inc
