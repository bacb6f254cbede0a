"""Rebuild a lever's run context from a stored request (execution after approval, undo)."""

from __future__ import annotations

from bot.core.services import Services
from levers.base import Ctx, Target, params_of, version_of
from levers.catalogue import LEVERS
from levers.requests import LeverRequest


async def for_record(svc: Services, rec: LeverRequest) -> Ctx:
    lever = LEVERS[rec.lever]
    client = await svc.clusters.client(rec.context)
    target = Target.parse(rec.target, lever.kind.namespaced, lever.kind.kind)
    return Ctx(
        svc=svc,
        kube=client,
        req_id=rec.id,
        incident=rec.incident,
        cell=rec.cell,
        context=rec.context,
        target=target,
        params=params_of(lever, rec.params),
        requester=rec.requester,
        version=await version_of(lever.kind, client),
        budget_override=rec.budget_override,
    )
