"""Shared steps for the lever tests. Users: U_IC declares; OPS, MODEL, SEC get roles."""
from __future__ import annotations

import asyncio
import copy
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.incidents.models import Incident
from tests.fakes.kube import FakeKubeCluster
from tests.harness import RunningApp

KUBECTL = shutil.which("kubectl")
OPS, MODEL, SEC, NOBODY = "U0OPS", "U0MODEL", "U0SEC", "U0NOBODY"
PROVENANCE = ("firebreak.io/request", "firebreak.io/incident")


@dataclass
class Cells:
    east3: FakeKubeCluster
    east1: FakeKubeCluster
    fleet: FakeKubeCluster
    kubeconfig: Path


async def incident(app: RunningApp, roles: dict[str, str] | None = None, cell: str = "us-east-3") -> Incident:
    """Declare as U_IC with one cell, then hand out roles {role: user}."""
    out = await app.run(f"declare GPU trouble --sev 2 --cell {cell}", user="U_IC")
    assert "Declared" in out, out
    inc = await app.services.incidents.get(out.split()[1])
    assert inc is not None and inc.channel_id
    for role, user in (roles or {}).items():
        got = await app.run(f"role {role} <@{user}>", user="U_IC", channel=inc.channel_id)
        assert "Usage" not in got and "Only" not in got, got
    inc = await app.services.incidents.get(inc.id)
    assert inc is not None
    return inc


async def kubectl(kubeconfig: Path, context: str, *args: str) -> str:
    assert KUBECTL
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), "--context", context, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
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
    return [r for r in cell.requests if r.method != "GET"]


def channel_texts(app: RunningApp, channel: str) -> list[str]:
    return [str(m.get("text", "")) for m in app.slack.messages(channel)]


async def say(app: RunningApp, text: str, user: str, channel: str, timeout: float = 15.0) -> str:
    """Like app.run, but waits for the reply after a "Planning …" ack (levers can take seconds)."""
    key = await app.command(text, user=user, channel=channel)
    ack = (app.last_ack or "").strip()
    if ack and "planning" not in ack.lower():
        return ack
    return await app.reply(key, timeout=timeout)
